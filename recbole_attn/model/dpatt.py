r"""
DPAtt
################################################

Reference:
    Yuli Liu, Christian Walder, Lexing Xie and Yiqun Liu. "Probabilistic Attention for
    Sequential Recommendation." in KDD 2024.

Reference code:
    https://github.com/l-lyl/PAtt

DPAtt is PAtt (:mod:`recbole_attn.model.patt`) with the diversity-aware kernel of section
3.2.4: a category-scope kernel C over all items, learned in a pre-stage (eq. 10), weighs
the k-subsets of every prefix.
"""

import torch
import torch.nn.functional as F
from torch import nn

from recbole.utils import FeatureType
from recbole_attn.model.patt import (
    PAtt,
    DPPAttention,
    causal_masks,
    pair_minors,
    tiny_value,
    triple_minor_sums,
)


def category_kernel(vectors, jitter):
    r""":math:`C = (1-\beta) \hat V \hat V^\top + \beta I` from item vectors ``[..., n, r]``
    (rows normalized to unit length): :math:`C_{ii} = 1`, so
    :math:`\beta^{|Y|} \le \det C_Y \le 1` (Hadamard) and log det cannot run away."""
    v = F.normalize(vectors, dim=-1)
    eye = torch.eye(v.size(-2), dtype=v.dtype, device=v.device)
    return (1.0 - jitter) * (v @ v.transpose(-1, -2)) + jitter * eye


def prefix_product_kernels(kernel, category, mask):
    r"""The paper's composite kernel (eq. 11) on every causal prefix,
    :math:`T^{(t)} = L_{Y_t} C_{Y_t}^{-1}` with :math:`Y_t` the valid positions x <= t,
    embedded in ``[B, (H,) T(t), T, T]`` (zero outside :math:`Y_t \times Y_t`) for a
    kernel ``[B, (H,) T, T]``.

    One batched LU solve of ``B*T`` T x T systems: :math:`C` restricted to :math:`Y_t`
    with the identity elsewhere is block diagonal, so :math:`(L \circ 1_{Y_t Y_t})
    \tilde C_t^{-1}` is :math:`L_{Y_t} C_{Y_t}^{-1}` on the block and 0 elsewhere. The
    inverse is taken on the prefix (the paper's T on the ground set Y): no future item.
    """
    n = kernel.size(-1)
    dtype = kernel.dtype
    incl = torch.ones(n, n, dtype=torch.bool, device=kernel.device).tril()  # [t, x]
    member = (mask.unsqueeze(-2) & incl).to(dtype)  # [B, t, x]: x in Y_t
    block = member.unsqueeze(-1) * member.unsqueeze(-2)  # [B, t, x, y]
    eye = torch.eye(n, dtype=dtype, device=kernel.device)
    outside = eye * (1.0 - member).unsqueeze(-1)  # identity on positions not in Y_t
    systems = category.to(dtype).unsqueeze(-3) * block + outside  # block diagonal
    lu, pivots = torch.linalg.lu_factor(systems)  # one factorization per prefix
    if kernel.dim() == 4:  # heads
        lu, pivots, block = lu.unsqueeze(1), pivots.unsqueeze(1), block.unsqueeze(1)
    rhs = kernel.unsqueeze(-3) * block  # L_{Y_t}, zero outside
    return torch.linalg.lu_solve(lu, pivots, rhs, left=False)  # X C~ = L_{Y_t}


def causal_product_numerators(kernel, category, mask, k, masks=None):
    r"""Pair weights ``W[..., t, r]`` and floored normalizers ``Z[..., t]`` of DPAtt's
    ``product`` form: for query t the k-DPP kernel is :math:`T^{(t)}`
    (:func:`prefix_product_kernels`); W is its 2x2 minor at (t, r) (k = 2) or its triple
    sum (k = 3), Z the sum of those over the prefix's pairs (/3 for k = 3).

    :math:`T^{(t)}` is similar to a PSD matrix, so :math:`e_k(T^{(t)}) \ge 0`, but its
    principal minors are not :math:`\det L_Y / \det C_Y` and can be negative: every pair
    quantity is clamped at 0 and normalized by the sum of the clamped ones (a proper
    distribution over pairs; exact where no minor is negative, e.g. C = I).
    Cost: O(B T^4) time, O(B H T^3) memory.
    """
    if masks is None:
        masks = causal_masks(mask, k, kernel.dim() == 4, kernel.dtype)
    prod = prefix_product_kernels(kernel, category, mask)  # [B, (H,) t, a, b]
    minors = pair_minors(prod) if k == 2 else triple_minor_sums(prod)
    minors = minors.clamp_min(0.0)
    n = kernel.size(-1)
    upper = torch.ones(n, n, dtype=torch.bool, device=kernel.device).triu(1)
    norm = (minors * upper).sum((-1, -2))  # outside Y_t the minors are 0
    if k == 3:
        norm = norm / 3.0
    # floor 100 eps ||T||_F^k, as (||T||_F^2)^(k/2): no sqrt, whose derivative at 0
    # (zero kernel, padding rows) is infinite
    eps = torch.finfo(kernel.dtype).eps
    floor = 100.0 * eps * prod.square().sum((-1, -2)) ** (0.5 * k)
    norm = torch.maximum(norm, floor + tiny_value(kernel.dtype))
    own = torch.diagonal(minors, dim1=-3, dim2=-2).transpose(-1, -2)  # [..., t, r]
    return own * masks.pairs, norm


