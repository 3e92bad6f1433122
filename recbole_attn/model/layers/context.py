"""What every layer of a sequence encoder may read about the batch it encodes.

A :class:`SequenceContext` is built once per forward pass by the model
(:meth:`~recbole_attn.model.abstract_recommender.AttnSequentialRecommender.sequence_context`)
and handed to every attention layer, score module and refiner. It carries the (trimmed)
item sequences, the position ids under the model's ``position_alignment``, the user ids,
the one attention mask convention of the package, and three things layers write back:
the attention matrices when they are recorded (:meth:`attention_weights`), auxiliary
loss terms (:meth:`SequenceContext.add_aux_loss`: a mean together with the number of
terms it averages, so that length grouping can combine groups exactly), and per-batch
values cached for the other layers.
"""

from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple, Optional, Union

import torch
import torch.nn.functional as F

from recbole_attn.model.layers.masks import causal_padding_mask

#: ``first``: position ids count from the first item of the sequence (RecBole's SASRec);
#: ``last``: they count back from the most recent item, which always has id T - 1 (the
#: left-padded official code of SASRec, STOSA, PAtt and FPARec)
POSITION_ALIGNMENTS = ("first", "last")


def position_ids(item_seq_len, length, max_length, alignment):
    """Position ids ``[B, length]`` of right-padded sequences.

    ``first``: ``0 .. length-1`` for every row. ``last``: item i of a sequence of n items
    gets ``max_length - n + i``, so the most recent item is always at ``max_length - 1``
    whatever the batch's padding (padding positions are clamped to ``max_length - 1``;
    causal attention never lets a valid position read them). Both are exact under batch
    trimming: a valid item's id depends only on its own sequence.
    """
    steps = torch.arange(length, device=item_seq_len.device)
    if alignment == "first":
        return steps.unsqueeze(0).expand(item_seq_len.size(0), length)
    offset = (max_length - item_seq_len).unsqueeze(1)
    return (steps.unsqueeze(0) + offset).clamp(max=max_length - 1)


def select_rows(x, rows):
    """``x[b, rows[b]]`` as ``[B, 1, ...]`` (one position per sequence); ``x`` itself when
    ``rows`` is None. Works on a tensor or a tuple of tensors ``[B, L, ...]``."""
    if rows is None:
        return x
    if isinstance(x, tuple):
        return tuple(select_rows(t, rows) for t in x)
    return x[torch.arange(x.size(0), device=x.device), rows].unsqueeze(1)


class AuxLoss(NamedTuple):
    """An auxiliary loss term of a batch: ``value``, a scalar MEAN over ``count`` terms
    (sequences, query rows, ...; the value is 0 when count is 0)."""

    value: torch.Tensor
    count: Union[int, torch.Tensor]


class AuxLossValues(tuple):
    """The values of a context's auxiliary losses (read-only: a layer adds one with
    :meth:`SequenceContext.add_aux_loss`, which also takes the count it averages over).
    """

    def append(self, value):
        raise TypeError(
            "add an auxiliary loss with context.add_aux_loss(value, count): value is a "
            "mean over count terms (sequences, query rows, ...), which length grouping "
            "needs to weight the groups of a batch exactly"
        )


@dataclass(eq=False)
class SequenceContext:
    """The batch an encoder works on.

    Attributes:
        item_seq: ``[B, L]`` right-padded item ids (0 = padding), cut to the batch's
            longest sequence unless ``trim_batch: False``.
        item_seq_len: ``[B]``.
        positions: ``[B, L]`` position ids (:func:`position_ids`).
        max_length: T = ``MAX_ITEM_LIST_LENGTH``, the size of position-indexed tables.
        alignment: the ``position_alignment`` the ids were made with.
        user: ``[B]`` user ids, or None when the interaction has none.
        query_index: ``[B]`` or None; when set, the last layer computes only this position
            of every sequence (the last-position shortcut of prediction).
        record: whether attention layers append their matrices to ``attention``.
    """

    item_seq: torch.Tensor
    item_seq_len: torch.Tensor
    positions: torch.Tensor
    max_length: int
    alignment: str = "first"
    user: Optional[torch.Tensor] = None
    query_index: Optional[torch.Tensor] = None
    record: bool = False
    #: per layer, ``[B, h, L, L]``: the matrix each attention aggregated with
    attention: list = field(default_factory=list)
    #: per layer, the normalized matrix before a refiner changed it (refined layers only)
    unrefined: list = field(default_factory=list)
    #: auxiliary loss terms added by layers (:meth:`add_aux_loss`)
    aux_loss_terms: list = field(default_factory=list)
    #: per-batch inputs a model hands to its layers (e.g. DPAtt's category kernel)
    features: dict = field(default_factory=dict)
    _cache: dict = field(default_factory=dict, repr=False)

    def add_aux_loss(self, value, count):
        """Add an auxiliary loss term to the batch's loss: ``value`` is a scalar MEAN
        over ``count`` terms of this batch (an int or a 0-dim tensor: the number of
        sequences for a per-sequence mean, of query rows for a per-row mean, ...; value
        0 with count 0 when there is none). ``calculate_loss`` returns it after the
        position losses; when a batch is split into length groups, the group values are
        averaged with weights ``count``, which gives exactly the ungrouped batch's mean.
        A term that is not a mean (a sum, a max, a batch statistic) cannot be split:
        set ``length_grouping = False`` on the model instead."""
        self.aux_loss_terms.append(AuxLoss(value, count))

    @property
    def aux_losses(self):
        """The values of the auxiliary loss terms, in the order they were added."""
        return AuxLossValues(term.value for term in self.aux_loss_terms)

    @cached_property
    def valid(self):
        """``[B, L]`` bool: True at real items."""
        return self.item_seq > 0

    @cached_property
    def attention_mask(self):
        """``[B, 1, L, L]`` bool, THE mask of every attention: query t may read key k iff
        ``k <= t`` and k is a real item."""
        return causal_padding_mask(self.item_seq)

    def cached(self, key, compute):
        """A per-batch value shared by all layers (computed on first use)."""
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    @cached_property
    def window_start(self):
        """The first position id a real item of this batch can have: 0 (``first``) or
        ``max_length - L`` (``last``); every id lies in ``[start, start + L)``."""
        if self.alignment == "first":
            return 0
        return self.max_length - self.item_seq.size(1)

    def position_one_hot(self, dtype):
        """``[B, L, L]``: row i is the one-hot of position ``positions[:, i] -
        window_start``. Gathering a position-indexed table through it is a matmul, whose
        backward has no scatter of many updates into the same entries (an indexed gather's
        backward accumulates B L^2 of them into a few rows, slow on GPUs)."""
        return self.cached(
            ("position_one_hot", dtype),
            lambda: F.one_hot(
                self.positions - self.window_start, self.item_seq.size(1)
            ).to(dtype),
        )
