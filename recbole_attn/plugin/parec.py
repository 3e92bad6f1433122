"""PARec as the plugin runs it: the RecBole file's model
(:class:`recbole_attn.model.parec.PARec`) with the plugin's training, its options
declared once, and the paper's fixed positional patterns (``positional_pattern``, the
Table 4 ablation) in place of the learned R."""

import math

import torch
from torch import nn

from recbole_attn.model import parec
from recbole_attn.options.declared import Default, Number, OneOf, Opt
from recbole_attn.plugin.sasrecap import SASREC_OPTIONS
from recbole_attn.sequential.recommender import (
    AttnSequentialRecommender,
    DotProductScores,
)

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


class PARec(DotProductScores, AttnSequentialRecommender, PARecWithForms):
    __doc__ = parec.PARec.__doc__
    yaml_header = """PARec ("Positional Attention for Sequential Recommendation"): pre-LN blocks whose
attention is a learned matrix R_l over (query, key) positions, no query/key projection.
Paper settings: 2 blocks, full cross-entropy over all items at every position, T in
{50, 100, 200} for the Amazon data (official scripts: d 50, 1 head, dropout 0.5)."""
    options = {
        **SASREC_OPTIONS,
        "positional_pattern": Opt(
            "learned",
            OneOf(*PATTERNS),
            "learned R; average, linear, exponential: the fixed patterns of the "
            "paper's ablation (Table 4)",
        ),
        "pattern_decay": Opt(
            0.5,
            Number("positive"),
            "gamma of the exponential pattern, w = gamma^(t - s)",
        ),
    }
    defaults = {
        "n_heads": 1,
        "inner_size": Default(64, "official code: d"),
        "hidden_act": Default("relu", "eq. 8: ReLU"),
        "layer_norm_eps": 1e-8,
        "loss_type": Default("CE", "eq. 11: cross-entropy over all items"),
        "MAX_ITEM_LIST_LENGTH": 50,
        "position_alignment": Default(
            "last", "R relative to the most recent item (official: right-aligned)"
        ),
        "training_mode": "all_position",
        "valid_metric": "NDCG@10",
    }
    recbole_loss_types = ("BPR", "CE")
