r"""
PAtt
################################################

Reference:
    Yuli Liu, Christian Walder, Lexing Xie and Yiqun Liu. "Probabilistic Attention for
    Sequential Recommendation." in KDD 2024.

Reference code:
    https://github.com/l-lyl/PAtt

PAtt^k (``dpp_k`` 2: eq. 7, 3: eq. 12), each query's k-DPP on its valid prefix in closed
form: pair minors :math:`L_{rr} L_{tt} - L_{rt}^2`, triple sums :math:`S_{rt} = \sum_x
\det L_{\{r,t,x\}}`, normalizers :math:`e_k` by cumsum, :math:`P^k` their ratio.
"""

from typing import NamedTuple

import torch
from torch import nn

from recbole.model.abstract_recommender import SequentialRecommender
from recbole.model.layers import FeedForward
from recbole.utils import InputType


# ---------------------------------------------------------------- closed-form k-DPP
def tiny_value(dtype):
    # an absolute normalizer floor far above denormals: 0/0 rows become exact zeros and
    # the gradient of num/Z stays finite
    return torch.finfo(dtype).tiny ** 0.5


def floored_normalizer(norm, kernel, k):
    r""":math:`e_k` of each prefix floored at ``100 eps trace^k``: the closed forms lose
    about ``eps trace^k`` to cancellation, so a kernel of numerical rank < k gives
    probabilities near 0 (uniform attention) instead of noise / noise."""
    trace = torch.diagonal(kernel, dim1=-2, dim2=-1).cumsum(-1)
    eps = torch.finfo(trace.dtype).eps
    floor = 100.0 * eps * trace.clamp_min(0.0) ** k + tiny_value(trace.dtype)
    return torch.maximum(norm, floor)


def det3(a, b, c, f, g, h):
    r"""Determinant of the symmetric 3x3 matrix with diagonal (a, b, c) and off-diagonal
    entries f = (b,c), g = (a,c), h = (a,b): :math:`abc + 2fgh - af^2 - bg^2 - ch^2`."""
    return a * b * c + 2.0 * f * g * h - a * f * f - b * g * g - c * h * h


def triple_dets(kernel, x):
    r"""3x3 principal minors :math:`\det L_{\{r,t,x\}}` ``[..., T(t), T(r), s]`` of a
    symmetric ``kernel [..., T, T]`` for third items ``x [..., T(t), T(r), s]``."""
    n = kernel.size(-1)
    lead = x.shape[:-3]
    d = torch.diagonal(kernel, dim1=-2, dim2=-1)
    flat = x.reshape(*lead, n, -1)  # row t
    l_tx = torch.gather(kernel, -1, flat).reshape(x.shape)
    by_r = x.transpose(-2, -3).reshape(*lead, n, -1)  # row r
    l_rx = torch.gather(kernel, -1, by_r).reshape(x.shape).transpose(-2, -3)
    d_x = torch.gather(d.unsqueeze(-2).expand(*d.shape[:-1], n, n), -1, flat)
    d_t = d.unsqueeze(-1).unsqueeze(-1)
    d_r = d.unsqueeze(-2).unsqueeze(-1)
    return det3(d_r, d_t, d_x.reshape(x.shape), l_tx, l_rx, kernel.unsqueeze(-1))


def sample_third_items(shape, samples, device):
    r"""Indices ``[*shape[:-2], T(t), T(r), s]`` uniform over :math:`\{0..t-1\} \setminus
    \{r\}` (for right-padded sequences every position before a valid t is valid). Entries
    without such an item (t < 2) are arbitrary and masked by the caller."""
    n = shape[-1]
    u = torch.rand(*shape[:-2], n, n, samples, device=device)
    t = torch.arange(n, device=device).view(n, 1, 1)
    r = torch.arange(n, device=device).view(1, n, 1)
    avail = (t - 1).clamp_min(1)
    j = (u * avail).long().clamp_max(avail - 1)
    return j + (j >= r).long()


