r"""
Wasserstein self-attention (STOSA, Fan et al., WWW 2022).

An item is a diagonal Gaussian :math:`\mathcal{N}(\mu, \mathrm{diag}(\sigma))`. Between two
diagonal Gaussians the squared 2-Wasserstein distance is

.. math::
    W_2^2 = \|\mu_1 - \mu_2\|_2^2 + \|\sigma_1^{1/2} - \sigma_2^{1/2}\|_2^2,

the squared Euclidean distance between the concatenations :math:`[\mu, \sigma^{1/2}]`, so
all pairwise distances are one matmul: :math:`\|x\|^2 + \|y\|^2 - 2 x y^\top` (paper,
Appendix A.2).
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from recbole_attn.errors import ConfigError
from recbole_attn.model.layers.masks import masked_softmax

#: covariances are clamped to this before the square root (keeps the gradient finite)
COV_EPS = 1e-24


def elu_plus_one(x):
    """ELU(x) + 1 > 0: the paper's map onto positive covariances."""
    return F.elu(x) + 1.0


def _root(cov):
    return cov.clamp_min(COV_EPS).sqrt()


def wasserstein2_squared(mean1, cov1, mean2, cov2):
    """Elementwise squared W2 distance over the last dimension (broadcasting)."""
    return ((mean1 - mean2) ** 2).sum(-1) + ((_root(cov1) - _root(cov2)) ** 2).sum(-1)


def pairwise_wasserstein2_squared(mean1, cov1, mean2, cov2):
    """All squared W2 distances between ``[..., N, d]`` and ``[..., M, d]`` (or ``[M, d]``)
    Gaussians, as ``[..., N, M]``, in matmul form; clamped at 0 against round-off."""
    x = torch.cat([mean1, _root(cov1)], dim=-1)
    y = torch.cat([mean2, _root(cov2)], dim=-1)
    sq_x = (x * x).sum(-1, keepdim=True)
    sq_y = (y * y).sum(-1).unsqueeze(-2)
    dist = sq_x + sq_y - 2.0 * torch.matmul(x, y.transpose(-1, -2))
    return dist.clamp_min(0.0)


class WassersteinMultiHeadAttention(nn.Module):
    r"""Multi-head Wasserstein self-attention (STOSA eq. 5-7).

    Scores :math:`-W_2^2(q_t, k_k)/\sqrt{d_h}` between the query Gaussian
    :math:`(\mu^Q, \mathrm{ELU}(\cdot)+1)` and the key Gaussian, masked softmax, then
    :math:`z^\mu = A V^\mu` and :math:`z^\Sigma = (A \circ A) V^\Sigma` (a linear
    combination of Gaussians). Each stream then goes through an output projection,
    dropout, residual and layer norm (post-LN, as SASRec).
    """

    def __init__(
        self,
        n_heads,
        hidden_size,
        hidden_dropout_prob,
        attn_dropout_prob,
        layer_norm_eps,
    ):
        super().__init__()
        if hidden_size % n_heads != 0:
            raise ConfigError(
                f"hidden_size ({hidden_size}) must be a multiple of n_heads ({n_heads})"
            )
        self.n_heads = n_heads
        self.head_size = hidden_size // n_heads
        self.scale = math.sqrt(self.head_size)
        names = ["query", "key", "value", "out"]
        self.mean_proj = nn.ModuleDict(
            {n: nn.Linear(hidden_size, hidden_size) for n in names}
        )
        self.cov_proj = nn.ModuleDict(
            {n: nn.Linear(hidden_size, hidden_size) for n in names}
        )
        self.attn_dropout = nn.Dropout(attn_dropout_prob)
        self.out_dropout = nn.Dropout(hidden_dropout_prob)
        self.mean_norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.cov_norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)

    def _heads(self, x):
        batch, length, _ = x.shape
        return x.view(batch, length, self.n_heads, self.head_size).transpose(1, 2)

    def _merge(self, x):
        batch, _, length, _ = x.shape
        return x.transpose(1, 2).reshape(batch, length, self.n_heads * self.head_size)

    def attention_probs(self, query_mean, query_cov, mean, cov, mask):
        """Post-softmax, masked attention ``[B, h, Q, L]`` (before dropout) of the query
        Gaussians ``[B, Q, d]`` over the sequence ``[B, L, d]``."""
        q_mean = self._heads(self.mean_proj["query"](query_mean))
        k_mean = self._heads(self.mean_proj["key"](mean))
        q_cov = self._heads(elu_plus_one(self.cov_proj["query"](query_cov)))
        k_cov = self._heads(elu_plus_one(self.cov_proj["key"](cov)))
        scores = (
            -pairwise_wasserstein2_squared(q_mean, q_cov, k_mean, k_cov) / self.scale
        )
        return masked_softmax(scores, mask)

    def aggregate(self, probs, query_mean, query_cov, mean, cov):
        """Wasserstein attentive aggregation of eq. 7 plus the output sublayer (residual
        to the queries)."""
        probs = self.attn_dropout(probs)
        v_mean = self._heads(self.mean_proj["value"](mean))
        v_cov = self._heads(self.cov_proj["value"](cov))
        z_mean = self._merge(torch.matmul(probs, v_mean))
        z_cov = self._merge(torch.matmul(probs * probs, v_cov))
        z_mean = self.out_dropout(self.mean_proj["out"](z_mean))
        z_cov = self.out_dropout(self.cov_proj["out"](z_cov))
        return self.mean_norm(query_mean + z_mean), self.cov_norm(query_cov + z_cov)

    def forward(self, mean, cov, mask, queries=None):
        """Outputs at every position ``[B, L, d]``, or, with ``queries`` (one position per
        sequence, ``[B]``), only there ``[B, 1, d]`` (what prediction needs)."""
        query_mean, query_cov = mean, cov
        if queries is not None:
            rows = torch.arange(mean.size(0), device=mean.device)
            query_mean = mean[rows, queries].unsqueeze(1)
            query_cov = cov[rows, queries].unsqueeze(1)
            mask = mask[rows, :, queries].unsqueeze(2)  # [B, 1, 1, L]
        probs = self.attention_probs(query_mean, query_cov, mean, cov, mask)
        return self.aggregate(probs, query_mean, query_cov, mean, cov)


