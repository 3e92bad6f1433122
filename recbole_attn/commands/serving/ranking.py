"""The top-K of a row of scores in numpy (no torch): column 0 (padding) and the excluded
items never ranked, ties to the smaller item id, as ``recbole-attn recommend`` ranks."""

import numpy as np


def top_k(scores, k, exclude=()):
    """``(items, scores)`` of the ``k`` best columns of ``scores [n]`` but column 0 and
    the ids ``exclude``; fewer when fewer are left. Ties go to the smaller id."""
    scores = np.array(
        scores, dtype=np.float64
    )  # a copy; float64 orders float32 exactly
    scores[np.isnan(scores)] = -np.inf
    scores[0] = -np.inf
    if len(exclude):
        scores[np.asarray(exclude, dtype=np.int64)] = -np.inf
    left = int((scores > -np.inf).sum())
    k = min(k, left)
    if k <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    # every column at least as good as the k-th best (ties included), then in order
    kth = np.partition(scores, len(scores) - k)[len(scores) - k]
    candidates = np.flatnonzero(scores >= kth)
    order = np.lexsort((candidates, -scores[candidates]))[:k]
    items = candidates[order]
    return items, scores[items].astype(np.float32)
