"""
recbole_attn.data.histories
###########################

The users' TRAINING histories: one chronological item sequence per user, built from the
training split only, so that no validation or test interaction is ever in it. Models that
learn from whole histories before or besides training (DPAtt's category kernel, RKSA's
co-occurrence counts) read them through :func:`training_histories`, independently of the
training mode.

RecBole's sequential datasets hold one row per target interaction: ``item_seq`` (the last
``MAX_ITEM_LIST_LENGTH`` items before the target) and the target. The training history of a
user is the prefix of their first training row followed by the targets of all their
training rows, in time order; :class:`~recbole_attn.data.dataset.AttnSequentialDataset`
computes it before the ``all_position`` mode keeps one row per user, so it is complete (not
cut to ``MAX_ITEM_LIST_LENGTH``) in both modes.
"""

from typing import NamedTuple

import torch

#: attribute of a training dataset that holds its :class:`TrainingHistories`
HISTORIES_ATTR = "_training_histories"


class TrainingHistories(NamedTuple):
    """Histories in compressed form: the items of user ``users[i]`` are
    ``items[offsets[i]:offsets[i+1]]``, oldest first."""

    users: torch.Tensor  # [U]
    offsets: torch.Tensor  # [U + 1]
    items: torch.Tensor  # [N]

    @property
    def lengths(self):
        return self.offsets[1:] - self.offsets[:-1]

    def padded(self, max_length=None):
        """Right-padded ``[U, W]`` histories (0 = padding) and their lengths ``[U]``;
        with ``max_length``, each history is cut to its most recent ``max_length`` items.
        """
        lengths = self.lengths
        if max_length is not None:
            lengths = lengths.clamp(max=max_length)
        width = int(lengths.max()) if lengths.numel() else 0
        out = torch.zeros(len(self.users), max(width, 1), dtype=torch.long)
        steps = torch.arange(out.size(1))
        keep = steps.unsqueeze(0) < lengths.unsqueeze(1)
        start = self.offsets[1:] - lengths  # the most recent `lengths` items
        out[keep] = self.items[(start.unsqueeze(1) + steps.unsqueeze(0))[keep]]
        return out, lengths


def histories_from_rows(uid, item_seq, item_seq_len, targets):
    """:class:`TrainingHistories` from sequential rows grouped by user in time order
    (RecBole's augmented ``inter_feat``): per user, the first row's prefix, then every
    row's target."""
    n = uid.numel()
    if n == 0:
        empty = torch.zeros(0, dtype=torch.long)
        return TrainingHistories(empty, torch.zeros(1, dtype=torch.long), empty)
    starts = torch.ones(n, dtype=torch.bool)
    starts[1:] = uid[1:] != uid[:-1]
    first = starts.nonzero().squeeze(1)  # first row of every user
    group = starts.long().cumsum(0) - 1  # user group of every row
    counts = torch.bincount(group)
    prefix_len = item_seq_len[first].long()
    sizes = prefix_len + counts
    offsets = torch.zeros(len(first) + 1, dtype=torch.long)
    offsets[1:] = sizes.cumsum(0)
    items = torch.zeros(int(offsets[-1]), dtype=torch.long)
    # the prefixes
    width = item_seq.size(1)
    steps = torch.arange(width)
    in_prefix = steps.unsqueeze(0) < prefix_len.unsqueeze(1)
    dest = offsets[:-1].unsqueeze(1) + steps.unsqueeze(0)
    items[dest[in_prefix]] = item_seq[first][in_prefix].long()
    # then the targets, in row order
    rank = torch.arange(n) - first[group]
    items[offsets[group] + prefix_len[group] + rank] = targets.long()
    return TrainingHistories(uid[first].long(), offsets, items)


def training_histories(dataset):
    """The :class:`TrainingHistories` of a training split.

    Uses the histories recorded by :class:`~recbole_attn.data.dataset.AttnSequentialDataset`
    when present; otherwise rebuilds them from the split's rows (complete in RecBole's
    prefix mode; in a split already reduced to one row per user, each history is that
    row's prefix and target).
    """
    recorded = getattr(dataset, HISTORIES_ATTR, None)
    if recorded is not None:
        return recorded
    feat = dataset.inter_feat
    return histories_from_rows(
        feat[dataset.uid_field],
        feat[dataset.item_id_list_field],
        feat[dataset.item_list_length_field],
        feat[dataset.iid_field],
    )


def item_counts(dataset, n_items):
    """``[n_items]``: the number of training interactions of every item (in the
    :func:`training_histories` of the training split ``dataset``; 0 for the padding
    item), what popularity-based negative sampling draws by."""
    return torch.bincount(training_histories(dataset).items, minlength=n_items)
