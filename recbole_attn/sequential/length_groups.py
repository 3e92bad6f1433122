r"""Exact length grouping of a batch (docs/models.md, "Training").

RecBole right-pads every sequence to ``MAX_ITEM_LIST_LENGTH``; a batch trimmed to its
longest sequence still pads every short sequence to the length of the one long sequence
that a random batch of a few hundred users almost always contains (Office: mean length
10.9, T = 100). Length grouping sorts the batch by length, splits it into at most
``length_groups`` contiguous groups of the sorted lengths, and runs each group trimmed to
its own longest sequence. The boundaries minimize the work

.. math::
    \sum_g n_g L_g^2 + K \cdot \text{overhead},

with :math:`n_g` the group's number of sequences, :math:`L_g` its longest length and K the
number of groups (:func:`plan_length_groups`, a dynamic program over the distinct lengths
of the batch). :math:`n L^2` is the attention's share of the work; the overhead (per group,
a fraction ``length_group_overhead`` of the ungrouped batch's work :math:`B L_{max}^2`)
makes tiny groups not worth their fixed cost (more, smaller matmuls and kernel launches).
"""

from typing import NamedTuple, Union

import numpy as np
import torch


class AuxLoss(NamedTuple):
    """An auxiliary loss term: ``value``, a MEAN over ``count`` terms (query rows,
    sequences, ...), so that length groups combine exactly."""

    value: torch.Tensor
    count: Union[int, torch.Tensor]


def grouping_cost(lengths, bounds, overhead):
    r""":math:`\sum_g n_g L_g^2 + K \cdot overhead` of the grouping of ``lengths`` whose
    groups are ``(bounds[g-1], bounds[g]]`` (ascending upper lengths; the last one must be
    at least the longest length). A group's cost uses its actual longest length."""
    lengths = np.asarray(lengths)
    cost, low = 0.0, -np.inf
    for high in bounds:
        members = lengths[(lengths > low) & (lengths <= high)]
        if members.size:
            cost += members.size * float(members.max()) ** 2
        cost += overhead
        low = high
    return cost


def plan_length_groups(lengths, max_groups, overhead=0.0):
    r"""The upper lengths ``[L_1 < ... < L_K]`` (K <= ``max_groups``) of the grouping of
    ``lengths`` that minimizes :math:`\sum_g n_g L_g^2 + K \cdot overhead`; group g holds
    the sequences with :math:`L_{g-1} < \ell \le L_g`, and every :math:`L_g` is a length
    of the batch (the group's longest). Ties go to fewer groups.

    A dynamic program over the D distinct lengths: ``best[k][j]``, the least cost of
    covering the j shortest distinct lengths with k groups, is
    ``min_i best[k-1][i] + (count of lengths i..j-1) * value[j-1]^2 + overhead``;
    O(max_groups D^2) in vectorized numpy (D <= T).
    """
    values, counts = np.unique(np.asarray(lengths), return_counts=True)
    n = len(values)
    if n == 0:
        return []
    if n == 1 or max_groups <= 1:
        return [int(values[-1])]
    cum = np.concatenate([[0], np.cumsum(counts)]).astype(np.float64)
    square = values.astype(np.float64) ** 2
    # cost[i, j] of one group covering distinct lengths i .. j-1 (i < j), j = 1 .. n
    size = cum[None, 1:] - cum[:-1, None]  # [i = 0..n-1, j = 1..n]
    cost = size * square[None, :] + overhead
    cost[np.tril_indices(n, -1)] = np.inf  # j - 1 < i: empty or reversed
    best = np.full(n + 1, np.inf)
    best[0] = 0.0
    parents = []
    found_cost, found_k = np.inf, 0
    for k in range(1, min(max_groups, n) + 1):
        total = best[:-1, None] + cost  # [i, j-1]
        parent = total.argmin(0)
        best = np.concatenate([[np.inf], total[parent, np.arange(n)]])
        parents.append(parent)
        if best[n] < found_cost:
            found_cost, found_k = best[n], k
    bounds, j = [], n
    for k in range(found_k, 0, -1):
        bounds.append(int(values[j - 1]))
        j = int(parents[k - 1][j - 1])
    return bounds[::-1]


def group_rows(item_seq_len, max_groups, overhead):
    """The length groups of a batch: None (the batch is not split), or a list of
    ``(rows, length)``, ``rows`` a ``[n_g]`` index tensor (original order within the
    group), ``length`` the group's longest sequence, shortest group first: the grouping of
    :func:`plan_length_groups` with the overhead of one group as a fraction ``overhead``
    of the ungrouped batch's work ``B * L_max^2``, when it has more than one group."""
    batch = item_seq_len.numel()
    if max_groups < 2 or batch < 2:
        return None
    lengths = item_seq_len.detach().cpu().numpy()
    longest = max(int(lengths.max()), 1)
    bounds = plan_length_groups(lengths, max_groups, overhead * batch * longest**2)
    if len(bounds) < 2:
        return None
    groups, low = [], -1
    for high in bounds:
        rows = np.flatnonzero((lengths > low) & (lengths <= high))
        rows = torch.as_tensor(rows, device=item_seq_len.device)
        groups.append((rows, max(int(high), 1)))
        low = high
    return groups


def combine_group_losses(parts):
    """The losses of a batch from those of its length groups.

    ``parts``: per group ``(position losses, N_g, aux terms)``: a tuple of means over the
    group's N_g loss positions, and the :class:`AuxLoss` terms its layers added (a mean
    and the count it averages over). Position loss i is ``sum_g loss_gi N_g / sum_g
    N_g``, auxiliary loss i ``sum_g value_gi count_gi / sum_g count_gi`` (0 when every
    count is 0): the means over the whole batch. Returns one tuple, position losses
    first."""
    n_losses, n_aux = len(parts[0][0]), len(parts[0][2])
    if any(len(loss) != n_losses or len(aux) != n_aux for loss, _, aux in parts):
        raise RuntimeError(
            "the length groups of a batch returned different numbers of loss terms; "
            "a model whose losses depend on the batch composition must set "
            "length_grouping = False"
        )

    def mean(values, counts):
        dtype, device = values[0].dtype, values[0].device
        counts = [torch.as_tensor(c, device=device).to(dtype) for c in counts]
        total = sum(counts)
        weighted = sum(v * c for v, c in zip(values, counts))
        return weighted / torch.where(total > 0, total, torch.ones_like(total))

    positions = [n for _, n, _ in parts]
    losses = tuple(
        mean([loss[i] for loss, _, _ in parts], positions) for i in range(n_losses)
    )
    aux = tuple(
        mean([a[i].value for _, _, a in parts], [a[i].count for _, _, a in parts])
        for i in range(n_aux)
    )
    return losses + aux
