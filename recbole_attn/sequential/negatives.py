r"""Sampled negative items, ``M`` per training position, drawn for the whole batch at
once from a base distribution ``q`` (uniform or by popularity), optionally avoiding the
row's items :math:`S_b`: then exactly :math:`Q_b(j) = q_j / (1 - q(S_b))`, by one
multinomial over a ``[B, n]`` matrix or, for large catalogues, rejection sampling
(docs/models.md, "Training")."""

import torch

from recbole_attn.errors import ConfigError

#: the largest ``[B, n_items]`` weight matrix the exact multinomial draw builds
DENSE_BUDGET = 2**24
#: rounds of redrawing excluded negatives before the remaining rows take the matrix way
REJECTION_ROUNDS = 8
#: the most categories ``torch.multinomial`` draws from (popularity negatives)
MULTINOMIAL_MAX_ITEMS = 2**24


def popularity_distribution(item_counts):
    """``q [n_items]`` proportional to ``item_counts + 1``, 0 for padding."""
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
    q = torch.full((n_items,), 1.0 / (n_items - 1), device=device)
    q[0] = 0.0
    return q


def excluded_items(item_seq, targets):
    """``[B, K]`` the items each row's negatives avoid (0 = none)."""
    return torch.cat([item_seq, targets], dim=1)


def excluded_mass(excluded, q):
    """``[B]``: :math:`q(S_b)` of each row's distinct excluded items."""
    items = excluded.sort(dim=1).values
    first = torch.ones_like(items, dtype=torch.bool)
    first[:, 1:] = items[:, 1:] != items[:, :-1]
    return (q[items] * (first & (items > 0))).sum(1)


def sample_negatives(
    targets, n_items, num=1, excluded=None, q=None, dense_budget=DENSE_BUDGET
):
    """``num`` negatives per position ``[B, L, num]`` from ``q`` (None: uniform),
    exactly from :math:`Q_b` with ``excluded``."""
    batch, length = targets.shape
    size = length * num
    if excluded is None:
        if q is None:
            draws = torch.randint(1, n_items, (batch, size), device=targets.device)
        else:
            draws = torch.multinomial(q, batch * size, replacement=True)
        return draws.view(batch, length, num)
    draw = _dense_draws if batch * n_items <= dense_budget else _rejection_draws
    return draw(excluded, n_items, size, q).view(batch, length, num)


def _dense_draws(excluded, n_items, size, q):
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
    """``[B, size]``: whether each draw is excluded in its row (sorted search)."""
    ordered = excluded.sort(dim=1).values
    at = torch.searchsorted(ordered, draws).clamp(max=ordered.size(1) - 1)
    return ordered.gather(1, at) == draws


def _rejection_draws(excluded, n_items, size, q):
    """``[B, size]`` draws from ``q``, excluded ones redrawn (no ``[B, n_items]``
    matrix)."""
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
    r"""``[B, L, M]``: :math:`\log Q_b(j)` of each drawn negative."""
    if q is None:
        q = uniform_distribution(n_items, neg_items.device)
    log_q = q[neg_items].log()
    if excluded is None:
        return log_q
    mass = excluded_mass(excluded, q)
    # a row whose excluded items hold all of q's mass fell back to q itself
    kept = torch.where(mass < 1.0 - 1e-6, 1.0 - mass, torch.ones_like(mass))
    return log_q - kept.log().view(-1, 1, 1)
