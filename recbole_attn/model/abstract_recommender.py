"""
recbole_attn.model.abstract_recommender
#######################################

Shared training infrastructure of our sequential models (DESIGN §4, §8):

* both training modes (``all_position``: a loss at every valid position of one sequence per
  user; ``last_position``: RecBole's one prefix per sample) through one code path;
* batch trimming: every batch is cut to its longest sequence (RecBole right-pads to
  ``MAX_ITEM_LIST_LENGTH``; with causal attention and absolute positions counted from the
  first item this is exact);
* one uniform negative per position, drawn in one tensor operation among the items the user
  has not interacted with in the training sequence.

A subclass implements :meth:`encode` (per-position outputs), :meth:`position_loss`,
:meth:`score_items` and :meth:`score_all_items`; ``calculate_loss``, ``predict`` and
``full_sort_predict`` are provided here.
"""

import torch
import torch.nn.functional as F
from torch import nn
from recbole.model.abstract_recommender import SequentialRecommender
from recbole.utils import InputType

from recbole_attn.data.dataset import check_training_mode
from recbole_attn.errors import ConfigError

#: losses of :meth:`AttnSequentialRecommender.sampled_loss` (one sampled negative per
#: position) and CE (softmax over all items), the loss types our models share
SAMPLED_LOSS_TYPES = ("BCE", "BPR")
LOSS_TYPES = SAMPLED_LOSS_TYPES + ("CE",)


def check_loss_type(model_name, loss_type):
    """Raise a :class:`ConfigError` unless ``loss_type`` is one of :data:`LOSS_TYPES`;
    return whether it needs one sampled negative per position."""
    if loss_type not in LOSS_TYPES:
        raise ConfigError(
            f"{model_name} supports loss_type {list(LOSS_TYPES)} (BCE = the SASRec and "
            f"PAtt papers' loss), got {loss_type!r}"
        )
    return loss_type in SAMPLED_LOSS_TYPES


def map_output(fn, output):
    """Apply ``fn`` to a tensor or to every tensor of a tuple of tensors."""
    if isinstance(output, tuple):
        return tuple(fn(o) for o in output)
    return fn(output)


