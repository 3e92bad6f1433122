r"""
RKSA
################################################

Reference:
    Mingi Ji, Weonyoung Joo, Kyungwoo Song, Yoon-Yeong Kim and Il-Chul Moon. "Sequential
    Recommendation with Relation-Aware Kernelized Self-Attention." in AAAI 2020.

SASRec with skew-normal attention logits (eq. 7-11): location :math:`\xi = q_t \cdot k_j
/ \sqrt{d_h}`, scale :math:`\omega`, correlation :math:`\psi = \sum_m r_m K_m` over
co-occurrence, item and user kernels, shape :math:`\alpha` from two-hop co-occurrences.
Training draws :math:`z = \xi + \omega(\delta |y_0| + \sqrt{1-\delta^2}\, y)` with
:math:`\delta = \alpha/\sqrt{1+\alpha^2}`, :math:`y_0 \sim N(0, 1)`, :math:`y \sim N(0,
\psi)` (eq. 13); evaluation uses :math:`E[z] = \xi + \omega \delta \sqrt{2/\pi}`.
"""

import math

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F
from torch import nn

from recbole.model.abstract_recommender import SequentialRecommender
from recbole.model.layers import FeedForward
from recbole.utils import InputType

#: the kernels of :math:`\psi`: co-occurrence counts, items, the user
KERNELS = ("count", "item", "user")


class CooccurrenceTable(nn.Module):
    """Training co-occurrence counts on the model's device, kept sparse (never
    O(|V|^2)): ``P[i, j]`` is the number of users whose training items hold both i and j,
    ``P[i, i]`` the number of users of i. ``block(item_seq)`` gathers the ``[B, L, L]``
    counts of each sequence in one ``searchsorted``. Buffers are not saved (they are
    rebuilt from the dataset)."""

    def __init__(self, users, items, n_items):
        super().__init__()
        users, items = np.asarray(users), np.asarray(items)
        ones = np.ones(len(users), dtype=np.float64)
        n_users = int(users.max()) + 1 if len(users) else 1
        matrix = sp.csr_matrix((ones, (users, items)), shape=(n_users, n_items))
        matrix.data[:] = 1.0  # duplicates were summed: binary user x item matrix
        counts = (matrix.T @ matrix).tocoo()
        keys = counts.row.astype(np.int64) * n_items + counts.col.astype(np.int64)
        order = np.argsort(keys)
        self.n_items = n_items
        self.register_buffer("keys", torch.from_numpy(keys[order]), persistent=False)
        values = torch.from_numpy(counts.data[order].astype(np.float32))
        self.register_buffer("values", values, persistent=False)
        diagonal = torch.from_numpy(counts.tocsr().diagonal().astype(np.float32))
        self.register_buffer("diagonal", diagonal, persistent=False)

    def lookup(self, rows, cols):
        """Counts of the item pairs ``(rows, cols)`` (same shape), 0 where none."""
        keys = rows.long() * self.n_items + cols.long()
        if self.keys.numel() == 0:
            return torch.zeros(keys.shape, device=keys.device)
        index = torch.searchsorted(self.keys, keys).clamp(max=self.keys.numel() - 1)
        return torch.where(self.keys[index] == keys, self.values[index], 0.0)

    def block(self, item_seq):
        """``[B, L, L]`` counts between the items of every sequence (padding: 0)."""
        counts = self.lookup(item_seq.unsqueeze(-1), item_seq.unsqueeze(-2))
        valid = (item_seq > 0).float()
        return counts * valid.unsqueeze(-1) * valid.unsqueeze(-2)

    def occurrences(self, item_seq):
        """``[B, L]`` number of users per item (padding: 0)."""
        return self.diagonal[item_seq] * (item_seq > 0)


def unit_diagonal(kernel, valid):
    """Rows/columns of padding zeroed, then the diagonal set to 1."""
    pair = valid.unsqueeze(-1) & valid.unsqueeze(-2)
    eye = torch.eye(kernel.size(-1), dtype=torch.bool, device=kernel.device)
    return torch.where(eye, 1.0, kernel * pair)


