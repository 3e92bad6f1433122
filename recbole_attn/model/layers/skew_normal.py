r"""Relation-aware kernelized attention scores of RKSA (Ji et al., "Sequential
Recommendation with Relation-Aware Kernelized Self-Attention", AAAI 2020).

The attention logits are a latent variable :math:`z \sim \mathrm{MSN}(\xi, \omega, \psi,
\alpha)` (a multivariate skew-normal), drawn with the stochastic representation of
eq. 13 in training and replaced by its expectation in evaluation. For query row t and
key j (the paper defines ω and α for the last query only; here every query row has its
own, so that every position trains and the model stays causal):

* location :math:`\xi_{tj} = f(q_t \cdot k_j / \sqrt{d_h})` (eq. 7, ``f`` optional);
* scale :math:`\omega_{tj} = \mathrm{softplus}((x_t W_\omega^Q) \cdot (x_j W_\omega^K)
  / \sqrt{d_h})` (eq. 8);
* correlation :math:`\psi = \sum_m r_m K_m` over the selected kernels, :math:`r =
  \mathrm{softmax}(u W_u + b_u)` (eq. 9) -- counting :math:`P_{ij}^2/(P_i P_j)`, item
  (linear :math:`\hat x_i \cdot \hat x_j` or RBF :math:`\exp(-\|\hat x_i - \hat x_j\|^2)`
  on unit-norm representations), user (cosine of :math:`W_s u \odot \hat x`); each
  kernel is a correlation matrix, so :math:`\psi` is one;
* shape :math:`\alpha_{tj} = s_{tj} \hat\alpha_{tj} / \max_{j' \le t} \hat\alpha_{tj'}`
  with the two-hop co-occurrence :math:`\hat\alpha_{tj} = \sum_{k \le t} \tilde c_{jk}
  \tilde c_{kt}` over the prefix of t (diagonal of c replaced by the mean of the rest of
  its row within the prefix, eq. 10) and :math:`s_{tj} = \mathrm{softplus}((x_t W_s^Q)
  \cdot (x_j W_s^K)/\sqrt{d_h})` (eq. 11);
* reparameterization (eq. 13): per sequence and head ONE :math:`y_0 \sim N(0,1)` and ONE
  :math:`y \sim N(0, \psi)` (a Cholesky of :math:`\psi` + jitter), shared by the query
  rows (each row's law is a restriction of the same joint Gaussian), :math:`\delta =
  \alpha/\sqrt{1+\alpha^2}`, :math:`z = \xi + \omega(\delta |y_0| + \sqrt{1-\delta^2}
  \, y)`; in evaluation :math:`E[z] = \xi + \omega \delta \sqrt{2/\pi}`.

Causality: every quantity of row t reads items j <= t only, and :math:`y_j` is the j-th
entry of the Cholesky factor times noise, which depends on the leading block
:math:`\psi_{\le j, \le j}` only.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from recbole_attn.model.layers.attention import AttentionScore, split_heads
from recbole_attn.model.layers.context import select_rows

KERNELS = ("count", "item", "user")
ITEM_KERNELS = ("linear", "rbf")
LOCATION_ACTIVATIONS = {"none": lambda x: x, "tanh": torch.tanh}
#: keys of the per-batch inputs the RKSA model hands to its score modules
COUNTS, OCCURRENCES, USER_EMBEDDING = "rksa_counts", "rksa_occurrences", "rksa_user"


def counting_kernel(counts, occurrences, valid):
    r""":math:`P_{ij}^2 / (P_i P_j)` ``[B, L, L]``: 1 on the diagonal (an item co-occurs
    with itself in each of its users), 0 for pairs with an item never seen in training,
    the identity on padding. PSD: :math:`D^{-1}(P \circ P)D^{-1}` with P the Gram matrix
    of the binary user x item matrix (Schur product theorem)."""
    denom = occurrences.unsqueeze(-1) * occurrences.unsqueeze(-2)
    kernel = torch.where(denom > 0, counts.square() / denom.clamp_min(1.0), 0.0)
    return _unit_diagonal(kernel, valid)


def _unit_diagonal(kernel, valid):
    """Rows/columns of padding zeroed, then the diagonal set to 1."""
    pair = valid.unsqueeze(-1) & valid.unsqueeze(-2)
    eye = torch.eye(kernel.size(-1), dtype=torch.bool, device=kernel.device)
    return torch.where(eye, 1.0, kernel * pair)


def cosine_kernel(x, valid):
    """Cosine similarities ``[B, L, L]`` of the rows of ``x`` (a correlation matrix)."""
    unit = F.normalize(x, dim=-1, eps=1e-12)
    return _unit_diagonal(unit @ unit.transpose(-1, -2), valid)


def rbf_kernel(x, valid):
    r""":math:`\exp(-\|\hat x_i - \hat x_j\|^2)` on unit-norm rows."""
    unit = F.normalize(x, dim=-1, eps=1e-12)
    sq = (2.0 - 2.0 * unit @ unit.transpose(-1, -2)).clamp_min(0.0)
    return _unit_diagonal(torch.exp(-sq), valid)


def two_hop_ratio(counts, valid):
    r""":math:`\hat\alpha_{tj} = \sum_{k \le t} \tilde c^{(t)}_{jk} \tilde c^{(t)}_{kt}`
    ``[B, L(t), L(j)]`` (eq. 10 for every query t), with :math:`\tilde c^{(t)}` the
    co-occurrence counts among the sequence positions whose diagonal is replaced by the
    mean of the other entries of its row within the prefix ``<= t``."""
    length = counts.size(-1)
    eye = torch.eye(length, dtype=torch.bool, device=counts.device)
    off = counts.masked_fill(eye, 0.0)  # c with a zero diagonal
    incl = torch.ones(length, length, dtype=counts.dtype, device=counts.device).tril()
    incl = incl * valid.unsqueeze(-2)  # [t, k]: k <= t and k a real item
    n_prefix = incl.sum(-1)  # [B, t]
    # m[t, k] = mean_{l <= t, l != k} c_kl: the replaced diagonal of row k in prefix t
    row_sums = incl @ off.transpose(-1, -2)  # [B, t, k] = sum_{l<=t} c_kl
    mean = row_sums / (n_prefix - 1.0).clamp_min(1.0).unsqueeze(-1)
    # sum_{k<=t} c_jk c_kt with the zero-diagonal c
    gated = off * incl.transpose(-1, -2)  # [k, t] = c_kt [k <= t]
    two_hop = (off @ gated).transpose(-1, -2)  # [t, j]
    # the replaced diagonals: k = j gives m_tj c_jt, k = t gives c_jt m_tt, both for j = t
    m_tt = torch.diagonal(mean, dim1=-2, dim2=-1).unsqueeze(-1)  # [B, t, 1]
    c_tj = off  # symmetric: c_jt = c_tj
    ratio = two_hop + mean * c_tj * incl + c_tj * m_tt
    ratio = ratio + torch.diag_embed(torch.diagonal(mean, dim1=-2, dim2=-1) ** 2)
    return ratio * incl


def msn_sample(xi, omega, delta, chol, generator=None):
    r"""One draw of eq. 13: ``z = xi + omega (delta |y0| + sqrt(1 - delta^2) y)`` with
    ``y = chol @ eps`` ``[B, h, L]`` shared by the query rows and one ``y0`` per sequence
    and head. ``xi, omega, delta``: ``[B, h, Q, L]``; ``chol``: ``[B, L, L]``."""
    batch, heads, _, length = xi.shape
    eps = torch.randn(
        batch, heads, length, 1, dtype=xi.dtype, device=xi.device, generator=generator
    )
    y = (chol.unsqueeze(1) @ eps).transpose(-1, -2)  # [B, h, 1, L]
    y0 = torch.randn(
        batch, heads, 1, 1, dtype=xi.dtype, device=xi.device, generator=generator
    ).abs()
    return xi + omega * (delta * y0 + torch.sqrt(1.0 - delta.square()) * y)


def msn_mean(xi, omega, delta):
    r""":math:`E[z] = \xi + \omega \delta \sqrt{2/\pi}`."""
    return xi + omega * delta * math.sqrt(2.0 / math.pi)


def listnet_loss(psi, target, valid):
    r"""ListNet top-one loss (Cao et al., 2007) between every row of ``psi`` and of the
    target scores over the row's causal prefix (keys j < t): :math:`-\sum_j
    \mathrm{softmax}(target_t)_j \log \mathrm{softmax}(\psi_t)_j`, averaged over the rows
    with at least two such keys. Returns ``(mean, number of such rows)`` (a per-row mean:
    length grouping weights it by the row count)."""
    length = psi.size(-1)
    keys = torch.ones(length, length, dtype=torch.bool, device=psi.device).tril(-1)
    keys = keys & valid.unsqueeze(-1) & valid.unsqueeze(-2)
    rows = keys.sum(-1) >= 2
    count = rows.sum()
    if not bool(rows.any()):
        return psi.new_zeros(()), count
    low = torch.finfo(psi.dtype).min
    log_pred = torch.log_softmax(torch.where(keys, psi, low), -1)
    weights = torch.softmax(torch.where(keys, target, low), -1) * keys
    loss = -(weights * log_pred.masked_fill(~keys, 0.0)).sum(-1)
    return loss[rows].mean(), count


class SkewNormalScore(AttentionScore):
    """RKSA's logits (module docstring). Reads the per-batch co-occurrence counts,
    occurrences and user embeddings from ``context.features`` and adds its listwise
    kernel loss (``loss_weight`` times the ListNet loss, a mean over query rows) to the
    context's auxiliary losses in training."""

    def __init__(
        self,
        hidden_size,
        n_heads,
        kernels=KERNELS,
        item_kernel="linear",
        location_activation="none",
        jitter=1e-3,
        loss_weight=1e-3,
    ):
        super().__init__()
        kernels = tuple(kernels)  # RKSA's options, checked with the configuration
        self.n_heads = n_heads
        self.kernels = kernels
        self.item_kernel = item_kernel
        self.location = LOCATION_ACTIVATIONS[location_activation]
        self.jitter = float(jitter)
        self.loss_weight = float(loss_weight)
        self.omega = nn.ModuleDict(
            {n: nn.Linear(hidden_size, hidden_size) for n in ("query", "key")}
        )
        self.shape = nn.ModuleDict(
            {n: nn.Linear(hidden_size, hidden_size) for n in ("query", "key")}
        )
        self.kernel_mix = nn.Linear(hidden_size, len(kernels))  # r = softmax(u W_u + b)
        self.user_weight = nn.Linear(hidden_size, hidden_size, bias=False)  # W_s

    def _pair(self, projections, queries, inputs):
        """Per head ``(x_t W^Q) . (x_j W^K) / sqrt(d_h)`` ``[B, h, Q, L]``."""
        q = split_heads(projections["query"](queries), self.n_heads)
        k = split_heads(projections["key"](inputs), self.n_heads)
        return q @ k.transpose(-1, -2) / math.sqrt(q.size(-1))

    @staticmethod
    def counting(context):
        """The batch's counting kernel ``[B, L, L]``, computed once for all layers (it
        depends on the items only): a kernel of psi and the listwise loss's target."""
        return context.cached(
            "rksa_counting_kernel",
            lambda: counting_kernel(
                context.features[COUNTS], context.features[OCCURRENCES], context.valid
            ),
        )

    def correlation(self, inputs, context):
        """:math:`\\psi` ``[B, L, L]``: the user's mix of the selected kernels."""
        valid = context.valid
        user = context.features[USER_EMBEDDING]  # [B, d]
        found = []
        for name in self.kernels:
            if name == "count":
                found.append(self.counting(context))
            elif name == "item":
                kernel = cosine_kernel if self.item_kernel == "linear" else rbf_kernel
                found.append(kernel(inputs, valid))
            else:
                found.append(
                    cosine_kernel(self.user_weight(user).unsqueeze(1) * inputs, valid)
                )
        mix = torch.softmax(self.kernel_mix(user), -1)  # [B, m]
        return torch.einsum("bm,mbij->bij", mix, torch.stack(found))

    def forward(self, query, key, context, rows=None, inputs=None):
        queries = select_rows(inputs, rows)
        xi = self.location(query @ key.transpose(-1, -2) / math.sqrt(query.size(-1)))
        omega = F.softplus(self._pair(self.omega, queries, inputs))
        ratio = context.cached(
            "rksa_two_hop",
            lambda: two_hop_ratio(context.features[COUNTS], context.valid),
        )
        ratio = select_rows(ratio, rows).unsqueeze(1)  # [B, 1, Q, L]
        top = ratio.amax(-1, keepdim=True)
        alpha = F.softplus(self._pair(self.shape, queries, inputs)) * torch.where(
            top > 0, ratio / top.clamp_min(1e-12), 0.0
        )
        delta = alpha / torch.sqrt(1.0 + alpha.square())
        if not self.training:
            return msn_mean(xi, omega, delta)
        if rows is not None:
            raise ValueError("RKSA samples every query row in training")
        psi = self.correlation(inputs, context)
        eye = torch.eye(psi.size(-1), dtype=psi.dtype, device=psi.device)
        chol = torch.linalg.cholesky((psi + self.jitter * eye) / (1.0 + self.jitter))
        if self.loss_weight:
            loss, rows = listnet_loss(psi, self.counting(context), context.valid)
            context.add_aux_loss(self.loss_weight * loss, rows)
        return msn_sample(xi, omega, delta, chol)
