r"""Scaled dot-product attention scores (Vaswani et al., 2017; SASRec's attention):
:math:`q_t k_s^\top / \sqrt{d_h}`."""

import math

from recbole_attn.model.layers.attention import AttentionScore


class DotProductScore(AttentionScore):
    """:math:`Q K^\\top / \\sqrt{d_h}` per head."""

    def forward(self, query, key, context, rows=None, inputs=None):
        return (query @ key.transpose(-1, -2)) / math.sqrt(query.size(-1))