def counting_kernel(counts, occurrences, valid):
    r""":math:`P_{ij}^2 / (P_i P_j)` ``[B, L, L]``: 1 on the diagonal, 0 for pairs with an
    item never seen in training, the identity on padding. PSD: :math:`D^{-1}(P \circ
    P)D^{-1}` with P the Gram matrix of the binary user x item matrix (Schur product
    theorem)."""
    denom = occurrences.unsqueeze(-1) * occurrences.unsqueeze(-2)
    kernel = torch.where(denom > 0, counts.square() / denom.clamp_min(1.0), 0.0)
    return unit_diagonal(kernel, valid)


def cosine_kernel(x, valid):
    """Cosine similarities ``[B, L, L]`` of the rows of ``x`` (a correlation matrix)."""
    unit = F.normalize(x, dim=-1, eps=1e-12)
    return unit_diagonal(unit @ unit.transpose(-1, -2), valid)


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
    ratio = two_hop + mean * off * incl + off * m_tt
    ratio = ratio + torch.diag_embed(torch.diagonal(mean, dim1=-2, dim2=-1) ** 2)
    return ratio * incl


def msn_sample(xi, omega, delta, chol):
    r"""One draw of eq. 13: ``z = xi + omega (delta |y0| + sqrt(1 - delta^2) y)`` with
    ``y = chol @ eps`` ``[B, h, L]`` shared by the query rows and one ``y0`` per sequence
    and head. ``xi, omega, delta``: ``[B, h, Q, L]``; ``chol``: ``[B, L, L]``."""
    batch, heads, _, length = xi.shape
    eps = torch.randn(batch, heads, length, 1, dtype=xi.dtype, device=xi.device)
    y = (chol.unsqueeze(1) @ eps).transpose(-1, -2)  # [B, h, 1, L]
    y0 = torch.randn(batch, heads, 1, 1, dtype=xi.dtype, device=xi.device).abs()
    return xi + omega * (delta * y0 + torch.sqrt(1.0 - delta.square()) * y)


def msn_mean(xi, omega, delta):
    r""":math:`E[z] = \xi + \omega \delta \sqrt{2/\pi}`."""
    return xi + omega * delta * math.sqrt(2.0 / math.pi)


def listnet_loss(psi, target, valid):
    r"""ListNet top-one loss (Cao et al., 2007) between every row of ``psi`` and of the
    target scores over the row's causal prefix (keys j < t): :math:`-\sum_j
    \mathrm{softmax}(target_t)_j \log \mathrm{softmax}(\psi_t)_j`, averaged over the rows
    with at least two such keys. Returns ``(mean, number of such rows)``."""
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


