r"""
PARec
################################################

Reference:
    Fan Luo, Juan Zhang and Shenghui Xu. "Learning Positional Attention for Sequential
    Recommendation."

Reference code:
    https://github.com/NetEase-Media/FPARec

The attention of every block is a learned function of the query and key positions
only, :math:`\mathrm{softmax}(R_l / \sqrt{d_h})` with :math:`R_l \in \mathbb{R}^{h \times
n \times n}`, n = ``MAX_ITEM_LIST_LENGTH``: no query or key projection.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from recbole.model.abstract_recommender import SequentialRecommender
from recbole.model.layers import FeedForward
from recbole.model.loss import BPRLoss


class PositionalScore(nn.Module):
    """The positional logits ``R[h, pos(query), pos(key)] / sqrt(d_h)``: R full, or
    :math:`R_1 R_2^\\top` of rank ``factor_k`` (FPARec); R (the product) has std
    ``init_std``, truncated at 2 std."""

    def __init__(
        self,
        n_heads,
        max_length,
        head_size,
        factor_k=None,
        init_std=0.01,
    ):
        super().__init__()
        self.n_heads = n_heads
        self.max_length = max_length
        self.scale = math.sqrt(head_size)
        self.R = self.R1 = self.R2 = None
        if factor_k is None:
            self.R = nn.Parameter(self._init(n_heads, max_length, max_length, init_std))
        else:
            std = math.sqrt(init_std) / factor_k**0.25
            self.R1 = nn.Parameter(self._init(n_heads, max_length, factor_k, std))
            self.R2 = nn.Parameter(self._init(n_heads, max_length, factor_k, std))

    @staticmethod
    def _init(*shape_and_std):
        *shape, std = shape_and_std
        return nn.init.trunc_normal_(torch.empty(*shape), 0.0, std, -2 * std, 2 * std)

    def block(self, start, stop):
        """``R[:, start:stop, start:stop]`` before scaling, ``[h, m, m]`` (FPARec computes
        only this block of :math:`R_1 R_2^\\top`)."""
        if self.R is not None:
            return self.R[:, start:stop, start:stop]
        return self.R1[:, start:stop] @ self.R2[:, start:stop].transpose(-1, -2)

    def forward(self, positions, alignment):
        """Logits ``[1, h, L, L]`` (``first``) or ``[B, h, L, L]`` (``last``: gathered
        through the one-hot of the positions, a matmul whose backward scatters nothing).
        """
        length = positions.size(1)
        start = 0 if alignment == "first" else self.max_length - length
        r = self.block(start, start + length) / self.scale  # [h, L, L]
        if alignment == "first":
            return r.unsqueeze(0)
        one_hot = F.one_hot(positions - start, length).to(r.dtype).unsqueeze(1)
        return one_hot @ r @ one_hot.transpose(-1, -2)


class PositionalAttention(nn.Module):
    r"""A pre-LN positional attention sublayer (eq. 5-6): :math:`V = \mathrm{LN}(F)
    W_V`, :math:`F + \mathrm{Dropout}(\mathrm{Mask}(\mathrm{softmax}(R/\sqrt{d_h})) V)`,
    per head, no output projection."""

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
        self.value = nn.Linear(hidden_size, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.attn_dropout = nn.Dropout(attn_dropout_prob)
        self.out_dropout = nn.Dropout(hidden_dropout_prob)

    def forward(self, hidden, attention_mask, positions, alignment):
        batch, length, dim = hidden.shape
        logits = self.score(positions, alignment)
        probs = self.attn_dropout(torch.softmax(logits + attention_mask, dim=-1))
        value = self.value(self.LayerNorm(hidden))
        value = value.view(batch, length, self.n_heads, -1).transpose(1, 2)
        output = (probs @ value).transpose(1, 2).reshape(batch, length, dim)
        return hidden + self.out_dropout(output)


class PreLNFeedForward(FeedForward):
    r"""RecBole's point-wise feed-forward sublayer, pre-LN (eq. 8):
    :math:`x + \mathrm{Dropout}(W_2\,\mathrm{act}(W_1 \mathrm{LN}(x)))`."""

    def forward(self, input_tensor):
        hidden = self.dense_1(self.LayerNorm(input_tensor))
        hidden = self.dense_2(self.intermediate_act_fn(hidden))
        return input_tensor + self.dropout(hidden)


class PARecLayer(nn.Module):
    def __init__(self, attention, feed_forward):
        super().__init__()
        self.multi_head_attention = attention
        self.feed_forward = feed_forward

    def forward(self, hidden, attention_mask, positions, alignment):
        hidden = self.multi_head_attention(hidden, attention_mask, positions, alignment)
        return self.feed_forward(hidden)


class PARecEncoder(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.layer = nn.ModuleList(layers)

    def forward(self, hidden, attention_mask, positions, alignment):
        for layer in self.layer:
            hidden = layer(hidden, attention_mask, positions, alignment)
        return hidden


class PARec(SequentialRecommender):
    r"""PARec: item embeddings :math:`F_0 = M[s]`, then L pre-LN positional attention
    blocks,

    .. math::
        V_l = \mathrm{LN}(F_{l-1}) W_{V,l}, \quad
        \tilde F_l = F_{l-1} + \mathrm{Mask}(\mathrm{softmax}(R_l/\sqrt{d_h})) V_l, \quad
        F_l = \tilde F_l + \mathrm{FFN}(\mathrm{LN}(\tilde F_l))

    (eq. 5, 6, 8, with the residuals and dropout of section 3.1), a final
    :math:`\mathrm{LN}` (eq. 9), and scores :math:`\hat F_L M^\top` (eq. 10), trained with
    cross-entropy over all items (eq. 11).

    NOTE:
        Choices where the paper is silent:

        * ``position_alignment: last`` counts positions back from the most recent item,
          as the right-aligned reference code, so R is relative to it.
        * Multi-head R, scaled by :math:`1/\sqrt{d_h}`; no output projection (the
          paper's parameter count has none); dropout on the embeddings, the weights and
          both sublayers' outputs.
        * The paper's blocks: no position embedding and an FFN in every block (the
          reference code adds one and has a single FFN after all blocks).
        * R is drawn from N(0, 0.01) truncated at 2 std, as the reference code.
    """

    #: FPARec's R = R1 R2^T (``factor_k``)
    factored = False

    def __init__(self, config, dataset):
        super(PARec, self).__init__(config, dataset)

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
        self.factor_k = config["factor_k"] if self.factored else None

        # define layers and loss
        self.item_embedding = nn.Embedding(
            self.n_items, self.hidden_size, padding_idx=0
        )
        self.dropout = nn.Dropout(self.hidden_dropout_prob)
        self.trm_encoder = PARecEncoder(
            PARecLayer(
                PositionalAttention(
                    self.make_score(),
                    self.n_heads,
                    self.hidden_size,
                    self.hidden_dropout_prob,
                    self.attn_dropout_prob,
                    self.layer_norm_eps,
                ),
                PreLNFeedForward(
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
        if self.loss_type == "BPR":
            self.loss_fct = BPRLoss()
        elif self.loss_type == "CE":
            self.loss_fct = nn.CrossEntropyLoss()
        else:
            raise NotImplementedError("Make sure 'loss_type' in ['BPR', 'CE']!")

        # parameters initialization
        self.apply(self._init_weights)

    def make_score(self):
        """The positional logits of one block."""
        return PositionalScore(
            self.n_heads,
            self.max_seq_length,
            self.hidden_size // self.n_heads,
            factor_k=self.factor_k,
        )

    def _init_weights(self, module):
        """RecBole's SASRec initialization (R keeps its own)."""
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
        """:math:`\\mathrm{LN}(F_L)` ``[B, L, d]`` at every position (eq. 9)."""
        positions = self.position_ids(item_seq_len, item_seq.size(1))
        attention_mask = self.get_attention_mask(item_seq)  # [B, 1, L, L]
        hidden = self.dropout(self.item_embedding(item_seq))  # F_0 = M[s]
        hidden = self.trm_encoder(
            hidden, attention_mask, positions, self.position_alignment
        )
        return self.LayerNorm(hidden)

    def forward(self, item_seq, item_seq_len):
        output = self.encode(item_seq, item_seq_len)
        return self.gather_indexes(output, item_seq_len - 1)  # [B, d]

    def item_scores(self, output, items):
        """Dot products of ``output`` ``[N, d]`` with ``items`` ``[N]``."""
        return (output * self.item_embedding(items)).sum(-1)

    def all_item_scores(self, output):
        return output @ self.item_embedding.weight.transpose(0, 1)  # eq. 10

    def calculate_loss(self, interaction):
        output = self.forward(
            interaction[self.ITEM_SEQ], interaction[self.ITEM_SEQ_LEN]
        )
        pos_items = interaction[self.POS_ITEM_ID]
        if self.loss_type == "CE":  # eq. 11
            return self.loss_fct(self.all_item_scores(output), pos_items)
        neg_items = interaction[self.NEG_ITEM_ID]
        return self.loss_fct(
            self.item_scores(output, pos_items), self.item_scores(output, neg_items)
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