class CausalMasks(NamedTuple):
    """Masks of the causal per-prefix k-DPP, built once per batch (float, for fused ops):
    ``keys [B, (1,) T, T]``, 1 at (t, r) iff r < t and both are valid; ``pairs``, the same
    where the prefix of t also holds at least k valid items."""

    keys: torch.Tensor
    pairs: torch.Tensor


def causal_masks(mask, k, heads=True, dtype=torch.float32):
    """:class:`CausalMasks` of the valid positions ``mask [B, T]`` (``heads``: with a
    head axis)."""
    n = mask.size(-1)
    lower = torch.ones(n, n, dtype=torch.bool, device=mask.device).tril(-1)
    keys = lower & mask.unsqueeze(-1) & mask.unsqueeze(-2)
    pairs = keys & (mask.cumsum(-1) >= k).unsqueeze(-1)
    keys, pairs = keys.to(dtype), pairs.to(dtype)
    if heads:
        keys, pairs = keys.unsqueeze(1), pairs.unsqueeze(1)
    return CausalMasks(keys, pairs)


def causal_pair_numerators(kernel, k, masks, triple_samples=0, third_items=None):
    r"""Pair weights ``W[..., t, r]`` (r < t, both valid) and normalizers ``Z[..., t]``
    of the k-DPP on every valid prefix, for a PSD ``kernel [B, (H,) T, T]`` with zero
    padding rows: :math:`W_{tr} = \det L_{\{r,t\}}` (k = 2) or :math:`\sum_{x<t} \det
    L_{\{r,t,x\}}` (k = 3, in closed form, or over ``triple_samples`` uniform third
    items, rescaled: unbiased); rows with fewer than k valid items get 0."""
    pairs = masks.pairs
    d = torch.diagonal(kernel, dim1=-2, dim2=-1)
    d_t, d_r = d.unsqueeze(-1), d.unsqueeze(-2)
    if k == 2:
        num = torch.addcmul(d_t * d_r, kernel, kernel, value=-1.0)
        num = num.clamp_min(0.0) * pairs
        return num, num.sum(-1).cumsum(-1)

    n = kernel.size(-1)
    if triple_samples:
        x = third_items
        if x is None:
            x = sample_third_items(kernel.shape, triple_samples, kernel.device)
        dets = triple_dets(kernel, x).clamp_min(0.0)
        count = torch.arange(n, device=kernel.device, dtype=kernel.dtype) - 1.0
        num = dets.mean(-1) * (count.clamp_min(0).unsqueeze(-1) * pairs)
        return num, causal_pair_numerators(kernel, 3, masks)[1]

    # k = 3 exact, closed form: (d_t d_r - L_tr^2) tau_t + 2 L_tr sum_{x<=t} L_tx L_xr
    # - d_r sum_{x<=t} L_tx^2 - d_t sum_{x<=t} L_rx^2
    incl = torch.ones(n, n, dtype=kernel.dtype, device=kernel.device).tril()
    tau = d.cumsum(-1).unsqueeze(-1)  # tau_t = sum_{x<=t} d_x
    sq = kernel * kernel
    prefix_l = (kernel * incl) @ kernel  # [t, r] = sum_{x<=t} L_tx L_xr
    sq_rows = sq @ incl.transpose(0, 1)  # [r, t] = sum_{x<=t} L_rx^2
    q_t = torch.diagonal(sq_rows, dim1=-2, dim2=-1).unsqueeze(-1)  # sum_{x<=t} L_tx^2
    r_tr = sq_rows.transpose(-1, -2)  # [t, r]
    num = d_r * (d_t * tau - q_t)
    num = torch.addcmul(num, sq, tau, value=-1.0)
    num = torch.addcmul(num, d_t, r_tr, value=-1.0)
    num = torch.addcmul(num, kernel, prefix_l, value=2.0)
    num = num.clamp_min(0.0) * pairs
    return num, (0.5 * num.sum(-1)).cumsum(-1)


