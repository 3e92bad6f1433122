r"""
STOSA
################################################

Reference:
    Ziwei Fan et al. "Sequential Recommendation via Stochastic Self-Attention." in WWW 2022.

Reference code:
    https://github.com/zfan20/STOSA

An item is a diagonal Gaussian :math:`\mathcal{N}(\mu, \mathrm{diag}(\Sigma))`. Between two
diagonal Gaussians the squared 2-Wasserstein distance is

.. math::
    W_2^2 = \|\mu_1 - \mu_2\|_2^2 + \|\Sigma_1^{1/2} - \Sigma_2^{1/2}\|_2^2,

the squared Euclidean distance between the concatenations :math:`[\mu, \Sigma^{1/2}]`, so
all pairwise distances are one matmul, :math:`\|x\|^2 + \|y\|^2 - 2 x y^\top` (Appendix
A.2).
"""

import functools
import math

import torch
import torch.nn.functional as F
from torch import nn

from recbole.model.abstract_recommender import SequentialRecommender
from recbole.model.loss import BPRLoss

#: covariances are clamped to this before the square root (keeps the gradient finite)
COV_EPS = 1e-24

#: what ``stosa_preset`` sets: the paper's model, or the official code's
PRESETS = {
    "paper": {
        "layer_means": "paper",
        "input": "paper",
        "ffn": "paper",
        "init": "recbole",
    },
    "official": {
        "layer_means": "official",
        "input": "official",
        "ffn": "official",
        "init": "official",
    },
}


def elu_plus_one(x):
    """ELU(x) + 1 > 0: the map onto positive covariances."""
    return F.elu(x) + 1.0


def full_precision(function):
    r"""``function`` with autocast off and half-precision tensors in float32: under mixed
    precision a distance in matmul form, :math:`\|x\|^2 + \|y\|^2 - 2 x y^\top`, would
    lose its digits to cancellation."""

    @functools.wraps(function)
    def wrapped(*args):
        low = (torch.float16, torch.bfloat16)
        with torch.autocast(args[0].device.type, enabled=False):
            return function(
                *(t.float() if getattr(t, "dtype", None) in low else t for t in args)
            )

    return wrapped


def gaussian_vector(mean, cov):
    r""":math:`[\mu, \Sigma^{1/2}]` ``[..., 2d]``."""
    return torch.cat([mean, cov.clamp_min(COV_EPS).sqrt()], dim=-1)


@full_precision
def wasserstein2_squared(mean1, cov1, mean2, cov2):
    """Elementwise squared W2 distance over the last dimension (broadcasting)."""
    root1, root2 = cov1.clamp_min(COV_EPS).sqrt(), cov2.clamp_min(COV_EPS).sqrt()
    return ((mean1 - mean2) ** 2).sum(-1) + ((root1 - root2) ** 2).sum(-1)


@full_precision
def scaled_wasserstein2_squared(mean1, cov1, mean2, cov2, scale):
    r"""``scale`` times all squared W2 distances between ``[..., N, d]`` and ``[..., M,
    d]`` (or ``[M, d]``) Gaussians, ``[..., N, M]``, as one matmul: with :math:`x = [\mu,
    \Sigma^{1/2}]`, :math:`\|x\|^2 + \|y\|^2 - 2 x y^\top` is the product of
    :math:`[x, \|x\|^2, 1]` and :math:`[-2y, 1, \|y\|^2]` (round-off may leave a zero
    distance slightly negative)."""
    x = gaussian_vector(mean1, cov1)
    y = gaussian_vector(mean2, cov2)
    left = torch.cat(
        [x, (x * x).sum(-1, keepdim=True), torch.ones_like(x[..., :1])], -1
    )
    right = torch.cat(
        [-2.0 * y, torch.ones_like(y[..., :1]), (y * y).sum(-1, keepdim=True)], -1
    )
    return (scale * left) @ right.transpose(-1, -2)


def pairwise_wasserstein2_squared(mean1, cov1, mean2, cov2):
    """All squared W2 distances (:func:`scaled_wasserstein2_squared`), clamped at 0."""
    return scaled_wasserstein2_squared(mean1, cov1, mean2, cov2, 1.0).clamp_min(0.0)


