r"""RKSA as the plugin runs it: the RecBole file's model
(:class:`recbole_attn.model.rksa.RKSA`) with the plugin's training, its options declared
once, and its other kernels: the RBF item kernel (``item_kernel: rbf``) and the location
activation :math:`f = \tanh` of eq. 7 (``location_activation: tanh``)."""

import torch
import torch.nn.functional as F

from recbole_attn.data.histories import training_histories
from recbole_attn.model import rksa
from recbole_attn.options.declared import Default, Number, OneOf, Opt, Subset
from recbole_attn.plugin.sasrecap import SASREC_OPTIONS
from recbole_attn.sequential.length_groups import AuxLoss
from recbole_attn.sequential.recommender import (
    AttnSequentialRecommender,
    DotProductScores,
)

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


class RKSA(DotProductScores, AttnSequentialRecommender, RKSAWithForms):
    __doc__ = rksa.RKSA.__doc__
    encode_reads_user = True
    yaml_header = """RKSA (Ji et al., AAAI 2020): SASRec with skew-normal latent attention logits whose
correlation is a user-weighted mix of co-occurrence, item and user kernels. Paper
settings: 2 blocks, 1 head, d 64, dropout 0.5, batch 128, lr 1e-3, T 50, lambda_r 1e-3,
BCE with one negative per position; evaluation on 100 sampled negatives (uni100)."""
    options = {
        **SASREC_OPTIONS,
        "kernels": Opt(
            ["count", "item", "user"],
            Subset(*rksa.KERNELS),
            "the kernels mixed into psi (Table 3 ablation: any non-empty subset)",
        ),
        "item_kernel": Opt(
            "linear", OneOf(*ITEM_KERNELS), "on unit-norm representations"
        ),
        "location_activation": Opt("none", OneOf(*LOCATION_ACTIVATIONS), "f of eq. 7"),
        "rksa_jitter": Opt(
            0.001,
            Number("positive"),
            "epsilon of the Cholesky of (psi + eps I) / (1 + eps)",
        ),
        "rksa_rank_weight": Opt(
            0.001, Number(), "lambda_r of the listwise co-occurrence loss"
        ),
    }
    defaults = {
        "n_heads": 1,
        "inner_size": Default(64, "SASRec paper: d"),
        "hidden_act": Default("relu", "point-wise FFN with ReLU (paper)"),
        "layer_norm_eps": 1e-8,
        "loss_type": Default("BCE", "eq. 12: one sampled negative per position"),
        "train_batch_size": 128,
        "MAX_ITEM_LIST_LENGTH": 50,
        "training_mode": "all_position",
        "valid_metric": "NDCG@10",
    }
    recbole_loss_types = ("BCE", "CE")

    def training_interactions(self, dataset):
        """The users' complete training histories (also in ``all_position``)."""
        histories = training_histories(dataset)
        users = torch.repeat_interleave(histories.users, histories.lengths)
        return users.numpy(), histories.items.numpy()

    def aux_terms(self):
        if not self.rksa_rank_weight or not self.training:
            return ()
        weight = self.rksa_rank_weight / self.n_layers
        return tuple(
            AuxLoss(weight * value, count)
            for value, count in (
                layer.multi_head_attention.score.rank_loss
                for layer in self.trm_encoder.layer
            )
        )
