r"""
recbole_attn.sequential.negatives
###################################

Sampled negative items, ``M`` per training position, drawn for the whole batch at once
(:func:`sample_negatives`), from a base distribution ``q`` over the items ``1..n-1``
(``None``: uniform; :func:`popularity_distribution`: training counts), optionally
excluding the user's own items: then the negatives of row ``b`` follow

.. math::
    Q_b(j) = \frac{q_j}{1 - q(S_b)}, \quad j \notin S_b,

with :math:`S_b` the items the row excludes (the items of its training sequence). :func:`log_sampling_probability` gives :math:`\log Q_b(j)` of each draw,
which the sampled softmax's log-Q correction needs.

Two exact ways to draw from :math:`Q_b`: one multinomial over a ``[B, n]`` weight matrix
(small catalogues), or, when that matrix would exceed ``dense_budget`` elements (large
catalogues: 256 rows × 1 M items is a gigabyte), draws from ``q`` with the excluded ones
redrawn until none is left (rejection sampling: the same distribution; rows still
unresolved after a few rounds, a user who has seen most of ``q``'s mass, take the matrix
way, row by row).
"""

import torch

from recbole_attn.errors import ConfigError

#: the largest ``[B, n_items]`` weight matrix the exact multinomial draw builds
DENSE_BUDGET = 2**24
#: rounds of redrawing excluded negatives before the remaining rows take the matrix way
REJECTION_ROUNDS = 8
#: the most categories ``torch.multinomial`` draws from (popularity negatives)
MULTINOMIAL_MAX_ITEMS = 2**24


def popularity_distribution(item_counts):
    """``q [n_items]`` proportional to ``item_counts + 1`` over the items ``1..n-1``
    (add-one, so that an item without training interaction can still be a negative), 0
    for the padding item 0."""
    if item_counts.numel() > MULTINOMIAL_MAX_ITEMS:
        raise ConfigError(
            f"neg_sample_distribution: popularity draws from at most "
            f"{MULTINOMIAL_MAX_ITEMS:,} items (torch.multinomial's limit); this dataset "
            f"has {item_counts.numel():,}: set neg_sample_distribution: uniform"
        )
    q = item_counts.double() + 1.0
    q[0] = 0.0
    return (q / q.sum()).float()


def uniform_distribution(n_items, device=None):
    """``q [n_items]``: uniform over ``1..n-1``, 0 for the padding item 0."""
    q = torch.full((n_items,), 1.0 / (n_items - 1), device=device)
    q[0] = 0.0
    return q


def excluded_items(item_seq, targets):
    """``[B, K]`` the items each row's negatives avoid (0 = none): its training sequence,
    inputs and targets."""
    return torch.cat([item_seq, targets], dim=1)


def excluded_mass(excluded, q):
    """``[B]``: :math:`q(S_b)`, the base probability of each row's excluded items (each
    distinct item once)."""
    items = excluded.sort(dim=1).values
    first = torch.ones_like(items, dtype=torch.bool)
    first[:, 1:] = items[:, 1:] != items[:, :-1]
    return (q[items] * (first & (items > 0))).sum(1)


def sample_negatives(
    targets, n_items, num=1, excluded=None, q=None, dense_budget=DENSE_BUDGET
):
    """``num`` negative items per position ``[B, L, num]`` of ``targets [B, L]``, from
    ``q`` (``[n_items]``; None: uniform over ``1..n_items-1``).

    With ``excluded`` (``[B, K]``, 0 = none: :func:`excluded_items`) the draws of row b
    follow :math:`Q_b` (module docstring): ``q`` restricted to the items not in its row of
    ``excluded``, exactly; a row that excludes every item falls back to ``q``. Without
    it the positive itself can be drawn.
    """
    batch, length = targets.shape
    size = length * num
    if excluded is None:
        if q is None:
            draws = torch.randint(1, n_items, (batch, size), device=targets.device)
        else:
            draws = torch.multinomial(q, batch * size, replacement=True)
        return draws.view(batch, length, num)
    if batch * n_items <= dense_budget:
        draws = _dense_draws(excluded, n_items, size, q)
    else:
        draws = _rejection_draws(excluded, n_items, size, q)
    return draws.view(batch, length, num)


def _dense_draws(excluded, n_items, size, q):
    """``[B, size]`` draws from one multinomial over a ``[B, n_items]`` weight matrix."""
    batch = excluded.size(0)
    if q is None:
        weights = torch.ones(batch, n_items, device=excluded.device)
    else:
        weights = q.unsqueeze(0).repeat(batch, 1)
    weights.scatter_(1, excluded, 0.0)
    weights[:, 0] = 0.0
    exhausted = weights.sum(1) == 0
    if bool(exhausted.any()):
        weights[exhausted] = 1.0 if q is None else q
        weights[exhausted, 0] = 0.0
    return torch.multinomial(weights, size, replacement=True)


def _is_excluded(draws, excluded):
    """``[B, size]``: whether each draw is one of its row's excluded items (sorted
    search, ``O(size log K)`` per row)."""
    ordered = excluded.sort(dim=1).values
    at = torch.searchsorted(ordered, draws).clamp(max=ordered.size(1) - 1)
    return ordered.gather(1, at) == draws


def _rejection_draws(excluded, n_items, size, q):
    """``[B, size]`` draws from ``q``, each excluded one redrawn (the same distribution
    as :func:`_dense_draws`, without a ``[B, n_items]`` matrix)."""
    batch = excluded.size(0)

    def draw(count):
        if q is None:
            return torch.randint(1, n_items, (count,), device=excluded.device)
        return torch.multinomial(q, count, replacement=True)

    draws = draw(batch * size).view(batch, size)
    for _ in range(REJECTION_ROUNDS):
        rejected = _is_excluded(draws, excluded)
        if not bool(rejected.any()):
            return draws
        draws[rejected] = draw(int(rejected.sum()))
    rows = _is_excluded(draws, excluded).any(1).nonzero().flatten()
    for row in rows.tolist():  # rare: users who have seen most of q's mass
        draws[row] = _dense_draws(excluded[row : row + 1], n_items, size, q)[0]
    return draws


def log_sampling_probability(neg_items, excluded, q, n_items):
    """``[B, L, M]``: :math:`\\log Q_b(j)` of each drawn negative ``neg_items [B, L, M]``
    (``excluded [B, K]``: the items its row avoided, or None; ``q``: the base
    distribution, None for uniform)."""
    if q is None:
        q = uniform_distribution(n_items, neg_items.device)
    log_q = q[neg_items].log()
    if excluded is None:
        return log_q
    mass = excluded_mass(excluded, q)
    # a row whose excluded items hold all of q's mass fell back to q itself
    kept = torch.where(mass < 1.0 - 1e-6, 1.0 - mass, torch.ones_like(mass))
    return log_q - kept.log().view(-1, 1, 1)
