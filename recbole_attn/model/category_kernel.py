r"""DPAtt's category-scope kernel C, learned in a pre-stage (Liu et al., KDD 2024, eq. 10).

C is a low-rank kernel :math:`C = (1-\beta) \hat V \hat V^\top + \beta I`
(:func:`~recbole_attn.model.layers.dpp_diversity.category_kernel`) whose unit-norm item vectors are
trained to give diverse item sets (more distinct categories) a larger :math:`\det C_Y`:
:math:`\max \sum \log\det C_{A^+} - \log\det C_{A^-}` over (more diverse, less diverse)
pairs of item sets drawn from the users' TRAINING histories. This is a training loop with
sampling, run once when the model is built; the attention only reads its result.
"""

import torch
import torch.nn.functional as F
from torch import nn

from recbole_attn.model.layers.dpp_diversity import category_kernel


def distinct_category_counts(item_sets, item_categories, n_categories):
    """Number of distinct (non-padding) categories in each item set ``[..., m]``."""
    cats = item_categories[item_sets]  # [..., m, c]
    hot = torch.zeros(*item_sets.shape[:-1], n_categories, dtype=torch.bool)
    hot = hot.to(cats.device)
    flat = cats.reshape(*item_sets.shape[:-1], -1)
    hot.scatter_(-1, flat, True)
    hot[..., 0] = False  # padding token
    return hot.sum(-1)


def diversity_set_pairs(
    histories, lengths, item_categories, set_size, draws, generator
):
    """(diverse, less diverse) item sets ``[P, m]`` from training histories: ``draws``
    random m-subsets of every history with >= m items; the one with the most distinct
    categories is A+, the one with the fewest is A-; pairs with equal counts are dropped.
    """
    n_cats = int(item_categories.max()) + 1 if item_categories.numel() else 1
    keep = lengths >= set_size
    histories, lengths = histories[keep], lengths[keep]
    if histories.size(0) == 0:
        empty = torch.zeros(0, set_size, dtype=torch.long)
        return empty, empty
    n, width = histories.shape
    keys = torch.rand(n, draws, width, generator=generator)
    pos = torch.arange(width).view(1, 1, width)
    keys = keys.masked_fill(pos >= lengths.view(n, 1, 1), 2.0)
    idx = keys.argsort(-1)[..., :set_size]  # [n, draws, m] random valid positions
    sets = torch.gather(histories.unsqueeze(1).expand(n, draws, width), -1, idx)
    counts = distinct_category_counts(sets, item_categories, n_cats)  # [n, draws]
    hi, lo = counts.argmax(-1), counts.argmin(-1)
    rows = torch.arange(n)
    good = counts[rows, hi] > counts[rows, lo]
    return sets[rows, hi][good], sets[rows, lo][good]


def learn_category_kernel(
    item_categories,
    histories,
    lengths,
    rank=32,
    set_size=4,
    draws=8,
    steps=200,
    lr=0.05,
    jitter=0.1,
    seed=0,
):
    r"""Learn the item vectors of the category kernel C with eq. 10,
    :math:`\max \sum_{(A^+,A^-)} \log\det C_{A^+} - \log\det C_{A^-}`, on (diverse,
    less diverse) set pairs drawn from training histories (:func:`diversity_set_pairs`,
    new draws every step).

    Args:
        item_categories (torch.LongTensor): ``[n_items, max_cats]`` category tokens (0 =
            none).
        histories (torch.LongTensor): ``[N, T]`` right-padded training item sequences.
        lengths (torch.LongTensor): ``[N]``.

    Returns:
        torch.Tensor: ``[n_items, rank]`` unit-norm item vectors (C via
        :func:`category_kernel`).
    """
    generator = torch.Generator().manual_seed(int(seed))
    n_items = item_categories.size(0)
    vectors = torch.randn(n_items, rank, generator=generator)
    vectors = nn.Parameter(vectors)
    opt = torch.optim.Adam([vectors], lr=lr)
    histories, lengths = histories.cpu(), lengths.cpu()
    item_categories = item_categories.cpu()
    with torch.enable_grad():
        _fit_category_vectors(
            vectors,
            opt,
            histories,
            lengths,
            item_categories,
            set_size,
            draws,
            steps,
            jitter,
            generator,
        )
    return F.normalize(vectors.detach(), dim=-1)


def _fit_category_vectors(
    vectors,
    opt,
    histories,
    lengths,
    item_categories,
    set_size,
    draws,
    steps,
    jitter,
    generator,
):
    for _ in range(int(steps)):
        pos, neg = diversity_set_pairs(
            histories, lengths, item_categories, set_size, draws, generator
        )
        if pos.size(0) == 0:
            break
        c_pos = category_kernel(vectors[pos], jitter)
        c_neg = category_kernel(vectors[neg], jitter)
        objective = torch.logdet(c_pos) - torch.logdet(c_neg)
        loss = -objective.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
