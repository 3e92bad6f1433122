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

from recbole_attn.model.layers.attention import AttentionScore
from recbole_attn.model.layers.transformer import FeedForward

#: covariances are clamped to this before the square root (keeps the gradient finite)
COV_EPS = 1e-24


def elu_plus_one(x):
    """ELU(x) + 1 > 0: the paper's map onto positive covariances."""
    return F.elu(x) + 1.0


def _root(cov):
    return cov.clamp_min(COV_EPS).sqrt()


def gaussian_vector(mean, cov):
    r""":math:`[\mu, \Sigma^{1/2}]` ``[..., 2d]``: W2 between diagonal Gaussians is the
    Euclidean distance between these."""
    return torch.cat([mean, _root(cov)], dim=-1)


def wasserstein2_squared(mean1, cov1, mean2, cov2):
    """Elementwise squared W2 distance over the last dimension (broadcasting)."""
    return ((mean1 - mean2) ** 2).sum(-1) + ((_root(cov1) - _root(cov2)) ** 2).sum(-1)


def pairwise_wasserstein2_squared(mean1, cov1, mean2, cov2):
    """All squared W2 distances between ``[..., N, d]`` and ``[..., M, d]`` (or ``[M, d]``)
    Gaussians, as ``[..., N, M]``, in matmul form; clamped at 0 against round-off."""
    x = gaussian_vector(mean1, cov1)
    y = gaussian_vector(mean2, cov2)
    sq_x = (x * x).sum(-1, keepdim=True)
    sq_y = (y * y).sum(-1).unsqueeze(-2)
    dist = sq_x + sq_y - 2.0 * torch.matmul(x, y.transpose(-1, -2))
    return dist.clamp_min(0.0)


class WassersteinScore(AttentionScore):
    r"""STOSA's attention score (eq. 5-6): :math:`-W_2^2(q_t, k_s)/\sqrt{d_h}` between the
    query Gaussian :math:`(\mu^Q, \mathrm{ELU}(\Sigma^Q)+1)` and the key Gaussian, per
    head. Used in a two-stream attention ``(("mean", 1), ("cov", 2))``: means aggregated
    with :math:`A`, covariances with :math:`A \circ A` (eq. 7)."""

    def forward(self, query, key, context, rows=None, inputs=None):
        q_mean, q_cov = query
        k_mean, k_cov = key
        dist = pairwise_wasserstein2_squared(
            q_mean, elu_plus_one(q_cov), k_mean, elu_plus_one(k_cov)
        )
        return -dist / math.sqrt(q_mean.size(-1))


#: the streams of a Wasserstein attention: means with A, covariances with A o A
GAUSSIAN_STREAMS = (("mean", 1), ("cov", 2))


class GaussianFeedForward(nn.Module):
    r"""STOSA eq. 8-9: a residual ELU FFN per stream (:class:`~recbole_attn.model.layers.
    transformer.FeedForward`), then :math:`\mathrm{ELU}(\cdot)+1` on the covariance
    output so that it stays positive. ``pre_ln=True``: the paper's
    :math:`x + \mathrm{Dropout}(\mathrm{FFN}(\mathrm{LN}(x)))`; ``False``: the official
    code's post-LN :math:`\mathrm{LN}(x + \mathrm{Dropout}(\mathrm{FFN}(x)))`.
    ``streams``: the streams it transforms (``("cov",)``: covariances only, where the
    layer passes its means through); the input and output are tuples of those streams.
    """

    def __init__(
        self,
        hidden_size,
        inner_size,
        hidden_dropout_prob,
        layer_norm_eps,
        pre_ln=True,
        streams=("mean", "cov"),
    ):
        super().__init__()
        self.streams = tuple(streams)
        for name in self.streams:
            setattr(
                self,
                name,
                FeedForward(
                    hidden_size,
                    inner_size,
                    hidden_dropout_prob,
                    "elu",
                    layer_norm_eps,
                    pre_ln=pre_ln,
                ),
            )

    def forward(self, hidden):
        outputs = []
        for name, x in zip(self.streams, hidden):
            y = getattr(self, name)(x)
            outputs.append(elu_plus_one(y) if name == "cov" else y)
        return tuple(outputs)
