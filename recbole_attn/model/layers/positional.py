r"""Positional attention scores (PARec / FPARec, "Positional Attention for Sequential
Recommendation"): the attention logits depend only on the query and key positions,
:math:`R_l / \sqrt{d_h}` with a learned :math:`R_l \in \mathbb{R}^{h \times n \times n}`
(PARec) or :math:`R_{1,l} R_{2,l}^\top` with :math:`R_{1,l}, R_{2,l} \in
\mathbb{R}^{h \times n \times k}` (FPARec), n = ``MAX_ITEM_LIST_LENGTH``. The paper's
ablation patterns (average, linear and exponential annealing) are fixed, non-learned
matrices of the same module.

R is indexed by the position ids of the
:class:`~recbole_attn.model.layers.context.SequenceContext`: with ``position_alignment:
last`` the most recent item is always position n - 1 (as in the right-aligned official
code), so R learns patterns relative to the most recent item; under either alignment a
trimmed batch reads exactly the entries the untrimmed one reads.
"""

import math

import torch
from torch import nn

from recbole_attn.model.layers.attention import AttentionScore
from recbole_attn.model.layers.context import select_rows

#: ``learned``: PARec / FPARec; the others are the paper's fixed ablation patterns
PATTERNS = ("learned", "average", "linear", "exponential")


def fixed_pattern(name, length, decay=0.5):
    r"""Log-weights ``[n, n]`` of a fixed pattern over the distance :math:`\Delta = t - s`
    between query t and key s (the masked softmax turns them into weights proportional to
    :math:`w(\Delta)` over the valid prefix): ``average`` :math:`w = 1`; ``linear``
    :math:`w = (n - \Delta)/n`; ``exponential`` :math:`w = \gamma^{\Delta}` (``decay`` =
    :math:`\gamma`). Entries above the diagonal are 0 (masked anyway)."""
    steps = torch.arange(length, dtype=torch.float64)
    delta = (steps.unsqueeze(1) - steps.unsqueeze(0)).clamp(min=0)
    if name == "average":
        logits = torch.zeros(length, length, dtype=torch.float64)
    elif name == "linear":
        logits = torch.log((length - delta) / length)
    elif name == "exponential":
        logits = delta * math.log(decay)
    else:
        raise ValueError(f"positional_pattern must be one of {list(PATTERNS)}")
    return logits.tril().float()


class PositionalScore(AttentionScore):
    """Logits ``R[h, pos(query), pos(key)] / sqrt(d_h)`` (no query or key projection).

    Args:
        n_heads (int): h.
        max_length (int): n, the size of R.
        head_size (int): d_h, for the scale.
        factor_k (int): None for a full R (PARec); k for :math:`R_1 R_2^\\top` (FPARec).
        pattern (str): ``learned``, or a fixed pattern (:func:`fixed_pattern`; a buffer,
            shared by the heads, not scaled).
        decay (float): :math:`\\gamma` of the exponential pattern.
        init_std (float): standard deviation of R (of the product :math:`R_1 R_2^\\top`
            for FPARec, whose factors get :math:`\\sqrt{std}/k^{1/4}`), truncated at 2
            standard deviations.
    """

    projections = ()

    def __init__(
        self,
        n_heads,
        max_length,
        head_size,
        factor_k=None,
        pattern="learned",
        decay=0.5,
        init_std=0.01,
    ):
        super().__init__()
        self.pattern = pattern
        self.n_heads = n_heads
        self.max_length = max_length
        self.scale = math.sqrt(head_size) if pattern == "learned" else 1.0
        self.R = self.R1 = self.R2 = None
        if pattern != "learned":
            self.register_buffer("fixed", fixed_pattern(pattern, max_length, decay))
        elif factor_k is None:
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
        only this block of :math:`R_1 R_2^\top`; a fixed pattern is the same for every
        head)."""
        if self.pattern != "learned":
            return self.fixed[start:stop, start:stop].expand(self.n_heads, -1, -1)
        if self.R is not None:
            return self.R[:, start:stop, start:stop]
        return self.R1[:, start:stop] @ self.R2[:, start:stop].transpose(-1, -2)

    def matrix(self):
        """The full positional matrix ``[h, n, n]``, before scaling."""
        return self.block(0, self.max_length)

    def forward(self, query, key, context, rows=None, inputs=None):
        start = context.window_start
        length = context.item_seq.size(1)
        r = self.block(start, start + length) / self.scale  # [h, L, L]
        if context.alignment == "first" and rows is None:  # the same ids in every row
            return r.unsqueeze(0)  # [1, h, L, L]
        keys = context.position_one_hot(r.dtype)  # [B, L, L]
        queries = select_rows(keys, rows)  # [B, Q, L]
        return queries.unsqueeze(1) @ r @ keys.transpose(-1, -2).unsqueeze(1)
