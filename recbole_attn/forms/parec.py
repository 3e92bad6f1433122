r"""
recbole_attn.forms.parec
########################

PARec's fixed positional patterns (``positional_pattern``), the ablation of the paper's
Table 4: the learned R of the model file (:mod:`recbole_attn.model.parec`) replaced by a
fixed function of the distance between query and key.
"""

import math

import torch
from torch import nn

from recbole_attn.model import parec

#: ``learned``: the model file's R; the others are the paper's fixed ablation patterns
PATTERNS = ("learned", "average", "linear", "exponential")


def fixed_pattern(name, length, decay=0.5):
    r"""Log-weights ``[n, n]`` of a fixed pattern over the distance :math:`\Delta = t - s`
    between query t and key s (the masked softmax turns them into weights proportional to
    :math:`w(\Delta)` over the valid prefix): ``average`` :math:`w = 1`; ``linear``
    :math:`w = (n - \Delta)/n`; ``exponential`` :math:`w = \gamma^{\Delta}` (``decay`` =
    :math:`\gamma`); the paper gives no formula. Entries above the diagonal are 0."""
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
    """The model file's PARec (or FPARec), or with ``positional_pattern`` other than
    ``learned`` a fixed pattern (``pattern_decay``: its gamma) in every block."""

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
