r"""
DPAtt
################################################

Reference:
    Yuli Liu, Christian Walder, Lexing Xie and Yiqun Liu. "Probabilistic Attention for
    Sequential Recommendation." in KDD 2024.

Reference code:
    https://github.com/l-lyl/PAtt

DPAtt is PAtt (:mod:`recbole_attn.model.patt`) with a category kernel C over all items
(section 3.2.4) that weighs the k-subsets of every prefix.
"""

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from recbole.utils import FeatureType
from recbole_attn.model.patt import (
    PAtt,
    DPPAttention,
    causal_masks,
    det3,
    floored_normalizer,
    sample_third_items,
    triple_dets,
)


def pair_minors(kernel):
    r"""All 2x2 principal minors :math:`d_r d_t - L_{rt} L_{tr}` ``[..., T, T]`` (0 on the
    diagonal)."""
    d = torch.diagonal(kernel, dim1=-2, dim2=-1)
    minors = d.unsqueeze(-1) * d.unsqueeze(-2) - kernel * kernel.transpose(-1, -2)
    eye = torch.eye(kernel.size(-1), dtype=torch.bool, device=kernel.device)
    return minors.masked_fill(eye, 0.0)


def dense_triple_dets(kernel):
    """All 3x3 principal minors ``[..., T(t), T(r), T(x)]`` of a symmetric kernel."""
    d = torch.diagonal(kernel, dim1=-2, dim2=-1)
    return det3(
        d.unsqueeze(-2).unsqueeze(-1),  # r
        d.unsqueeze(-1).unsqueeze(-1),  # t
        d.unsqueeze(-2).unsqueeze(-2),  # x
        kernel.unsqueeze(-2),  # (t, x)
        kernel.unsqueeze(-3),  # (r, x)
        kernel.unsqueeze(-1),  # (t, r)
    )


class DiversityMasks(NamedTuple):
    """PAtt's causal masks of a batch and the category kernel of its sequences
    ``category [B, T, T]``, what DPAtt's attention layers read."""

    keys: torch.Tensor
    pairs: torch.Tensor
    category: torch.Tensor


def causal_ratio_numerators(
    kernel, k, masks, triple_samples=0, jitter=0.1, third_items=None
):
    r"""PAtt's pair weights and normalizers (:func:`~patt.causal_pair_numerators`) with
    the subset weight :math:`\det L_Y / \det C_Y` (``masks.category``; the minors of C
    floored at :math:`\beta^{|Y|}`, ``jitter`` = :math:`\beta`): k = 2 and k = 3 exact
    (all 3x3 minors, ``[..., T, T, T]``) or sampled, whose normalizer is built from the
    sampled weights."""
    pairs, category = masks.pairs, masks.category
    if kernel.dim() == 4:
        category = category.unsqueeze(1)
    d = torch.diagonal(kernel, dim1=-2, dim2=-1)
    if k == 2:
        num = torch.addcmul(
            d.unsqueeze(-1) * d.unsqueeze(-2), kernel, kernel, value=-1.0
        )
        num = num / pair_minors(category).clamp_min(jitter * jitter)
        num = num.clamp_min(0.0) * pairs
        return num, num.sum(-1).cumsum(-1)

    n = kernel.size(-1)
    if triple_samples:
        x = third_items
        if x is None:
            x = sample_third_items(kernel.shape, triple_samples, kernel.device)
        dets = triple_dets(kernel, x).clamp_min(0.0)
        dets = dets / triple_dets(category.expand(*kernel.shape), x).clamp_min(
            jitter**3
        )
        count = torch.arange(n, device=kernel.device, dtype=kernel.dtype) - 1.0
        num = dets.mean(-1) * (count.clamp_min(0).unsqueeze(-1) * pairs)
        return num, (0.5 * num.sum(-1)).cumsum(-1)

    t = torch.arange(n, device=kernel.device).view(n, 1, 1)
    r = torch.arange(n, device=kernel.device).view(1, n, 1)
    xs = torch.arange(n, device=kernel.device).view(1, 1, n)
    allowed = ((xs < t) & (xs != r)).to(kernel.dtype)
    dets = dense_triple_dets(kernel).clamp_min(0.0)
    dets = dets / dense_triple_dets(category).clamp_min(jitter**3)
    num = (dets * allowed).sum(-1) * pairs
    return num, (0.5 * num.sum(-1)).cumsum(-1)


