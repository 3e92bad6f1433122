r"""Exact length grouping of a batch: sorted by length and split into at most
``length_groups`` groups, each run trimmed to its own longest sequence, the boundaries
minimizing :math:`\sum_g n_g L_g^2 + K \cdot overhead` (docs/models.md, "Training").
"""

from typing import NamedTuple, Union

import numpy as np
import torch


class AuxLoss(NamedTuple):
    """An auxiliary loss term: a MEAN ``value`` over ``count`` terms."""

    value: torch.Tensor
    count: Union[int, torch.Tensor]


def grouping_cost(lengths, bounds, overhead):
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
    """The upper lengths ``[L_1 < ... < L_K]`` of the cheapest grouping of ``lengths``
    (ties: fewer groups): a dynamic program over the distinct lengths."""
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
    """``(rows, length)`` of each length group, shortest first, or None for one group."""
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
    """The batch's losses from its groups': each a mean weighted by its count."""
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
