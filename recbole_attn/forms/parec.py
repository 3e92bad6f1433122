"""PARec's fixed positional patterns (``positional_pattern``, the paper's Table 4
ablation) in place of the model file's learned R."""

import math

import torch
from torch import nn

from recbole_attn.model import parec

#: ``learned``: the model file's R; the others are the paper's fixed ablation patterns
PATTERNS = ("learned", "average", "linear", "exponential")


def fixed_pattern(name, length, decay=0.5):
    r"""Log-weights ``[n, n]`` over :math:`\Delta = t - s`: ``average`` 1, ``linear``
    :math:`(n - \Delta)/n`, ``exponential`` :math:`\gamma^{\Delta}`."""
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


class FixedPositionalScore(parec.PositionalScore):
    """A fixed pattern (a buffer shared by the heads, not scaled) in place of R."""

    def __init__(self, n_heads, max_length, pattern, decay=0.5):
        nn.Module.__init__(self)
        self.n_heads = n_heads
        self.max_length = max_length
        self.scale = 1.0
        self.R = self.R1 = self.R2 = None
        self.register_buffer("fixed", fixed_pattern(pattern, max_length, decay))

    def block(self, start, stop):
        return self.fixed[start:stop, start:stop].expand(self.n_heads, -1, -1)


class PARecWithForms(parec.PARec):
    """The model file's PARec (or FPARec), or a fixed ``positional_pattern`` in every
    block."""

    def __init__(self, config, dataset):
        self.positional_pattern = config["positional_pattern"]
        self.pattern_decay = config["pattern_decay"]
        if self.positional_pattern not in PATTERNS:
            raise ValueError(f"positional_pattern must be one of {list(PATTERNS)}")
        super().__init__(config, dataset)

    def make_score(self):
        if self.positional_pattern == "learned":
            return super().make_score()
        return FixedPositionalScore(
            self.n_heads,
            self.max_seq_length,
            self.positional_pattern,
            self.pattern_decay,
        )