class StochasticFeedForward(nn.Module):
    r"""STOSA eq. 8-9: pre-LN residual FFN with ELU, per stream; ELU(.)+1 on the
    covariance output so that it stays positive."""

    def __init__(self, hidden_size, inner_size, hidden_dropout_prob, layer_norm_eps):
        super().__init__()

        def ffn():
            return nn.Sequential(
                nn.Linear(hidden_size, inner_size),
                nn.ELU(),
                nn.Linear(inner_size, hidden_size),
            )

        self.mean_ffn, self.cov_ffn = ffn(), ffn()
        self.mean_norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.cov_norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.dropout = nn.Dropout(hidden_dropout_prob)

    def forward(self, mean, cov):
        mean = mean + self.dropout(self.mean_ffn(self.mean_norm(mean)))
        cov = elu_plus_one(cov + self.dropout(self.cov_ffn(self.cov_norm(cov))))
        return mean, cov


class StochasticTransformerLayer(nn.Module):
    """Wasserstein self-attention followed by the stochastic feed-forward network."""

    def __init__(
        self,
        n_heads,
        hidden_size,
        inner_size,
        hidden_dropout_prob,
        attn_dropout_prob,
        layer_norm_eps,
    ):
        super().__init__()
        self.attention = WassersteinMultiHeadAttention(
            n_heads, hidden_size, hidden_dropout_prob, attn_dropout_prob, layer_norm_eps
        )
        self.feed_forward = StochasticFeedForward(
            hidden_size, inner_size, hidden_dropout_prob, layer_norm_eps
        )

    def forward(self, mean, cov, mask, queries=None):
        mean, cov = self.attention(mean, cov, mask, queries)
        return self.feed_forward(mean, cov)


class StochasticEncoder(nn.Module):
    """A stack of :class:`StochasticTransformerLayer`.

    ``legacy_mean_bug=True`` reproduces the official STOSA code, whose encoder drops every
    layer's mean output and hands the input mean embedding to every layer and to the
    prediction layer (only the covariance stream is updated).
    """

    def __init__(
        self,
        n_layers,
        n_heads,
        hidden_size,
        inner_size,
        hidden_dropout_prob,
        attn_dropout_prob,
        layer_norm_eps,
        legacy_mean_bug=False,
    ):
        super().__init__()
        self.legacy_mean_bug = legacy_mean_bug
        self.layers = nn.ModuleList(
            StochasticTransformerLayer(
                n_heads,
                hidden_size,
                inner_size,
                hidden_dropout_prob,
                attn_dropout_prob,
                layer_norm_eps,
            )
            for _ in range(n_layers)
        )

    def forward(self, mean, cov, mask, queries=None):
        """Outputs ``[B, L, d]`` at every position, or with ``queries`` ``[B]`` the last
        layer computes only those positions: ``[B, 1, d]`` (exact, since lower layers
        still see every position)."""
        input_mean = mean
        for index, layer in enumerate(self.layers):
            layer_queries = queries if index == len(self.layers) - 1 else None
            mean, cov = layer(mean, cov, mask, layer_queries)
            if self.legacy_mean_bug:  # the official encoder drops the mean output
                mean = input_mean
                if layer_queries is not None:
                    rows = torch.arange(mean.size(0), device=mean.device)
                    mean = mean[rows, layer_queries].unsqueeze(1)
        return mean, cov