def distinct_category_counts(item_sets, item_categories, n_categories):
    """Number of distinct (non-padding) categories in each item set ``[..., m]``."""
    cats = item_categories[item_sets]  # [..., m, c]
    hot = torch.zeros(*item_sets.shape[:-1], n_categories, dtype=torch.bool)
    hot = hot.to(cats.device)
    hot.scatter_(-1, cats.reshape(*item_sets.shape[:-1], -1), True)
    hot[..., 0] = False  # padding token
    return hot.sum(-1)


def diversity_set_pairs(
    histories, lengths, item_categories, set_size, draws, generator
):
    """(diverse, less diverse) item sets ``[P, m]`` from training histories: ``draws``
    random m-subsets of every history with >= m items; the one with the most distinct
    categories is A+, the one with the fewest A-; pairs with equal counts are dropped.
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
    r"""The unit-norm item vectors ``[n_items, rank]`` of C, learned with eq. 10,
    :math:`\max \sum_{(A^+,A^-)} \log\det C_{A^+} - \log\det C_{A^-}`, on (diverse, less
    diverse) set pairs drawn anew every step from the right-padded training
    ``histories [N, T]`` (:func:`diversity_set_pairs`); ``item_categories [n_items, c]``
    holds category tokens (0 = none). Its own random generator (``seed``)."""
    generator = torch.Generator().manual_seed(int(seed))
    vectors = nn.Parameter(
        torch.randn(item_categories.size(0), rank, generator=generator)
    )
    opt = torch.optim.Adam([vectors], lr=lr)
    histories, lengths = histories.cpu(), lengths.cpu()
    item_categories = item_categories.cpu()
    with torch.enable_grad():
        for _ in range(int(steps)):
            pos, neg = diversity_set_pairs(
                histories, lengths, item_categories, set_size, draws, generator
            )
            if pos.size(0) == 0:
                break
            objective = torch.logdet(category_kernel(vectors[pos], jitter))
            objective = objective - torch.logdet(category_kernel(vectors[neg], jitter))
            opt.zero_grad()
            (-objective.mean()).backward()
            opt.step()
    return F.normalize(vectors.detach(), dim=-1)


class DiversityDPPAttention(DPPAttention):
    """PAtt's attention whose subset weights read DPAtt's category kernel: the
    ``ratio`` form, or the ``product`` form (:func:`causal_product_numerators`)."""

    diversity_form = "ratio"

    def pair_weights(self, kernel, valid, masks, category=None):
        if self.diversity_form == "product" and category is not None:
            return causal_product_numerators(kernel, category, valid, self.k, masks)
        return super().pair_weights(kernel, valid, masks, category)


class DPAtt(PAtt):
    r"""DPAtt: PAtt with the diversity-aware kernel (section 3.2.4). A k-subset Y of the
    prefix gets the unnormalized weight :math:`\det L_Y / \det C_Y` (the quantity of the
    paper's Appendix A.1, eq. 13-14), where C is a category-scope kernel over all items:
    subsets spanning more categories (larger :math:`\det C_Y`) get lower probability,
    hence higher attention :math:`\exp(-\lambda P)`.

    C is a low-rank kernel :math:`C = (1-\beta) \hat V \hat V^\top + \beta I` with
    unit-norm item vectors :math:`\hat v_i \in R^{r}` (``dpp_cat_rank``), so
    :math:`C_{ii} = 1` and :math:`\beta^{|Y|} \le \det C_Y \le 1` (``dpp_cat_jitter`` =
    :math:`\beta`). **C is trained in a pre-stage** when the model is built, with the
    paper's eq. 10, :math:`\max \sum \log\det C_{A^+} - \log\det C_{A^-}`, on pairs of
    (more diverse, less diverse) item sets of size ``dpp_cat_set_size`` drawn from the
    TRAINING sequences (``dpp_cat_draws`` random subsets per sequence; the one with the
    most distinct categories is A+, the one with the fewest A-), ``dpp_cat_steps`` Adam
    steps at ``dpp_cat_lr``. It is then frozen (a buffer: saved with the model, no
    gradient from the recommendation loss). Categories are the token_seq item feature
    ``category_field``.

    NOTE:
        Deviations, besides PAtt's:

        * The paper's composite kernel :math:`T = L C_S^{-1}` (eq. 11) is not symmetric and
          its principal minors are in general not :math:`\det L_Y/\det C_Y` (they can be
          negative); by default (``dpp_diversity_form: ratio``) we use
          :math:`\det L_Y / \det C_Y`, the measure the appendix proves the diversity
          property for. ``dpp_diversity_form: product`` uses the paper's kernel on the
          ground set of query t, :math:`T^{(t)} = L_{\le t} C_{\le t}^{-1}`, with pair
          quantities clamped at 0 and normalized by the sum of the clamped ones. Cost:
          one LU solve per prefix (O(B T^4)) and O(B H T^3) memory, so meant for
          T <= 50; not combinable with ``dpp_triple_samples``.
        * C's item vectors are learned from set pairs chosen by their category counts;
          the official pipeline learns a logistic-DPP kernel offline and does not use it
          in attention.
        * DPAtt^3 exact needs all 3x3 minors of C and L (O(T^3) memory per head); the
          sampled variant (``dpp_triple_samples > 0``) is O(T^2 s) and its per-prefix
          normalizer is built from the sampled weights.
    """

    def __init__(self, config, dataset):
        super(DPAtt, self).__init__(config, dataset)

        form = config["dpp_diversity_form"]
        if form not in ("ratio", "product"):
            raise ValueError(
                f"dpp_diversity_form must be ratio or product, got {form!r}"
            )
        for layer in self.trm_encoder.layer:
            layer.multi_head_attention.diversity_form = form

        field = config["category_field"]
        if dataset.field2type.get(field) != FeatureType.TOKEN_SEQ:
            raise ValueError(
                f"DPAtt needs the token_seq item feature {field!r} (category_field) "
                "with the item categories"
            )
        categories = torch.zeros(self.n_items, 1, dtype=torch.long)
        if dataset.item_feat is not None and field in dataset.item_feat:
            values = dataset.item_feat[field].long()
            values = values.unsqueeze(1) if values.dim() == 1 else values
            categories = torch.zeros(self.n_items, values.size(1), dtype=torch.long)
            categories[dataset.item_feat[dataset.iid_field].long()] = values
        histories, lengths = self.training_histories(dataset)
        vectors = learn_category_kernel(
            categories,
            histories,
            lengths,
            rank=config["dpp_cat_rank"],
            set_size=config["dpp_cat_set_size"],
            draws=config["dpp_cat_draws"],
            steps=config["dpp_cat_steps"],
            lr=config["dpp_cat_lr"],
            jitter=self.dpp_cat_jitter,
            seed=config["seed"],
        )
        self.register_buffer("category_vectors", vectors)

    def training_histories(self, dataset):
        """Right-padded ``[U, T]`` training histories (each user's most recent T training
        items) and their lengths ``[U]``: per user, the items before its last training
        target, then that target."""
        feat = dataset.inter_feat
        uid = feat[self.USER_ID]
        last = torch.ones(len(uid), dtype=torch.bool)
        last[:-1] = uid[1:] != uid[:-1]  # rows are grouped by user, in time order
        seq = feat[self.ITEM_SEQ][last]
        seq_len = feat[self.ITEM_SEQ_LEN][last]
        rows = torch.arange(len(seq))
        full = torch.cat([seq, torch.zeros_like(seq[:, :1])], dim=1)
        full[rows, seq_len] = feat[self.ITEM_ID][last]
        lengths = seq_len + 1
        shift = (lengths > self.max_seq_length).long().unsqueeze(1)  # drop the oldest
        lengths = lengths.clamp(max=self.max_seq_length)
        steps = torch.arange(max(int(lengths.max()), 1) if len(lengths) else 1)
        return full.gather(1, steps.unsqueeze(0) + shift), lengths

    def attention_layer(self):
        """PAtt's attention, reading the category kernel."""
        return DiversityDPPAttention(
            self.n_heads,
            self.hidden_size,
            self.hidden_dropout_prob,
            self.attn_dropout_prob,
            self.layer_norm_eps,
            k=self.dpp_k,
            lam=self.dpp_lambda,
            triple_samples=self.dpp_triple_samples,
            jitter=self.dpp_cat_jitter,
        )

    def sequence_category_kernel(self, item_seq):
        """:math:`C` restricted to the items of every sequence ``[B, L, L]``."""
        return category_kernel(self.category_vectors[item_seq], self.dpp_cat_jitter)
