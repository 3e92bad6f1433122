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

import numpy as np

from recbole_attn.errors import ConfigError

#: defaults of ``length_groups`` and ``length_group_overhead`` (properties/overall.yaml)
DEFAULT_LENGTH_GROUPS = 4
DEFAULT_LENGTH_GROUP_OVERHEAD = 0.02


def check_length_groups(value):
    """``length_groups``: a positive integer (1 = no grouping)."""
    if value is None:
        return DEFAULT_LENGTH_GROUPS
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ConfigError(
            f"length_groups must be a positive integer (the most groups a batch is split "
            f"into by sequence length; 1 = off), got {value!r}"
        )
    return int(value)


def check_length_group_overhead(value):
    """``length_group_overhead``: a non-negative number."""
    if value is None:
        return DEFAULT_LENGTH_GROUP_OVERHEAD
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ConfigError(
            f"length_group_overhead must be a non-negative number (the cost of one "
            f"group as a fraction of the ungrouped batch's work), got {value!r}"
        )
    return float(value)


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