def category_kernel(vectors, jitter):
    r""":math:`C = (1-\beta) \hat V \hat V^\top + \beta I` from item vectors ``[..., n, r]``
    (rows normalized to unit length): :math:`C_{ii} = 1`, so
    :math:`\beta^{|Y|} \le \det C_Y \le 1` (Hadamard) and log det cannot run away."""
    v = F.normalize(vectors, dim=-1)
    eye = torch.eye(v.size(-2), dtype=v.dtype, device=v.device)
    return (1.0 - jitter) * (v @ v.transpose(-1, -2)) + jitter * eye


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
    r"""PAtt's attention whose subset weights are :math:`\det L_Y / \det C_Y`, with the
    category kernel of the batch's sequences (:class:`DiversityMasks`)."""

    def __init__(self, *args, jitter=0.1, **kwargs):
        super().__init__(*args, **kwargs)
        self.jitter = jitter

    def pair_weights(self, kernel, valid, masks):
        triples = self.triple_samples if self.training else 0
        category = masks.category
        if category.dtype in (torch.float16, torch.bfloat16):
            category = category.float()
        num, norm = causal_ratio_numerators(
            kernel, self.k, masks._replace(category=category), triples, self.jitter
        )
        return num, floored_normalizer(norm, kernel, self.k)


class DPAtt(PAtt):
    r"""DPAtt: PAtt with the diversity-aware kernel (section 3.2.4). A k-subset Y of the
    prefix gets the weight :math:`\det L_Y / \det C_Y` (the quantity of Appendix A.1,
    eq. 13-14), C a category kernel over all items: subsets spanning more categories get
    lower probability, hence higher attention :math:`\exp(-\lambda P)`.

    :math:`C = (1-\beta) \hat V \hat V^\top + \beta I` (unit-norm item vectors of rank
    ``dpp_cat_rank``, :math:`\beta` = ``dpp_cat_jitter``) is learned before the first
    training step with eq. 10 on (more diverse, less diverse) item sets drawn from the
    training sequences (``dpp_cat_set_size``, ``dpp_cat_draws``, ``dpp_cat_steps``,
    ``dpp_cat_lr``), then frozen; it is saved with the model. Categories: the token_seq
    item feature ``category_field``.

    NOTE:
        Deviations, besides PAtt's:

        * The subset weight is :math:`\det L_Y / \det C_Y`, the measure of Appendix
          A.1, not the minors of the paper's :math:`T = L C_S^{-1}` (eq. 11), which can
          be negative.
        * C is learned from set pairs ranked by their category counts; the reference
          code learns a kernel offline and does not use it in attention.
        * DPAtt^3 exact holds all 3x3 minors (O(T^3) memory per head); the sampled
          variant builds its normalizer from the sampled weights.
    """

    def __init__(self, config, dataset):
        self.dpp_cat_jitter = config["dpp_cat_jitter"]
        super(DPAtt, self).__init__(config, dataset)

        # the pre-stage's settings and data (item categories, training histories)
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
        self.category_data = (categories, *self.training_histories(dataset))
        self.category_settings = {
            "rank": config["dpp_cat_rank"],
            "set_size": config["dpp_cat_set_size"],
            "draws": config["dpp_cat_draws"],
            "steps": config["dpp_cat_steps"],
            "lr": config["dpp_cat_lr"],
            "jitter": self.dpp_cat_jitter,
            "seed": config["seed"],
        }
        rank = self.category_settings["rank"]
        self.register_buffer("category_vectors", torch.zeros(self.n_items, rank))

    def fit_category_kernel(self):
        """Learn C's item vectors (once: not after a fit or a loaded state dict)."""
        if self.category_data is None:
            return
        vectors = learn_category_kernel(*self.category_data, **self.category_settings)
        self.category_vectors.copy_(vectors)
        self.category_data = None

    def _load_from_state_dict(self, state_dict, prefix, *args):
        vectors = state_dict.get(prefix + "category_vectors")
        if vectors is not None and bool(vectors.any()):
            self.category_data = None  # a learned C (unit rows): no pre-stage
        super()._load_from_state_dict(state_dict, prefix, *args)

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

    def encode(self, item_seq, item_seq_len):
        """Outputs ``[B, L, d]`` at every position."""
        positions = self.position_ids(item_seq_len, item_seq.size(1))
        hidden = self.item_embedding(item_seq) + self.position_embedding(positions)
        hidden = self.dropout(self.LayerNorm(hidden))
        valid = item_seq > 0
        attention_mask = self.get_attention_mask(item_seq)  # [B, 1, L, L]
        masks = causal_masks(valid, self.dpp_k, dtype=hidden.dtype)
        category = category_kernel(self.category_vectors[item_seq], self.dpp_cat_jitter)
        masks = DiversityMasks(*masks, category)
        return self.trm_encoder(hidden, attention_mask, valid, masks)

    def calculate_loss(self, interaction):
        self.fit_category_kernel()
        return super().calculate_loss(interaction)