@full_precision
def triplet_wasserstein2_squared(mean, cov, pos_mean, pos_cov, neg_mean, neg_cov):
    r"""The squared W2 distances of eq. 11-12 between sequence Gaussians ``[N, d]``, their
    positive items ``[N, d]`` and negative items ``[N, M, d]``: ``(d(s, j^+) [N],
    d(s, j^-) [N, M], d(j^+, j^-) [N, M])``, each Gaussian's :math:`[\mu,
    \Sigma^{1/2}]` formed once."""
    seq = gaussian_vector(mean, cov).unsqueeze(-2)
    pos = gaussian_vector(pos_mean, pos_cov).unsqueeze(-2)
    neg = gaussian_vector(neg_mean, neg_cov)
    return (
        ((seq - pos) ** 2).sum(-1).squeeze(-1),
        ((seq - neg) ** 2).sum(-1),
        ((pos - neg) ** 2).sum(-1),
    )


class SquaredWeightsAggregate(torch.autograd.Function):
    r""":math:`(A \circ A)\, V`, eq. 7's aggregation of the covariances, whose backward
    passes once over the ``[..., L, L]`` weights: :math:`\partial A = A \circ
    (\partial O\, (2V)^\top)` (autograd's ``A**2`` takes three passes). Under mixed
    precision the backward's matmuls run in the gradient's dtype, as autocast ran the
    forward's, and the product with :math:`A` in :math:`A`'s dtype, as autograd's. Not
    twice differentiable."""

    @staticmethod
    def forward(ctx, weights, value):
        squared = weights * weights
        ctx.save_for_backward(weights, squared, value)
        return squared @ value

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        weights, squared, value = ctx.saved_tensors
        grad_weights = grad_value = None
        if ctx.needs_input_grad[0]:
            doubled = (2.0 * value).to(grad.dtype)
            product = grad @ doubled.transpose(-1, -2)
            if product.dtype == weights.dtype:
                grad_weights = product.mul_(weights)
            else:
                grad_weights = product * weights
        if ctx.needs_input_grad[1]:
            grad_value = squared.to(grad.dtype).transpose(-1, -2) @ grad
        return grad_weights, grad_value


def at(x, rows):
    """``x[b, rows[b]]`` of ``[B, L, ...]`` as ``[B, 1, ...]``."""
    return x[torch.arange(x.size(0), device=x.device), rows].unsqueeze(1)


def split_heads(x, n_heads):
    """``[B, L, d]`` -> ``[B, h, L, d/h]``."""
    batch, length, dim = x.shape
    return x.view(batch, length, n_heads, dim // n_heads).transpose(1, 2)


def merge_heads(x):
    """``[B, h, L, d_h]`` -> ``[B, L, h d_h]``."""
    batch, heads, length, dim = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * dim)


class WassersteinAttention(nn.Module):
    r"""Multi-head Wasserstein self-attention (eq. 5-7): per head, the weights
    :math:`A = \mathrm{softmax}(-W_2^2(q_t, k_s)/\sqrt{d_h})` between the query Gaussian
    :math:`(\mu^Q, \mathrm{ELU}(\Sigma^Q) + 1)` and the key Gaussian, causal and without
    padding keys; means aggregated with :math:`A`, covariances with :math:`A \circ A`;
    then SASRec's output sublayer (projection, dropout, residual, LayerNorm) per stream.

    ``outputs``: the streams whose outputs are computed, ``("mean", "cov")`` or
    ``("cov",)`` (the official model: the means only shape the weights). ``refiner``: a
    module that turns ``A`` into the matrix the values are aggregated with (AWRSR's
    refinement), called as ``refiner(A, mask, positions)``.
    """

    def __init__(
        self,
        n_heads,
        hidden_size,
        hidden_dropout_prob,
        attn_dropout_prob,
        layer_norm_eps,
        outputs=("mean", "cov"),
        refiner=None,
    ):
        super().__init__()
        self.n_heads = n_heads
        self.outputs = tuple(outputs)
        self.refiner = refiner

        def per_stream(make, names):
            return nn.ModuleDict({name: make() for name in names})

        def linear():
            return nn.Linear(hidden_size, hidden_size)

        self.query = per_stream(linear, ("mean", "cov"))
        self.key = per_stream(linear, ("mean", "cov"))
        self.value = per_stream(linear, self.outputs)
        self.dense = per_stream(linear, self.outputs)
        self.LayerNorm = per_stream(
            lambda: nn.LayerNorm(hidden_size, eps=layer_norm_eps), self.outputs
        )
        self.attn_dropout = nn.Dropout(attn_dropout_prob)
        self.out_dropout = nn.Dropout(hidden_dropout_prob)

    def forward(self, mean, cov, attention_mask, positions, rows=None):
        """Outputs ``[B, L, d]`` of the streams in ``outputs``, as a tuple; with ``rows``
        ``[B]``, only those query positions, ``[B, 1, d]`` (no refiner)."""
        streams = {"mean": mean, "cov": cov}
        queries = (
            streams if rows is None else {n: at(x, rows) for n, x in streams.items()}
        )
        q_mean, q_cov = (
            split_heads(self.query[n](queries[n]), self.n_heads)
            for n in ("mean", "cov")
        )
        k_mean, k_cov = (
            split_heads(self.key[n](streams[n]), self.n_heads) for n in ("mean", "cov")
        )
        scale = -1.0 / math.sqrt(q_mean.size(-1))  # eq. 6: -W_2^2 / sqrt(d)
        logits = scaled_wasserstein2_squared(
            q_mean, elu_plus_one(q_cov), k_mean, elu_plus_one(k_cov), scale
        )
        if rows is not None:
            attention_mask = at(attention_mask.squeeze(1), rows).unsqueeze(1)
        probs = torch.softmax(logits + attention_mask, dim=-1)
        if self.refiner is not None:
            probs = self.refiner(probs, attention_mask, positions)
        probs = self.attn_dropout(probs)
        outputs = []
        for name in self.outputs:
            value = split_heads(self.value[name](streams[name]), self.n_heads)
            if name == "mean":  # eq. 7: A V and (A o A) V
                context = probs @ value
            else:
                context = SquaredWeightsAggregate.apply(probs, value)
            hidden = self.dense[name](merge_heads(context))
            hidden = queries[name] + self.out_dropout(hidden)
            outputs.append(self.LayerNorm[name](hidden))
        return tuple(outputs)