class AttnSequentialRecommender(SequentialRecommender):
    r"""Base class of recbole_attn's sequential recommenders.

    Config keys read here: ``training_mode`` (``all_position`` | ``last_position``),
    ``neg_exclude_seen`` (negatives avoid the items of the user's training sequence, as in
    the official code of STOSA and PAtt; False = plain uniform sampling), ``trim_batch``.
    """

    input_type = InputType.POINTWISE
    #: whether :meth:`position_loss` needs one sampled negative per position
    needs_negatives = False

    def __init__(self, config, dataset):
        super().__init__(config, dataset)
        self.training_mode = check_training_mode(config)
        self.trim_batch = config["trim_batch"] is not False
        exclude = config["neg_exclude_seen"]
        self.neg_exclude_seen = True if exclude is None else bool(exclude)

    # ------------------------------------------------------------------ to implement
    def encode(self, item_seq, item_seq_len):
        """Per-position outputs ``[B, L, ...]`` (a tensor or a tuple of tensors)."""
        raise NotImplementedError

    def position_loss(self, output, pos_items, neg_items):
        """Loss from outputs gathered at N training positions ``[N, ...]`` and their
        targets ``pos_items [N]`` (and ``neg_items [N]`` when :attr:`needs_negatives`).
        Returns a scalar or a tuple of scalars (RecBole sums and logs them)."""
        raise NotImplementedError

    def score_items(self, output, items):
        """Scores ``[B]`` of ``items [B]`` from last-position outputs ``[B, ...]``."""
        raise NotImplementedError

    def score_all_items(self, output):
        """Scores ``[B, n_items]`` of every item; larger is better."""
        raise NotImplementedError

    # ------------------------------------------------------------------ shared
    def _init_weights(self, module):
        """RecBole's SASRec initialization: N(0, initializer_range) for linear and
        embedding weights, zero biases, unit LayerNorm."""
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(mean=0.0, std=self.initializer_range)
        elif isinstance(module, nn.LayerNorm):
            module.bias.data.zero_()
            module.weight.data.fill_(1.0)
        if isinstance(module, nn.Linear) and module.bias is not None:
            module.bias.data.zero_()

    @staticmethod
    def sampled_loss(pos_score, neg_score, loss_type):
        """Loss of one positive and one sampled negative score per position: ``BCE``
        (:math:`-\log\sigma(s^+) - \log(1-\sigma(s^-))`, the SASRec and PAtt papers') or
        ``BPR`` (:math:`-\log\sigma(s^+ - s^-)`), averaged over positions."""
        if loss_type == "BPR":
            return F.softplus(neg_score - pos_score).mean()
        if loss_type == "BCE":
            return (F.softplus(-pos_score) + F.softplus(neg_score)).mean()
        raise ConfigError(
            f"sampled_loss: loss_type must be BCE or BPR, got {loss_type!r}"
        )

    def trim(self, item_seq, item_seq_len):
        """Cut a right-padded batch to its longest sequence (unless ``trim_batch: False``,
        which exists to measure what trimming saves; results are identical)."""
        if not self.trim_batch:
            return item_seq
        max_len = int(item_seq_len.max()) if item_seq_len.numel() else 1
        return item_seq[:, : max(max_len, 1)]

    def training_targets(self, item_seq, item_seq_len, pos_items):
        """Targets ``[B, L]`` and the mask of positions that carry a loss.

        all_position: the target of position t is the item at t+1 and, at the last valid
        position, the sample's target item. last_position: only the last valid position.
        """
        batch, length = item_seq.shape
        last = (item_seq_len - 1).clamp(min=0)
        rows = torch.arange(batch, device=item_seq.device)
        if self.training_mode == "all_position":
            targets = torch.zeros_like(item_seq)
            targets[:, :-1] = item_seq[:, 1:]
            targets[rows, last] = pos_items
            positions = torch.arange(length, device=item_seq.device)
            mask = positions.unsqueeze(0) < item_seq_len.unsqueeze(1)
            targets = targets * mask
        else:
            targets = torch.zeros_like(item_seq)
            targets[rows, last] = pos_items
            mask = torch.zeros_like(item_seq, dtype=torch.bool)
            mask[rows, last] = True
        return targets, mask

    def sample_negatives(self, item_seq, targets):
        """One negative item per position ``[B, L]``, uniform over ``[1, n_items)``.

        With ``neg_exclude_seen`` (default) the draw is uniform over the items that are NOT
        in the user's training sequence (inputs and targets), exactly, in one multinomial
        draw per batch (a ``[B, n_items]`` weight matrix); a user who has seen every item
        falls back to all items.
        """
        batch, length = targets.shape
        if not self.neg_exclude_seen:
            return torch.randint(
                1, self.n_items, (batch, length), device=targets.device
            )
        weights = torch.ones(batch, self.n_items, device=targets.device)
        weights.scatter_(1, item_seq, 0.0)
        weights.scatter_(1, targets, 0.0)
        weights[:, 0] = 0.0
        exhausted = weights.sum(1) == 0
        if bool(exhausted.any()):
            weights[exhausted, 1:] = 1.0
        return torch.multinomial(weights, length, replacement=True)

    def calculate_loss(self, interaction):
        item_seq_len = interaction[self.ITEM_SEQ_LEN]
        item_seq = self.trim(interaction[self.ITEM_SEQ], item_seq_len)
        targets, mask = self.training_targets(
            item_seq, item_seq_len, interaction[self.POS_ITEM_ID]
        )
        output = self.encode(item_seq, item_seq_len)
        output = map_output(lambda o: o[mask], output)
        neg_items = None
        if self.needs_negatives:
            neg_items = self.sample_negatives(item_seq, targets)[mask]
        return self.position_loss(output, targets[mask], neg_items)

    def encode_last(self, item_seq, item_seq_len):
        """Outputs ``[B, ...]`` at the last valid position of every sequence. Override it
        when the model can compute the last position more cheaply than all of them."""
        output = self.encode(item_seq, item_seq_len)
        return map_output(lambda o: self.gather_indexes(o, item_seq_len - 1), output)

    def last_output(self, interaction):
        item_seq_len = interaction[self.ITEM_SEQ_LEN]
        item_seq = self.trim(interaction[self.ITEM_SEQ], item_seq_len)
        return self.encode_last(item_seq, item_seq_len)

    def predict(self, interaction):
        output = self.last_output(interaction)
        return self.score_items(output, interaction[self.ITEM_ID])

    def full_sort_predict(self, interaction):
        return self.score_all_items(self.last_output(interaction))
