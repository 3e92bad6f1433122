"""The users' TRAINING histories: one chronological item sequence per user from the
training split only (no held-out item), complete in both training modes; DPAtt's
category kernel and RKSA's co-occurrence counts read them (:func:`training_histories`).
"""

from typing import NamedTuple

import torch

#: attribute of a training dataset that holds its :class:`TrainingHistories`
HISTORIES_ATTR = "_training_histories"


class TrainingHistories(NamedTuple):
    """Histories: user ``users[i]``'s items are ``items[offsets[i]:offsets[i+1]]``,
    oldest first."""

    users: torch.Tensor  # [U]
    offsets: torch.Tensor  # [U + 1]
    items: torch.Tensor  # [N]

    @property
    def lengths(self):
        return self.offsets[1:] - self.offsets[:-1]

    def padded(self, max_length=None):
        """Right-padded ``[U, W]`` histories cut to their last ``max_length`` items, and
        their lengths."""
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
    """Histories from RecBole's rows: the first row's prefix, then every row's target."""
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
    steps = torch.arange(item_seq.size(1))  # the prefixes
    in_prefix = steps.unsqueeze(0) < prefix_len.unsqueeze(1)
    dest = offsets[:-1].unsqueeze(1) + steps.unsqueeze(0)
    items[dest[in_prefix]] = item_seq[first][in_prefix].long()
    # then the targets, in row order
    rank = torch.arange(n) - first[group]
    items[offsets[group] + prefix_len[group] + rank] = targets.long()
    return TrainingHistories(uid[first].long(), offsets, items)


def training_histories(dataset):
    """The recorded :class:`TrainingHistories` of a training split, else rebuilt."""
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
    """``[n_items]`` training interactions per item (popularity negatives draw by them)."""
    return torch.bincount(training_histories(dataset).items, minlength=n_items)