class FeedForward(nn.Module):
    r"""ELU feed-forward sublayer (eq. 8-9): pre-LN
    :math:`x + \mathrm{Dropout}(\mathrm{FFN}(\mathrm{LN}(x)))` (the paper) or post-LN
    :math:`\mathrm{LN}(x + \mathrm{Dropout}(\mathrm{FFN}(x)))` (the official code)."""

    def __init__(
        self, hidden_size, inner_size, hidden_dropout_prob, layer_norm_eps, pre_ln
    ):
        super().__init__()
        self.pre_ln = pre_ln
        self.dense_1 = nn.Linear(hidden_size, inner_size)
        self.dense_2 = nn.Linear(inner_size, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.dropout = nn.Dropout(hidden_dropout_prob)

    def forward(self, x):
        if self.pre_ln:
            return x + self.dropout(
                self.dense_2(F.elu(self.dense_1(self.LayerNorm(x))))
            )
        return self.LayerNorm(self.dropout(self.dense_2(F.elu(self.dense_1(x)))) + x)


class STOSALayer(nn.Module):
    """Wasserstein attention, then a feed-forward sublayer per stream whose covariance
    output goes through :math:`\\mathrm{ELU}(\\cdot)+1`. With ``mean_stream=False``
    (the official model) the layer passes its input mean through and updates only the
    covariances."""

    def __init__(self, attention, feed_forward):
        super().__init__()
        self.multi_head_attention = attention
        self.feed_forward = nn.ModuleDict(feed_forward)

    def forward(self, mean, cov, attention_mask, positions, rows=None):
        outputs = self.multi_head_attention(mean, cov, attention_mask, positions, rows)
        streams = dict(zip(self.multi_head_attention.outputs, outputs))
        if "mean" in streams:
            mean = self.feed_forward["mean"](streams["mean"])
        elif rows is not None:
            mean = at(mean, rows)
        cov = elu_plus_one(self.feed_forward["cov"](streams["cov"]))
        return mean, cov


class STOSAEncoder(nn.Module):
    """A stack of :class:`STOSALayer`; with ``rows`` ``[B]``, the last layer computes
    only those query positions (the lower layers every position: the keys)."""

    def __init__(self, layers):
        super().__init__()
        self.layer = nn.ModuleList(layers)

    def forward(self, mean, cov, attention_mask, positions, rows=None):
        last = len(self.layer) - 1
        for index, layer in enumerate(self.layer):
            query_rows = rows if index == last else None
            mean, cov = layer(mean, cov, attention_mask, positions, query_rows)
        return mean, cov


class STOSA(SequentialRecommender):
    r"""STOSA embeds items as diagonal Gaussians (mean and covariance tables with separate
    position embeddings), replaces dot-product attention by the negative scaled squared
    2-Wasserstein distance (eq. 5), aggregates means with :math:`A` and covariances with
    :math:`A \circ A` (eq. 7), and ranks items by ascending :math:`W_2^2` between the
    sequence Gaussian and the item Gaussian (eq. 10). The loss is BPR on distances plus the
    positive-vs-negative hinge :math:`\lambda [d_{s_t,j^+} - d_{j^+,j^-}]_+` (eq. 11-12).

    ``stosa_preset: paper`` is that model. ``stosa_preset: official`` (the default) is the
    official code's model, the one behind the paper's numbers: it scored higher on
    validation on Office and reproduces the paper's numbers there.

    NOTE:
        Deviations from the paper (the first four are ``stosa_preset: official``; the
        other value of each is the paper's):

        * Layer means: every layer passes its input mean through and updates only the
          covariances, so the predicted mean is the input layer's mean (the official
          encoder drops each layer's mean output); no mean-stream value, output
          projection or FFN is built. ``paper``: means and covariances both go through
          attention and FFN (eq. 7-9).
        * FFN: post-LN ``LN(x + Dropout(FFN(x)))`` (``paper``: the pre-LN eq. 9),
          ``ELU(.)+1`` on the covariance output in both.
        * Input layer: ``ELU(Dropout(LN(E + P)))`` for means and ``ELU(Dropout(LN(E +
          P))) + 1`` for covariances, with ONE LayerNorm shared by both streams
          (``paper``: ``Dropout(LN(E + P))`` per stream with its own LayerNorm).
        * Initialization: N(0.01, ``initializer_range``) for linear and embedding
          weights, padding rows left non-zero (never trained; item 0 is never ranked)
          (``paper``: RecBole's N(0, ``initializer_range``) with zero padding rows).
        * Attention sublayer: the paper gives no residual or layer norm around the
          Wasserstein attention; we use SASRec's (output projection, dropout, residual,
          post-LN), as the official code does.
        * ``inner_size`` (FFN width) is configurable; the paper uses d, the official code
          4d (the default, 256 for d = 64).
        * Item covariances used for prediction and in the loss are ``ELU(M^Sigma) + 1``
          (the paper writes ``M^Sigma`` itself, which can be negative), as in the
          official code.
        * The attention score is :math:`-W_2^2/\sqrt{d_h}` (squared distance, scaled per
          head), as in the official code; the paper writes :math:`-W_2`.
        * The official negatives also avoid the user's validation and test items, a leak
          of held-out data; RecBole's sampler avoids the user's training items only.
        * ``loss_type: BPR`` is the paper's loss on the scores :math:`-W_2^2`, with the
          pvn hinge on the same negatives; ``CE`` (softmax over all items of
          :math:`-W_2^2`) is an option, under which RecBole draws no negatives and the
          hinge is off. The L2 term of eq. 12 is the optimizer's ``weight_decay``.
        * Scores returned to RecBole are :math:`-W_2^2`, so that "larger is better".
        * Position ids count back from the most recent item (``position_alignment:
          last``), as in the left-padded official code (the paper is silent); ``first``
          counts from the first item.
    """

    def __init__(self, config, dataset, make_refiner=None):
        """``make_refiner``: a factory of the refiner of every attention layer (AWRSR's);
        None: no refiner."""
        super(STOSA, self).__init__(config, dataset)

        # load parameters info
        self.n_layers = config["n_layers"]
        self.n_heads = config["n_heads"]
        self.hidden_size = config["hidden_size"]
        self.inner_size = config["inner_size"]
        self.hidden_dropout_prob = config["hidden_dropout_prob"]
        self.attn_dropout_prob = config["attn_dropout_prob"]
        self.layer_norm_eps = config["layer_norm_eps"]
        self.initializer_range = config["initializer_range"]
        self.position_alignment = config["position_alignment"]
        self.pvn_weight = config["pvn_weight"]
        self.loss_type = config["loss_type"]
        self.forms = self.preset_forms(config)

        # define layers and loss
        self.mean_item_embedding = nn.Embedding(
            self.n_items, self.hidden_size, padding_idx=0
        )
        self.cov_item_embedding = nn.Embedding(
            self.n_items, self.hidden_size, padding_idx=0
        )
        self.mean_position_embedding = nn.Embedding(
            self.max_seq_length, self.hidden_size
        )
        self.cov_position_embedding = nn.Embedding(
            self.max_seq_length, self.hidden_size
        )
        if self.forms["input"] == "official":
            # one LayerNorm shared by both streams (official code)
            self.input_layer_norm = nn.LayerNorm(
                self.hidden_size, eps=self.layer_norm_eps
            )
        else:
            self.mean_layer_norm = nn.LayerNorm(
                self.hidden_size, eps=self.layer_norm_eps
            )
            self.cov_layer_norm = nn.LayerNorm(
                self.hidden_size, eps=self.layer_norm_eps
            )
        self.dropout = nn.Dropout(self.hidden_dropout_prob)
        self.trm_encoder = STOSAEncoder(
            self._layer(make_refiner) for _ in range(self.n_layers)
        )
        self.loss_fct = BPRLoss() if self.loss_type == "BPR" else nn.CrossEntropyLoss()

        # parameters initialization
        self.apply(self._init_weights)

    @staticmethod
    def preset_forms(config):
        """The four forms ``stosa_preset`` names (:data:`PRESETS`)."""
        return PRESETS[config["stosa_preset"]]

    def _layer(self, make_refiner):
        refiner = make_refiner() if make_refiner else None
        streams = (
            ("cov",) if self.forms["layer_means"] == "official" else ("mean", "cov")
        )
        attention = WassersteinAttention(
            self.n_heads,
            self.hidden_size,
            self.hidden_dropout_prob,
            self.attn_dropout_prob,
            self.layer_norm_eps,
            outputs=streams,
            refiner=refiner,
        )
        feed_forward = {
            name: FeedForward(
                self.hidden_size,
                self.inner_size,
                self.hidden_dropout_prob,
                self.layer_norm_eps,
                pre_ln=self.forms["ffn"] == "paper",
            )
            for name in streams
        }
        return STOSALayer(attention, feed_forward)

    def _init_weights(self, module):
        """RecBole's SASRec initialization with zero padding rows; the official code's
        N(0.01, initializer_range) for linear and embedding weights, padding rows as
        drawn, with ``stosa_preset: official``."""
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(mean=0.0, std=self.initializer_range)
        elif isinstance(module, nn.LayerNorm):
            module.bias.data.zero_()
            module.weight.data.fill_(1.0)
        if isinstance(module, nn.Linear) and module.bias is not None:
            module.bias.data.zero_()
        if self.forms["init"] == "official":
            if isinstance(module, (nn.Linear, nn.Embedding)):
                module.weight.data.normal_(mean=0.01, std=self.initializer_range)
        elif isinstance(module, nn.Embedding) and module.padding_idx is not None:
            module.weight.data[module.padding_idx].zero_()

    def position_ids(self, item_seq_len, length):
        """``[B, length]``: counted from the first item (``first``), or back from the most
        recent one, which gets T - 1 (``last``; padding clamped to T - 1)."""
        steps = torch.arange(length, device=item_seq_len.device).unsqueeze(0)
        if self.position_alignment == "first":
            return steps.expand(item_seq_len.size(0), length)
        offset = (self.max_seq_length - item_seq_len).unsqueeze(1)
        return (steps + offset).clamp(max=self.max_seq_length - 1)

    def item_gaussians(self, items):
        """Item Gaussians ``(M^mu_j, ELU(M^Sigma_j) + 1)`` of eq. 10."""
        return self.mean_item_embedding(items), elu_plus_one(
            self.cov_item_embedding(items)
        )

    def encode(self, item_seq, item_seq_len, rows=None):
        """Sequence Gaussians ``(mean, cov)`` at every position, each ``[B, L, d]``; with
        ``rows`` ``[B]``, at those positions, ``[B, 1, d]`` (the last layer computes no
        other query: exact, the attention being causal and the layers row-wise)."""
        positions = self.position_ids(item_seq_len, item_seq.size(1))
        mean = self.mean_item_embedding(item_seq)  # [B, L, d]: M^mu E
        mean = mean + self.mean_position_embedding(positions)  # + P^mu
        cov = self.cov_item_embedding(item_seq)  # [B, L, d]: M^Sigma E
        cov = cov + self.cov_position_embedding(positions)  # + P^Sigma
        if self.forms["input"] == "official":
            mean = F.elu(self.dropout(self.input_layer_norm(mean)))
            cov = elu_plus_one(self.dropout(self.input_layer_norm(cov)))
        else:
            mean = self.dropout(self.mean_layer_norm(mean))
            cov = self.dropout(self.cov_layer_norm(cov))
        attention_mask = self.get_attention_mask(item_seq)  # [B, 1, L, L]
        if not self.trm_encoder.layer:
            mean, cov = (x if rows is None else at(x, rows) for x in (mean, cov))
            return mean, cov
        return self.trm_encoder(mean, cov, attention_mask, positions, rows)

    def forward(self, item_seq, item_seq_len):
        """The sequence Gaussian ``(mean, cov)`` ``[B, d]`` at the last item (the last
        layer computes that query alone, unless a refiner reads every row: AWRSR)."""
        refined = any(
            layer.multi_head_attention.refiner is not None
            for layer in self.trm_encoder.layer
        )
        if refined:
            mean, cov = self.encode(item_seq, item_seq_len)
            return (
                self.gather_indexes(mean, item_seq_len - 1),
                self.gather_indexes(cov, item_seq_len - 1),
            )
        mean, cov = self.encode(item_seq, item_seq_len, item_seq_len - 1)
        return mean.squeeze(1), cov.squeeze(1)

    def item_scores(self, output, items):
        """:math:`-W_2^2` between the sequence Gaussians ``output`` ``([N, d], [N, d])``
        and ``items`` ``[N]`` (or ``[N, M]``: M items per row)."""
        mean, cov = output
        item_mean, item_cov = self.item_gaussians(items)
        if item_mean.dim() > mean.dim():
            mean, cov = mean.unsqueeze(-2), cov.unsqueeze(-2)
        return -wasserstein2_squared(mean, cov, item_mean, item_cov)

    def all_item_scores(self, output):
        """:math:`-W_2^2` ``[N, n_items]`` to every item."""
        mean, cov = output
        return -pairwise_wasserstein2_squared(
            mean,
            cov,
            self.mean_item_embedding.weight,
            elu_plus_one(self.cov_item_embedding.weight),
        )

    def triplet_distances(self, output, pos_items, neg_items):
        """``(d(s, j^+), d(s, j^-), d(j^+, j^-))``, the squared W2 distances of eq. 11-12
        between the sequence Gaussians ``output`` ``([N, d], [N, d])``, ``pos_items``
        ``[N]`` and ``neg_items`` ``[N]`` or ``[N, M]`` (the last two shaped as
        ``neg_items``)."""
        single = neg_items.dim() == pos_items.dim()
        distances = triplet_wasserstein2_squared(
            *output,
            *self.item_gaussians(pos_items),
            *self.item_gaussians(neg_items.unsqueeze(-1) if single else neg_items),
        )
        if single:
            return distances[0], distances[1].squeeze(-1), distances[2].squeeze(-1)
        return distances

    @staticmethod
    def pvn_hinge(pos_dist, pos_neg_dist):
        r"""The hinge of eq. 11, :math:`[d(s, j^+) - d(j^+, j^-)]_+`, averaged over the
        rows and their negatives."""
        if pos_neg_dist.dim() > pos_dist.dim():
            pos_dist = pos_dist.unsqueeze(-1)
        return torch.relu(pos_dist - pos_neg_dist).mean()

    def pvn_loss(self, output, pos_items, neg_items):
        """:meth:`pvn_hinge` of ``output``, ``pos_items`` ``[N]`` and ``neg_items`` ``[N]``
        or ``[N, M]``."""
        pos_dist, _, pos_neg_dist = self.triplet_distances(output, pos_items, neg_items)
        return self.pvn_hinge(pos_dist, pos_neg_dist)

    def calculate_loss(self, interaction):
        output = self.forward(
            interaction[self.ITEM_SEQ], interaction[self.ITEM_SEQ_LEN]
        )
        pos_items = interaction[self.POS_ITEM_ID]
        if self.loss_type == "CE":
            return self.loss_fct(self.all_item_scores(output), pos_items)
        if self.loss_type != "BPR":
            raise NotImplementedError("Make sure 'loss_type' in ['BPR', 'CE']!")
        pos_dist, neg_dist, pos_neg_dist = self.triplet_distances(
            output, pos_items, interaction[self.NEG_ITEM_ID]
        )
        loss = self.loss_fct(-pos_dist, -neg_dist)
        return loss, self.pvn_weight * self.pvn_hinge(pos_dist, pos_neg_dist)

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
