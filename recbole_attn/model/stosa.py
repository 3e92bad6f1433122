r"""
STOSA
################################################

Reference:
    Ziwei Fan et al. "Sequential Recommendation via Stochastic Self-Attention." in WWW 2022.

Reference code:
    https://github.com/zfan20/STOSA

Items are diagonal Gaussians; between two of them :math:`W_2^2 = \|\mu_1 - \mu_2\|_2^2 +
\|\Sigma_1^{1/2} - \Sigma_2^{1/2}\|_2^2`, so all pairwise distances are one matmul
(Appendix A.2).
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
#: ``position_alignment``: position ids counted from the first or from the last item
POSITION_ALIGNMENTS = ("first", "last")


def elu_plus_one(x):
    """ELU(x) + 1 > 0: the map onto positive covariances."""
    return F.elu(x) + 1.0


def full_precision(function):
    """``function`` in float32 with autocast off (distances in matmul form cancel)."""

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
    """Elementwise squared W2 distance over the last dimension."""
    root1, root2 = cov1.clamp_min(COV_EPS).sqrt(), cov2.clamp_min(COV_EPS).sqrt()
    return ((mean1 - mean2) ** 2).sum(-1) + ((root1 - root2) ** 2).sum(-1)


@full_precision
def scaled_wasserstein2_squared(mean1, cov1, mean2, cov2, scale):
    r"""``scale`` times all squared W2 distances ``[..., N, M]`` between ``[..., N, d]``
    and ``[..., M, d]`` Gaussians: :math:`[x, \|x\|^2, 1] \cdot [-2y, 1, \|y\|^2]`."""
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
    """All squared W2 distances, clamped at 0 (round-off)."""
    return scaled_wasserstein2_squared(mean1, cov1, mean2, cov2, 1.0).clamp_min(0.0)


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


def position_ids(item_seq_len, length, max_length, alignment):
    """``[B, length]`` position ids: from the first item (``first``), or back from the
    most recent one, which gets ``max_length - 1`` (``last``; padding clamped)."""
    steps = torch.arange(length, device=item_seq_len.device).unsqueeze(0)
    if alignment == "first":
        return steps.expand(item_seq_len.size(0), length)
    offset = (max_length - item_seq_len).unsqueeze(1)
    return (steps + offset).clamp(max=max_length - 1)


class WassersteinAttention(nn.Module):
    r"""Multi-head Wasserstein attention (eq. 5-7): per head
    :math:`A = \mathrm{softmax}(-W_2^2(q_t, k_s)/\sqrt{d_h})` between the query and key
    Gaussians :math:`(\mu, \mathrm{ELU}(\Sigma) + 1)`, causal; the value covariances
    :math:`\mathrm{ELU}(W_V^\Sigma x) + 1` aggregated with :math:`A \circ A`, then
    projection, dropout, residual and LayerNorm. It returns the covariances: the means
    only shape A."""

    def __init__(
        self,
        n_heads,
        hidden_size,
        hidden_dropout_prob,
        attn_dropout_prob,
        layer_norm_eps,
    ):
        super().__init__()
        self.n_heads = n_heads
        self.query_mean = nn.Linear(hidden_size, hidden_size)
        self.query_cov = nn.Linear(hidden_size, hidden_size)
        self.key_mean = nn.Linear(hidden_size, hidden_size)
        self.key_cov = nn.Linear(hidden_size, hidden_size)
        self.value = nn.Linear(hidden_size, hidden_size)
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.attn_dropout = nn.Dropout(attn_dropout_prob)
        self.out_dropout = nn.Dropout(hidden_dropout_prob)

    def attention_probs(self, q_mean, q_cov, mean, cov, attention_mask):
        """:math:`A` ``[B, h, Q, L]`` of the queries ``[B, Q, d]`` over the keys."""
        q_mean = split_heads(self.query_mean(q_mean), self.n_heads)
        q_cov = split_heads(self.query_cov(q_cov), self.n_heads)
        k_mean = split_heads(self.key_mean(mean), self.n_heads)
        k_cov = split_heads(self.key_cov(cov), self.n_heads)
        scale = -1.0 / math.sqrt(q_mean.size(-1))  # eq. 6: -W_2^2 / sqrt(d)
        logits = scaled_wasserstein2_squared(
            q_mean, elu_plus_one(q_cov), k_mean, elu_plus_one(k_cov), scale
        )
        return torch.softmax(logits + attention_mask, dim=-1)

    def forward(self, mean, cov, attention_mask, rows=None):
        """The covariances ``[B, L, d]``; with ``rows`` ``[B]``, only those query
        positions ``[B, 1, d]`` (the prediction needs only the last one)."""
        q_mean, q_cov = mean, cov
        if rows is not None:
            q_mean, q_cov = at(mean, rows), at(cov, rows)
            attention_mask = at(attention_mask.squeeze(1), rows).unsqueeze(1)
        probs = self.attn_dropout(
            self.attention_probs(q_mean, q_cov, mean, cov, attention_mask)
        )
        value = elu_plus_one(split_heads(self.value(cov), self.n_heads))
        hidden = self.dense(merge_heads((probs * probs) @ value))  # eq. 7
        return self.LayerNorm(q_cov + self.out_dropout(hidden))


class FeedForward(nn.Module):
    r"""ELU feed-forward sublayer, post-LN:
    :math:`\mathrm{LN}(x + \mathrm{Dropout}(W_2\,\mathrm{ELU}(W_1 x)))`."""

    def __init__(self, hidden_size, inner_size, hidden_dropout_prob, layer_norm_eps):
        super().__init__()
        self.dense_1 = nn.Linear(hidden_size, inner_size)
        self.dense_2 = nn.Linear(inner_size, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.dropout = nn.Dropout(hidden_dropout_prob)

    def forward(self, x):
        return self.LayerNorm(self.dropout(self.dense_2(F.elu(self.dense_1(x)))) + x)


class STOSALayer(nn.Module):
    """Wasserstein attention, then the covariance FFN with ELU + 1; the mean passes."""

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
        self.multi_head_attention = WassersteinAttention(
            n_heads, hidden_size, hidden_dropout_prob, attn_dropout_prob, layer_norm_eps
        )
        self.feed_forward = FeedForward(
            hidden_size, inner_size, hidden_dropout_prob, layer_norm_eps
        )

    def forward(self, mean, cov, attention_mask, rows=None):
        cov = self.multi_head_attention(mean, cov, attention_mask, rows)
        if rows is not None:
            mean = at(mean, rows)
        return mean, elu_plus_one(self.feed_forward(cov))


class STOSAEncoder(nn.Module):
    """A stack of :class:`STOSALayer`; with ``rows``, the last layer computes only them."""

    def __init__(self, layers):
        super().__init__()
        self.layer = nn.ModuleList(layers)

    def forward(self, mean, cov, attention_mask, rows=None):
        last = len(self.layer) - 1
        for index, layer in enumerate(self.layer):
            query_rows = rows if index == last else None
            mean, cov = layer(mean, cov, attention_mask, query_rows)
        return mean, cov


class STOSA(SequentialRecommender):
    r"""STOSA embeds items as diagonal Gaussians (mean and covariance tables, each with a
    position embedding), replaces dot-product attention by the scaled negative squared
    2-Wasserstein distance (eq. 5-7), and ranks items by ascending :math:`W_2^2` between
    the sequence Gaussian and the item Gaussian (eq. 10). The loss is BPR on the
    distances plus the hinge :math:`\lambda [d(s, j^+) - d(j^+, j^-)]_+` (eq. 11-12).
    Prediction computes only the last position in the last layer (exact: the attention is
    causal; full ranking 3.7x faster for ml-100k's 943 users at T 100 on one CPU
    thread), and the distances run in float32 where ``enable_amp`` would take them to
    half precision (their matmul form cancels).

    NOTE:
        This is the model of the reference code, which the paper's numbers come from.
        Deviations from the paper:

        * The layers update only the covariances: the sequence mean is the input
          layer's (the means still shape the attention weights).
        * Input layer: ``ELU(Dropout(LN(E + P)))`` for means and
          ``ELU(Dropout(LN(E + P))) + 1`` for covariances, one LayerNorm for both.
        * FFN: post-LN ``LN(x + Dropout(FFN(x)))`` with ELU, of width ``inner_size``
          (the paper: pre-LN, width d); ``ELU(.) + 1`` on the covariance output.
        * Attention sublayer: SASRec's output projection, dropout, residual and
          LayerNorm (the paper gives none).
        * The score is :math:`-W_2^2/\sqrt{d_h}` per head (the paper writes
          :math:`-W_2`); item covariances are ``ELU(M^Sigma) + 1``.
        * Initialization: N(0.01, ``initializer_range``) for linear and embedding
          weights, as the reference code.
        * The L2 term of eq. 12 is the optimizer's ``weight_decay``. ``loss_type: CE``
          (softmax over all items of :math:`-W_2^2`) trains without the hinge.
        * The value covariances aggregated with :math:`A \circ A` are
          :math:`\mathrm{ELU}(W_V^\Sigma x) + 1`, positive like the query and key
          covariances, as the reference code; eq. 7 writes the linear
          :math:`W_V^\Sigma x` (the two tie on validation on Amazon Office and Beauty,
          three seeds each).
        * ``position_alignment: last`` counts positions back from the most recent item,
          as the left-padded reference code; ``first`` counts from the first item.

        Deviations from the reference code: the padding rows of the item tables are
        zero (the reference code's initialization draws them); the model trains as
        RecBole's SASRec, the last position of every prefix with the negatives of
        RecBole's sampler, where the reference code trains every position and draws
        negatives outside all of the user's items, the held-out ones included.
    """

    def __init__(self, config, dataset):
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
        if self.position_alignment not in POSITION_ALIGNMENTS:
            raise ValueError("Make sure 'position_alignment' in ['first', 'last']!")

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
        self.input_layer_norm = nn.LayerNorm(self.hidden_size, eps=self.layer_norm_eps)
        self.dropout = nn.Dropout(self.hidden_dropout_prob)
        self.trm_encoder = STOSAEncoder(self.make_layer() for _ in range(self.n_layers))
        if self.loss_type == "BPR":
            self.loss_fct = BPRLoss()
        elif self.loss_type == "CE":
            self.loss_fct = nn.CrossEntropyLoss()
        else:
            raise NotImplementedError("Make sure 'loss_type' in ['BPR', 'CE']!")

        # parameters initialization
        self.apply(self._init_weights)

    def make_layer(self):
        """One :class:`STOSALayer` (a model built on STOSA builds its own layers
        here)."""
        return STOSALayer(
            self.n_heads,
            self.hidden_size,
            self.inner_size,
            self.hidden_dropout_prob,
            self.attn_dropout_prob,
            self.layer_norm_eps,
        )

    def _init_weights(self, module):
        """N(0.01, initializer_range) for linear and embedding weights (the reference
        code's), zero biases and padding rows."""
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(mean=0.01, std=self.initializer_range)
        elif isinstance(module, nn.LayerNorm):
            module.bias.data.zero_()
            module.weight.data.fill_(1.0)
        if isinstance(module, nn.Linear) and module.bias is not None:
            module.bias.data.zero_()
        if isinstance(module, nn.Embedding) and module.padding_idx is not None:
            module.weight.data[module.padding_idx].zero_()

    def position_ids(self, item_seq_len, length):
        return position_ids(
            item_seq_len, length, self.max_seq_length, self.position_alignment
        )

    def input_gaussians(self, item_seq, positions):
        """The input layer's ``(mean, cov)`` ``[B, L, d]``."""
        mean = self.mean_item_embedding(item_seq) + self.mean_position_embedding(
            positions
        )
        cov = self.cov_item_embedding(item_seq) + self.cov_position_embedding(positions)
        mean = F.elu(self.dropout(self.input_layer_norm(mean)))
        cov = elu_plus_one(self.dropout(self.input_layer_norm(cov)))
        return mean, cov

    def encode(self, item_seq, item_seq_len, rows=None):
        """Sequence Gaussians ``(mean, cov)`` ``[B, L, d]``; with ``rows`` ``[B]``, at
        those positions ``[B, 1, d]`` (the attention is causal: exact)."""
        positions = self.position_ids(item_seq_len, item_seq.size(1))
        mean, cov = self.input_gaussians(item_seq, positions)
        attention_mask = self.get_attention_mask(item_seq)  # [B, 1, L, L]
        return self.trm_encoder(mean, cov, attention_mask, rows)

    def forward(self, item_seq, item_seq_len):
        mean, cov = self.encode(item_seq, item_seq_len, item_seq_len - 1)
        return mean.squeeze(1), cov.squeeze(1)  # [B, d]

    def item_gaussians(self, items):
        """Item Gaussians ``(M^mu_j, ELU(M^Sigma_j) + 1)`` of eq. 10."""
        return self.mean_item_embedding(items), elu_plus_one(
            self.cov_item_embedding(items)
        )

    def item_scores(self, output, items):
        """:math:`-W_2^2` between the sequence Gaussians and ``items`` ``[N]``."""
        return -wasserstein2_squared(*output, *self.item_gaussians(items))

    def all_item_scores(self, output):
        """:math:`-W_2^2` ``[N, n_items]`` to every item."""
        mean, cov = output
        return -pairwise_wasserstein2_squared(
            mean,
            cov,
            self.mean_item_embedding.weight,
            elu_plus_one(self.cov_item_embedding.weight),
        )

    def calculate_loss(self, interaction):
        output = self.forward(
            interaction[self.ITEM_SEQ], interaction[self.ITEM_SEQ_LEN]
        )
        pos_items = interaction[self.POS_ITEM_ID]
        if self.loss_type == "CE":
            return self.loss_fct(self.all_item_scores(output), pos_items)
        pos_gaussian = self.item_gaussians(pos_items)
        neg_gaussian = self.item_gaussians(interaction[self.NEG_ITEM_ID])
        pos_dist = wasserstein2_squared(*output, *pos_gaussian)
        neg_dist = wasserstein2_squared(*output, *neg_gaussian)
        pos_neg_dist = wasserstein2_squared(*pos_gaussian, *neg_gaussian)
        loss = self.loss_fct(-pos_dist, -neg_dist)
        pvn = torch.relu(pos_dist - pos_neg_dist).mean()  # eq. 11
        return loss, self.pvn_weight * pvn

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
