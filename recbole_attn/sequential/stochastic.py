"""STOSA and AWRSR (whose backbone may be STOSA) as the plugin runs them, with the pvn
hinge of STOSA's eq. 11 under every loss (:mod:`recbole_attn.sequential.models`)."""

import re

import torch

from recbole_attn.forms.stosa import (
    PRESETS,
    VALUE_COVS,
    RefinedSTOSAWithForms,
    STOSAWithForms,
)
from recbole_attn.model import awrsr, stosa
from recbole_attn.options.declared import Default, Number, OneOf, Opt
from recbole_attn.sequential.recommender import AttnSequentialRecommender
from recbole_attn.sequential.sasrecap import SHARED_OPTIONS, SASRecAP

#: the mean-stream sublayers that checkpoints of recbole_attn 0.1 hold and STOSA's
#: official layers do not build
_UNBUILT = re.compile(
    r"trm_encoder\.layer\.\d+\.(multi_head_attention\.(value|dense|LayerNorm)\.mean|"
    r"feed_forward\.mean)\."
)


def _drop_unbuilt_mean_sublayers(state_dict, prefix, *args):
    """Drop a 0.1 checkpoint's dead mean sublayers (they never influenced the output)."""
    for key in [k for k in state_dict if _UNBUILT.match(k[len(prefix) :])]:
        del state_dict[key]


def pvn_hinge(pos_dist, pos_neg_dist):
    """The hinge of eq. 11, :math:`[d(s, j^+) - d(j^+, j^-)]_+`, averaged."""
    return torch.relu(pos_dist.unsqueeze(-1) - pos_neg_dist).mean()


def triplet_distances(model, output, pos_items, neg_items):
    """STOSA's ``(d(s, j+) [N], d(s, j-) [N, M], d(j+, j-) [N, M])``."""
    return stosa.triplet_wasserstein2_squared(
        *output, *model.item_gaussians(pos_items), *model.item_gaussians(neg_items)
    )


class STOSA(AttnSequentialRecommender, STOSAWithForms):
    __doc__ = stosa.STOSA.__doc__
    extra_loss_names = ("pvn",)  # the hinge of eq. 11, with negatives
    yaml_header = """STOSA (Fan et al., WWW 2022). Defaults = the official README run on Amazon data
(docs/models.md, "STOSA") and the official code's model without its leak of held-out
items (stosa_preset: official); stosa_preset: paper is the model as the paper writes it."""
    options = {
        **SHARED_OPTIONS,
        "pvn_weight": Opt(0.005, Number(), "lambda of the positive-vs-negative hinge"),
        "stosa_preset": Opt(
            "official",
            OneOf(*PRESETS),
            "official: the official code's model (better on validation); paper: the "
            "model as the paper writes it (eq. 5-12)",
        ),
        "stosa_value_cov": Opt(
            "paper",
            OneOf(*VALUE_COVS),
            "the value covariances aggregated with A*A: paper, the linear W_V x of eq. "
            "7; official, the reference code's ELU(W_V x) + 1 (docs/models.md)",
        ),
    }
    defaults = {
        "n_layers": 1,
        "n_heads": 4,
        "inner_size": Default(256, "paper: d; official code: 4d; the FFN uses ELU"),
        "hidden_dropout_prob": 0.3,
        "attn_dropout_prob": 0.0,
        "loss_type": Default("BPR", "BPR on W2 distances + pvn hinge (eq. 12)"),
        "position_alignment": "last",
        "MAX_ITEM_LIST_LENGTH": 100,
        "epochs": Default(200, "the official code's"),
        "stopping_step": Default(
            50, "the official code's 100 picks the same epochs (experiments/budget_*)"
        ),
        "training_mode": "all_position",
        "valid_metric": Default("MRR@20", "the official code early-stops on MRR"),
    }
    recbole_loss_types = ("BPR", "CE")

    def __init__(self, config, dataset):
        super().__init__(config, dataset)
        if self.forms["layer_means"] == "official":
            self._register_load_state_dict_pre_hook(_drop_unbuilt_mean_sublayers)

    @property
    def needs_negatives(self):
        """The sampled losses and the pvn hinge (weight not 0) need negatives."""
        return super().needs_negatives or self.pvn_weight > 0

    def encode(self, item_seq, item_seq_len, rows=None):
        """The model file's; with no layer (``n_layers: 0``), the input Gaussians."""
        if self.trm_encoder.layer:
            return super().encode(item_seq, item_seq_len, rows)
        positions = self.position_ids(item_seq_len, item_seq.size(1))
        mean, cov = self.input_gaussians(item_seq, positions)
        if rows is None:
            return mean, cov
        return stosa.at(mean, rows), stosa.at(cov, rows)

    def item_scores(self, output, items):
        mean, cov = output
        item_mean, item_cov = self.item_gaussians(items)
        if item_mean.dim() > mean.dim():
            mean, cov = mean.unsqueeze(-2), cov.unsqueeze(-2)
        return -stosa.wasserstein2_squared(mean, cov, item_mean, item_cov)

    def pvn_loss(self, output, pos_items, neg_items):
        pos_dist, _, pos_neg_dist = triplet_distances(
            self, output, pos_items, neg_items
        )
        return pvn_hinge(pos_dist, pos_neg_dist)

    def position_terms(self, output, pos_items, neg_items):
        if neg_items is None:
            return ()
        return (self.pvn_weight * self.pvn_loss(output, pos_items, neg_items),)

    def position_losses(self, output, pos_items, neg_items=None, neg_log_q=None):
        """A sampled loss and the pvn hinge from one set of distances."""
        if neg_items is None or self.loss_type == "CE":
            return super().position_losses(output, pos_items, neg_items, neg_log_q)
        pos_dist, neg_dist, pos_neg_dist = triplet_distances(
            self, output, pos_items, neg_items
        )
        loss = self.sampled_position_loss(
            -pos_dist, -neg_dist, pos_items, neg_items, neg_log_q
        )
        return loss, self.pvn_weight * pvn_hinge(pos_dist, pos_neg_dist)