def causal_pair_weights(kernel, valid, k, masks=None, triple_samples=0):
    r"""``(W, Z)``: the pair weights ``[..., t, r]`` and floored normalizers ``[..., t]``
    of the k-DPP on every valid prefix (:math:`P^k(r, t) = W_{tr} / Z_t`), for a kernel
    ``[B, (H,) T, T]`` with zero padding rows and the valid positions ``valid [B, T]``.
    """
    if masks is None:
        masks = causal_masks(valid, k, kernel.dim() == 4, kernel.dtype)
    num, norm = causal_pair_numerators(kernel, k, masks, triple_samples)
    return num, floored_normalizer(norm, kernel, k)


# ---------------------------------------------------------------- the model


def split_heads(x, n_heads):
    """``[B, L, d]`` -> ``[B, h, L, d/h]``."""
    batch, length, dim = x.shape
    return x.view(batch, length, n_heads, dim // n_heads).transpose(1, 2)


def merge_heads(x):
    """``[B, h, L, d_h]`` -> ``[B, L, h d_h]``."""
    batch, heads, length, dim = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * dim)


class DPPAttention(nn.Module):
    r"""The probabilistic attention of one block (eq. 7-9), per head: the Sampler
    :math:`S = (M W^S + b)^{\circ 2}`, the k-DPP on each valid prefix with kernel
    :math:`L = S S^\top`, logits :math:`-\lambda P^k(r, t)` for r < t and
    :math:`-\lambda L_{tt}` on the diagonal, a masked softmax over the prefix, and
    :math:`Z = D M` (the value is the input itself); then SASRec's output sublayer."""

    def __init__(
        self,
        n_heads,
        hidden_size,
        hidden_dropout_prob,
        attn_dropout_prob,
        layer_norm_eps,
        k=2,
        lam=0.125,
        triple_samples=0,
    ):
        super().__init__()
        self.n_heads = n_heads
        self.k = k
        self.lam = lam
        self.triple_samples = int(triple_samples)
        self.query = nn.Linear(hidden_size, hidden_size)  # the Sampler W^S, b
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.attn_dropout = nn.Dropout(attn_dropout_prob)
        self.out_dropout = nn.Dropout(hidden_dropout_prob)

    def sampler(self, hidden):
        """``[B, h, L, d_h]``: :math:`S = (M W^S + b)^{\\circ 2}`, per head."""
        sampler = split_heads(self.query(hidden), self.n_heads)
        return sampler * sampler

    def pair_weights(self, kernel, valid, masks):
        """:func:`causal_pair_weights` of the layer's k (sampled triples in training)."""
        triples = self.triple_samples if self.training else 0
        return causal_pair_weights(kernel, valid, self.k, masks, triples)

    def logits(self, sampler, valid, masks):
        r""":math:`-\lambda P^k(r, t)` of the per-prefix k-DPPs, :math:`-\lambda L_{tt}` on
        the diagonal; in float32 at least, autocast off (the minors cancel)."""
        low = (torch.float16, torch.bfloat16)
        if sampler.dtype in low:
            sampler = sampler.float()
        with torch.autocast(sampler.device.type, enabled=False):
            masked = sampler * valid[:, None, :, None].to(sampler.dtype)  # padding 0
            num, norm = self.pair_weights(
                masked @ masked.transpose(-1, -2), valid, masks
            )
            logits = num * (-self.lam / norm).unsqueeze(-1)
            return logits - torch.diag_embed(self.lam * (sampler * sampler).sum(-1))

    def forward(self, hidden, attention_mask, valid, masks):
        logits = self.logits(self.sampler(hidden), valid, masks)
        probs = self.attn_dropout(torch.softmax(logits + attention_mask, dim=-1))
        output = merge_heads(probs @ split_heads(hidden, self.n_heads))  # Z = D M
        output = hidden + self.out_dropout(self.dense(output))
        return self.LayerNorm(output)


class PAttLayer(nn.Module):
    def __init__(self, attention, feed_forward):
        super().__init__()
        self.multi_head_attention = attention
        self.feed_forward = feed_forward

    def forward(self, hidden, attention_mask, valid, masks):
        hidden = self.multi_head_attention(hidden, attention_mask, valid, masks)
        return self.feed_forward(hidden)