def split_heads(x, n_heads):
    """``[B, L, d]`` -> ``[B, h, L, d/h]``."""
    batch, length, dim = x.shape
    return x.view(batch, length, n_heads, dim // n_heads).transpose(1, 2)


class SkewNormalScore(nn.Module):
    """RKSA's logits (module docstring) from the per-head query and key projections, the
    layer input ``x``, and the batch's ``features`` (co-occurrence counts and their
    kernels, the user embedding). In training it keeps the listwise kernel loss of its
    last call in :attr:`rank_loss` (``(mean over query rows, number of rows)``)."""

    def __init__(
        self,
        hidden_size,
        n_heads,
        kernels=KERNELS,
        jitter=1e-3,
    ):
        super().__init__()
        self.n_heads = n_heads
        self.kernels = tuple(kernels)
        self.jitter = float(jitter)
        self.omega = nn.ModuleDict(
            {n: nn.Linear(hidden_size, hidden_size) for n in ("query", "key")}
        )
        self.shape = nn.ModuleDict(
            {n: nn.Linear(hidden_size, hidden_size) for n in ("query", "key")}
        )
        self.kernel_mix = nn.Linear(hidden_size, len(kernels))  # r = softmax(u W_u + b)
        self.user_weight = nn.Linear(hidden_size, hidden_size, bias=False)  # W_s
        self.rank_loss = None

    def _pair(self, projections, x):
        """Per head ``(x_t W^Q) . (x_j W^K) / sqrt(d_h)`` ``[B, h, L, L]``."""
        q = split_heads(projections["query"](x), self.n_heads)
        k = split_heads(projections["key"](x), self.n_heads)
        return q @ k.transpose(-1, -2) / math.sqrt(q.size(-1))

    def correlation(self, x, features):
        """:math:`\\psi` ``[B, L, L]``: the user's mix of the selected kernels."""
        valid, user = features["valid"], features["user"]  # [B, L], [B, d]
        found = []
        for name in self.kernels:
            if name == "count":
                found.append(features["counting"])
            elif name == "item":
                found.append(self.item_kernel(x, valid))
            else:
                found.append(
                    cosine_kernel(self.user_weight(user).unsqueeze(1) * x, valid)
                )
        mix = torch.softmax(self.kernel_mix(user), -1)  # [B, m]
        return torch.einsum("bm,mbij->bij", mix, torch.stack(found))

    def item_kernel(self, x, valid):
        r"""The item kernel: the linear kernel :math:`\hat x_i \cdot \hat x_j`."""
        return cosine_kernel(x, valid)

    def location(self, logits):
        """f of eq. 7: the identity."""
        return logits

    def forward(self, query, key, x, features):
        xi = self.location(query @ key.transpose(-1, -2) / math.sqrt(query.size(-1)))
        omega = F.softplus(self._pair(self.omega, x))
        ratio = features["two_hop"].unsqueeze(1)  # [B, 1, L, L]
        top = ratio.amax(-1, keepdim=True)
        alpha = F.softplus(self._pair(self.shape, x)) * torch.where(
            top > 0, ratio / top.clamp_min(1e-12), 0.0
        )
        delta = alpha / torch.sqrt(1.0 + alpha.square())
        if not self.training:
            return msn_mean(xi, omega, delta)
        # the kernels and their Cholesky factor in float32 at least, autocast off
        with torch.autocast(x.device.type, enabled=False):
            if x.dtype in (torch.float16, torch.bfloat16):
                x = x.float()
            psi = self.correlation(x, features)
            eye = torch.eye(psi.size(-1), dtype=psi.dtype, device=psi.device)
            chol = torch.linalg.cholesky(
                (psi + self.jitter * eye) / (1.0 + self.jitter)
            )
            self.rank_loss = listnet_loss(psi, features["counting"], features["valid"])
        return msn_sample(xi, omega, delta, chol.to(xi.dtype))


class SkewNormalAttention(nn.Module):
    """SASRec's multi-head attention (projections, masked softmax, aggregation, output
    sublayer) with the skew-normal logits of :class:`SkewNormalScore`."""

    def __init__(
        self,
        score,
        n_heads,
        hidden_size,
        hidden_dropout_prob,
        attn_dropout_prob,
        layer_norm_eps,
    ):
        super().__init__()
        self.n_heads = n_heads
        self.score = score
        self.query = nn.Linear(hidden_size, hidden_size)
        self.key = nn.Linear(hidden_size, hidden_size)
        self.value = nn.Linear(hidden_size, hidden_size)
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.attn_dropout = nn.Dropout(attn_dropout_prob)
        self.out_dropout = nn.Dropout(hidden_dropout_prob)

    def forward(self, hidden, attention_mask, features):
        batch, length, dim = hidden.shape
        query = split_heads(self.query(hidden), self.n_heads)
        key = split_heads(self.key(hidden), self.n_heads)
        logits = self.score(query, key, hidden, features)
        probs = torch.softmax(logits + attention_mask, dim=-1)
        value = split_heads(self.value(hidden), self.n_heads)
        output = (self.attn_dropout(probs) @ value).transpose(1, 2)
        output = self.dense(output.reshape(batch, length, dim))
        return self.LayerNorm(hidden + self.out_dropout(output))


class RKSALayer(nn.Module):
    def __init__(self, attention, feed_forward):
        super().__init__()
        self.multi_head_attention = attention
        self.feed_forward = feed_forward

    def forward(self, hidden, attention_mask, features):
        hidden = self.multi_head_attention(hidden, attention_mask, features)
        return self.feed_forward(hidden)


class RKSAEncoder(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.layer = nn.ModuleList(layers)

    def forward(self, hidden, attention_mask, features):
        for layer in self.layer:
            hidden = layer(hidden, attention_mask, features)
        return hidden


class RKSA(SequentialRecommender):
    r"""RKSA: SASRec's embedding (item + position, LN, dropout), blocks and prediction
    layer, a user embedding, and attention :math:`\mathrm{softmax}(z) V` with
    :math:`z \sim \mathrm{MSN}(\xi, \omega, \psi, \alpha)` (eq. 5-13). Loss: BCE with one
    sampled negative (eq. 12, as SASRec) plus :math:`\lambda_r` (``rksa_rank_weight``)
    times the listwise co-occurrence loss, averaged over layers.

    NOTE:
        Decisions where the paper is silent (no reference code exists):

        * :math:`\omega`, :math:`\alpha` are defined per query row t (the paper: the
          last item only), so each row t is a prediction of its own (RecBole trains
          the last row of every prefix) and reads no later item.
        * One :math:`y_0` and one :math:`y` per sequence and head, shared by the rows;
          :math:`\psi` shared by a layer's heads, its Cholesky factor taken of
          :math:`(\psi + \epsilon I)/(1 + \epsilon)` (``rksa_jitter``).
        * The user kernel is normalized to unit diagonal (a cosine), so :math:`\psi` is
          a correlation matrix.
        * Co-occurrences count training interactions only.
        * The listwise loss is ListNet between the rows of :math:`\psi` and of the
          counting kernel over their causal keys.
    """

    #: BCE trains on one negative per sample from RecBole's sampler (``NEG_ITEM_ID``)
    input_type = InputType.PAIRWISE

    def __init__(self, config, dataset):
        super(RKSA, self).__init__(config, dataset)

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
        self.rksa_rank_weight = config["rksa_rank_weight"]
        kernels = config["kernels"]
        if not kernels or not set(kernels) <= set(KERNELS):
            raise ValueError(
                "Make sure 'kernels' is a non-empty subset of " f"{list(KERNELS)}!"
            )

        # define layers and loss
        self.n_users = dataset.num(self.USER_ID)
        self.item_embedding = nn.Embedding(
            self.n_items, self.hidden_size, padding_idx=0
        )
        self.position_embedding = nn.Embedding(self.max_seq_length, self.hidden_size)
        self.user_embedding = nn.Embedding(self.n_users, self.hidden_size)
        self.cooccurrence = CooccurrenceTable(
            *self.training_interactions(dataset), self.n_items
        )
        self.trm_encoder = RKSAEncoder(
            RKSALayer(
                SkewNormalAttention(
                    self.make_score(config["kernels"], config["rksa_jitter"]),
                    self.n_heads,
                    self.hidden_size,
                    self.hidden_dropout_prob,
                    self.attn_dropout_prob,
                    self.layer_norm_eps,
                ),
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
        self.LayerNorm = nn.LayerNorm(self.hidden_size, eps=self.layer_norm_eps)
        self.dropout = nn.Dropout(self.hidden_dropout_prob)
        if self.loss_type == "BCE":
            self.loss_fct = nn.BCEWithLogitsLoss()
        elif self.loss_type == "CE":
            self.loss_fct = nn.CrossEntropyLoss()
        else:
            raise NotImplementedError("Make sure 'loss_type' in ['BCE', 'CE']!")

        # parameters initialization
        self.apply(self._init_weights)

    def make_score(self, kernels, jitter):
        """The skew-normal logits of one block."""
        return SkewNormalScore(self.hidden_size, self.n_heads, kernels, jitter)

    def training_interactions(self, dataset):
        """``(users, items)`` of every training interaction, each user's items once or
        more: the items of every training row's sequence and its target."""
        feat = dataset.inter_feat
        seq = feat[self.ITEM_SEQ]
        items = torch.cat([seq, feat[self.ITEM_ID].unsqueeze(1)], dim=1)
        users = feat[self.USER_ID].unsqueeze(1).expand_as(items)
        real = items > 0
        return users[real].numpy(), items[real].numpy()

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

    def encode(self, item_seq, item_seq_len, user):
        """Outputs ``[B, L, d]`` at every position."""
        positions = self.position_ids(item_seq_len, item_seq.size(1))
        valid = item_seq > 0
        counts = self.cooccurrence.block(item_seq)  # [B, L, L]
        with torch.autocast(item_seq.device.type, enabled=False):  # counts: exact
            features = {
                "valid": valid,
                "user": self.user_embedding(user),  # [B, d]: weighs the kernels of psi
                "counting": counting_kernel(
                    counts, self.cooccurrence.occurrences(item_seq), valid
                ),
                "two_hop": two_hop_ratio(counts, valid),
            }
        hidden = self.item_embedding(item_seq) + self.position_embedding(positions)
        hidden = self.dropout(self.LayerNorm(hidden))
        attention_mask = self.get_attention_mask(item_seq)  # [B, 1, L, L]
        return self.trm_encoder(hidden, attention_mask, features)

    def forward(self, item_seq, item_seq_len, user):
        output = self.encode(item_seq, item_seq_len, user)
        return self.gather_indexes(output, item_seq_len - 1)  # [B, d]

    def rank_losses(self):
        """Per layer, :math:`\\lambda_r / L` times its listwise loss in the last training
        forward (their sum: the listwise loss averaged over the layers); none in
        evaluation."""
        if not self.training:
            return ()
        weight = self.rksa_rank_weight / self.n_layers
        return tuple(
            weight * layer.multi_head_attention.score.rank_loss[0]
            for layer in self.trm_encoder.layer
        )

    def item_scores(self, output, items):
        """Dot products of ``output`` ``[N, d]`` with ``items`` ``[N]``."""
        return (output * self.item_embedding(items)).sum(-1)

    def all_item_scores(self, output):
        return output @ self.item_embedding.weight.transpose(0, 1)

    def calculate_loss(self, interaction):
        output = self.forward(
            interaction[self.ITEM_SEQ],
            interaction[self.ITEM_SEQ_LEN],
            interaction[self.USER_ID],
        )
        pos_items = interaction[self.POS_ITEM_ID]
        if self.loss_type == "CE":
            loss = self.loss_fct(self.all_item_scores(output), pos_items)
        else:
            pos_score = self.item_scores(output, pos_items)
            neg_score = self.item_scores(output, interaction[self.NEG_ITEM_ID])
            loss = self.loss_fct(pos_score, torch.ones_like(pos_score)) + self.loss_fct(
                neg_score, torch.zeros_like(neg_score)
            )
        return (loss, *self.rank_losses())

    def predict(self, interaction):
        output = self.forward(
            interaction[self.ITEM_SEQ],
            interaction[self.ITEM_SEQ_LEN],
            interaction[self.USER_ID],
        )
        return self.item_scores(output, interaction[self.ITEM_ID])

    def full_sort_predict(self, interaction):
        output = self.forward(
            interaction[self.ITEM_SEQ],
            interaction[self.ITEM_SEQ_LEN],
            interaction[self.USER_ID],
        )
        return self.all_item_scores(output)