class AWRSR(AttnSequentialRecommender, awrsr.AWRSR):
    __doc__ = awrsr.AWRSR.__doc__
    #: the STOSA backbone with the forms of ``stosa_preset``
    backbones = {**awrsr.BACKBONES, "STOSA": RefinedSTOSAWithForms}
    yaml_header = """AWRSR ("Pay Attention to Attention for Sequential Recommendation", RecSys 2024):
attention-weight refinement on a backbone. The backbone's yaml (SASRecAP.yaml or
STOSA.yaml) is loaded first, so every other default is the backbone's (paper: the
refinement reuses the backbone's tuned settings)."""
    options = {
        "backbone": Opt("SASRec", OneOf(*awrsr.BACKBONES), "SASRec or STOSA"),
        "refinement": Opt(
            "simp",
            OneOf(*awrsr.REFINERS),
            "simp (eq. 2), value (eq. 3), add (eq. 4) or stoc (STOSA only)",
        ),
    }
    option_rules = (
        lambda c: (
            "refinement: stoc turns attention rows into Gaussians for STOSA's "
            "Wasserstein attention; use it with backbone: STOSA, or choose simp, value "
            "or add for the SASRec backbone"
            if c["refinement"] == "stoc" and c["backbone"] != "STOSA"
            else None
        ),
    )

    @classmethod
    def yaml_classes(cls, options):
        """The classes whose yaml configure AWRSR: its backbone's, then its own."""
        name = options["backbone"] if "backbone" in options else None
        # an unknown backbone: the default's, until the option check names the valid ones
        return [{"STOSA": STOSA}.get(name, SASRecAP), cls]

    @property
    def on_stosa(self):
        return isinstance(self.backbone, stosa.STOSA)

    @property
    def loss_type(self):
        return self.backbone.loss_type

    def item_weights(self):
        return None if self.on_stosa else self.backbone.item_embedding.weight

    recbole_loss_types = ("BPR", "CE")

    @property
    def extra_loss_names(self):
        return ("pvn",) if self.on_stosa else ()

    @property
    def needs_negatives(self):
        pvn = self.on_stosa and self.backbone.pvn_weight > 0
        return super().needs_negatives or pvn

    def position_terms(self, output, pos_items, neg_items):
        if neg_items is None or not self.on_stosa:
            return ()
        pos_dist, _, pos_neg_dist = triplet_distances(
            self.backbone, output, pos_items, neg_items
        )
        return (self.backbone.pvn_weight * pvn_hinge(pos_dist, pos_neg_dist),)

    def use_loss_type(self, loss_type):
        self.backbone.loss_type = loss_type
