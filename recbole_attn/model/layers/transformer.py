"""Transformer blocks around :class:`~recbole_attn.model.layers.attention.
MultiHeadSelfAttention`: the point-wise feed-forward network, one layer (attention then
FFN), and the stack, with RecBole's parameter names (``trm_encoder.layer.<i>.
multi_head_attention`` / ``feed_forward.dense_1`` ...)."""

import math

import torch
import torch.nn.functional as F
from torch import nn

from recbole_attn.model.layers.context import select_rows


def gelu(x):
    """RecBole's (and BERT's) erf GELU."""
    return x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))


#: ``hidden_act`` values: RecBole's, plus ``elu`` (STOSA's FFN)
ACTIVATIONS = {
    "gelu": gelu,
    "relu": F.relu,
    "swish": lambda x: x * torch.sigmoid(x),
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "elu": F.elu,
}


def activation(name):
    """The function of ``hidden_act`` (checked with the configuration)."""
    return ACTIVATIONS[name]


class FeedForward(nn.Module):
    r"""Point-wise feed-forward sublayer ``dense_2(act(dense_1(.)))`` with dropout and a
    residual: post-LN :math:`\mathrm{LN}(x + \mathrm{Dropout}(\mathrm{FFN}(x)))` (RecBole's
    ``FeedForward``, same names and math) or pre-LN
    :math:`x + \mathrm{Dropout}(\mathrm{FFN}(\mathrm{LN}(x)))`."""

    def __init__(
        self,
        hidden_size,
        inner_size,
        hidden_dropout_prob,
        hidden_act,
        layer_norm_eps,
        pre_ln=False,
    ):
        super().__init__()
        self.pre_ln = pre_ln
        self.dense_1 = nn.Linear(hidden_size, inner_size)
        self.act = activation(hidden_act)
        self.dense_2 = nn.Linear(inner_size, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.dropout = nn.Dropout(hidden_dropout_prob)

    def forward(self, x):
        if self.pre_ln:
            return x + self.dropout(
                self.dense_2(self.act(self.dense_1(self.LayerNorm(x))))
            )
        return self.LayerNorm(self.dropout(self.dense_2(self.act(self.dense_1(x)))) + x)


class TransformerLayer(nn.Module):
    """``multi_head_attention`` then ``feed_forward`` (an ``nn.Identity`` for none)."""

    def __init__(self, attention, feed_forward):
        super().__init__()
        self.multi_head_attention = attention
        self.feed_forward = feed_forward

    def forward(self, hidden, context, rows=None):
        return self.feed_forward(self.multi_head_attention(hidden, context, rows))


class TransformerEncoder(nn.Module):
    """A stack of :class:`TransformerLayer`. With ``context.query_index`` set, the last
    layer computes only that position of every sequence (exact: the lower layers still
    compute every position, and the last one reads them as keys)."""

    def __init__(self, layers):
        super().__init__()
        self.layer = nn.ModuleList(layers)

    @property
    def mixes_rows(self):
        return any(layer.multi_head_attention.mixes_rows for layer in self.layer)

    def forward(self, hidden, context):
        if not self.layer:
            return select_rows(hidden, context.query_index)
        last = len(self.layer) - 1
        for index, layer in enumerate(self.layer):
            rows = context.query_index if index == last else None
            hidden = layer(hidden, context, rows)
        return hidden