class PAttEncoder(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.layer = nn.ModuleList(layers)

    def forward(self, hidden, attention_mask, valid, masks):
        for layer in self.layer:
            hidden = layer(hidden, attention_mask, valid, masks)
        return hidden


class PAtt(SequentialRecommender):
    r"""PAtt replaces the Query-Key-Value attention of SASRec by a Sampler
    :math:`S = M W^S` (per head) and a sequence-specific k-DPP with kernel
    :math:`L^{(S)} = S S^\top` (eq. 8). The attention weight of key r for query t is
    :math:`D_{tr} = \exp(-\lambda P^k(r, t))` (eq. 7), where :math:`P^2(r,t)` is the
    2-DPP probability of :math:`\{r, t\}` and :math:`P^3(r,t) = \sum_x P^3(\{r,t,x\})`
    (eq. 12); the output is :math:`Z = D M` (eq. 9: the value is the input M itself).
    Embedding, FFN, residuals, layer norms, dropout and prediction are SASRec's.

    NOTE:
        Deviations from the paper (the reference code's forms, without its two
        leaks: its normalizer over padding and future items, and its negative sampler's
        avoidance of held-out items):

        * Ground set: the k-DPP of query t lives on its valid prefix (no padding or
          future item in any normalizer; the reference normalizer sums over them).
        * :math:`D_{tt} = \exp(-\lambda L_{tt})` (eq. 7: 1); Sampler
          :math:`S = (M W^S + b)^{\circ 2}` (eq. 8: linear); rows of D divided by their
          sum, the reference softmax of :math:`-\lambda P` (``dpp_lambda``
          :math:`= 1/\sqrt{d_h}`).
        * k = 3 is exact by default; ``dpp_triple_samples: s`` is the paper's sampled
          variant, rescaled to an unbiased estimate, in training only.
        * Multi-head: each head has its Sampler slice and its slice of M; SASRec's
          output sublayer after the attention.
        * Loss: BCE with one negative (``CE`` an option); the reference sampler also
          avoids held-out items, RecBole's does not.
        * ``position_alignment: last`` counts positions back from the most recent item,
          as the left-padded reference code.
    """

    #: BCE trains on one negative per sample from RecBole's sampler (``NEG_ITEM_ID``)
    input_type = InputType.PAIRWISE

    def __init__(self, config, dataset):
        super(PAtt, self).__init__(config, dataset)

        # load parameters info
        self.n_layers = config["n_layers"]
        self.n_heads = config["n_heads"]
        self.hidden_size = config["hidden_size"]
        self.inner_size = config["inner_size"]
        self.hidden_dropout_prob = config["hidden_dropout_prob"]
        self.attn_dropout_prob = config["attn_dropout_prob"]
        self.hidden_act = config["hidden_act"]
        self.layer_norm_eps = config["layer_norm_eps"]
        self.initializer_range = config["initializer_range"]
        self.position_alignment = config["position_alignment"]
        self.loss_type = config["loss_type"]
        if self.position_alignment not in ["first", "last"]:
            raise ValueError("Make sure 'position_alignment' in ['first', 'last']!")
        self.dpp_k = config["dpp_k"]
        self.dpp_lambda = config["dpp_lambda"]
        self.dpp_triple_samples = config["dpp_triple_samples"]
        if self.dpp_k not in (2, 3):
            raise ValueError(f"dpp_k must be 2 or 3, got {self.dpp_k!r}")
        if self.max_seq_length < self.dpp_k:
            raise ValueError(
                f"a {self.dpp_k}-DPP needs at least {self.dpp_k} items: raise "
                f"MAX_ITEM_LIST_LENGTH ({self.max_seq_length}) or lower dpp_k"
            )

        # define layers and loss
        self.item_embedding = nn.Embedding(
            self.n_items, self.hidden_size, padding_idx=0
        )
        self.position_embedding = nn.Embedding(self.max_seq_length, self.hidden_size)
        self.LayerNorm = nn.LayerNorm(self.hidden_size, eps=self.layer_norm_eps)
        self.dropout = nn.Dropout(self.hidden_dropout_prob)
        self.trm_encoder = PAttEncoder(
            PAttLayer(
                self.attention_layer(),
                FeedForward(
                    self.hidden_size,
                    self.inner_size,
                    self.hidden_dropout_prob,
                    self.hidden_act,
                    self.layer_norm_eps,
                ),
            )
            for _ in range(self.n_layers)
        )
        if self.loss_type == "BCE":
            self.loss_fct = nn.BCEWithLogitsLoss()
        elif self.loss_type == "CE":
            self.loss_fct = nn.CrossEntropyLoss()
        else:
            raise NotImplementedError("Make sure 'loss_type' in ['BCE', 'CE']!")

        # parameters initialization
        self.apply(self._init_weights)

    def attention_layer(self):
        """The probabilistic attention of one block."""
        return DPPAttention(
            self.n_heads,
            self.hidden_size,
            self.hidden_dropout_prob,
            self.attn_dropout_prob,
            self.layer_norm_eps,
            k=self.dpp_k,
            lam=self.dpp_lambda,
            triple_samples=self.dpp_triple_samples,
        )

    def _init_weights(self, module):
        """RecBole's SASRec initialization."""
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(mean=0.0, std=self.initializer_range)
        elif isinstance(module, nn.LayerNorm):
            module.bias.data.zero_()
            module.weight.data.fill_(1.0)
        if isinstance(module, nn.Linear) and module.bias is not None:
            module.bias.data.zero_()

    def position_ids(self, item_seq_len, length):
        """``[B, length]``: counted from the first item (``first``), or back from the most
        recent one, which gets T - 1 (``last``; padding clamped to T - 1)."""
        steps = torch.arange(length, device=item_seq_len.device).unsqueeze(0)
        if self.position_alignment == "first":
            return steps.expand(item_seq_len.size(0), length)
        offset = (self.max_seq_length - item_seq_len).unsqueeze(1)
        return (steps + offset).clamp(max=self.max_seq_length - 1)

    def encode(self, item_seq, item_seq_len):
        """Outputs ``[B, L, d]`` at every position."""
        positions = self.position_ids(item_seq_len, item_seq.size(1))
        hidden = self.item_embedding(item_seq) + self.position_embedding(positions)
        hidden = self.dropout(self.LayerNorm(hidden))
        valid = item_seq > 0
        attention_mask = self.get_attention_mask(item_seq)  # [B, 1, L, L]
        masks = causal_masks(valid, self.dpp_k, dtype=hidden.dtype)
        return self.trm_encoder(hidden, attention_mask, valid, masks)

    def forward(self, item_seq, item_seq_len):
        output = self.encode(item_seq, item_seq_len)
        return self.gather_indexes(output, item_seq_len - 1)  # [B, d]

    def item_scores(self, output, items):
        """Dot products of ``output`` ``[N, d]`` with ``items`` ``[N]``."""
        return (output * self.item_embedding(items)).sum(-1)

    def all_item_scores(self, output):
        return output @ self.item_embedding.weight.transpose(0, 1)

    def calculate_loss(self, interaction):
        output = self.forward(
            interaction[self.ITEM_SEQ], interaction[self.ITEM_SEQ_LEN]
        )
        pos_items = interaction[self.POS_ITEM_ID]
        if self.loss_type == "CE":
            return self.loss_fct(self.all_item_scores(output), pos_items)
        pos_score = self.item_scores(output, pos_items)
        neg_score = self.item_scores(output, interaction[self.NEG_ITEM_ID])
        return self.loss_fct(pos_score, torch.ones_like(pos_score)) + self.loss_fct(
            neg_score, torch.zeros_like(neg_score)
        )

    def predict(self, interaction):
        output = self.forward(
            interaction[self.ITEM_SEQ], interaction[self.ITEM_SEQ_LEN]
        )
        return self.item_scores(output, interaction[self.ITEM_ID])

    def full_sort_predict(self, interaction):
        output = self.forward(
            interaction[self.ITEM_SEQ], interaction[self.ITEM_SEQ_LEN]
        )
        return self.all_item_scores(output)
