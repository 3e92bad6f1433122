r"""RKSA's other kernels: the RBF item kernel (``item_kernel: rbf``) and the location
activation :math:`f = \tanh` of eq. 7 (``location_activation: tanh``)."""

import torch
import torch.nn.functional as F

from recbole_attn.model import rksa

#: ``item_kernel``
ITEM_KERNELS = ("linear", "rbf")
#: ``location_activation``: f of eq. 7
LOCATION_ACTIVATIONS = ("none", "tanh")
SCORE_FORMS = {"item_kernel": ITEM_KERNELS, "location_activation": LOCATION_ACTIVATIONS}


def rbf_kernel(x, valid):
    r""":math:`\exp(-\|\hat x_i - \hat x_j\|^2)` on unit-norm rows."""
    unit = F.normalize(x, dim=-1, eps=1e-12)
    sq = (2.0 - 2.0 * unit @ unit.transpose(-1, -2)).clamp_min(0.0)
    return rksa.unit_diagonal(torch.exp(-sq), valid)


class SkewNormalScoreWithForms(rksa.SkewNormalScore):

    def __init__(self, *args, item_kernel="linear", location_activation="none"):
        super().__init__(*args)
        self.rbf = item_kernel == "rbf"
        self.tanh = location_activation == "tanh"

    def item_kernel(self, x, valid):
        return rbf_kernel(x, valid) if self.rbf else super().item_kernel(x, valid)

    def location(self, logits):
        return torch.tanh(logits) if self.tanh else logits


class RKSAWithForms(rksa.RKSA):

    def __init__(self, config, dataset):
        self.score_forms = {
            "item_kernel": config["item_kernel"],
            "location_activation": config["location_activation"],
        }
        for key, values in SCORE_FORMS.items():
            if self.score_forms[key] not in values:
                raise ValueError(f"{key} must be one of {list(values)}")
        super().__init__(config, dataset)

    def make_score(self, kernels, jitter):
        return SkewNormalScoreWithForms(
            self.hidden_size, self.n_heads, kernels, jitter, **self.score_forms
        )
