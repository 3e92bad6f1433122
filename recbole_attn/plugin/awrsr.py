"""AWRSR as the plugin runs it: the RecBole file's model
(:class:`recbole_attn.model.awrsr.AWRSR`) with the plugin's training, its options
declared once, and a STOSA backbone that takes STOSA's research forms
(:mod:`recbole_attn.plugin.stosa`)."""

from recbole_attn.model import awrsr, stosa
from recbole_attn.options.declared import OneOf, Opt
from recbole_attn.plugin.sasrecap import SASRecAP
from recbole_attn.plugin.stosa import (
    STOSA,
    STOSAForms,
    pvn_hinge,
    triplet_distances,
)
from recbole_attn.sequential.recommender import AttnSequentialRecommender


class RefinedSTOSAWithForms(STOSAForms, awrsr.RefinedSTOSA):
    """AWRSR's STOSA backbone built with the forms of ``stosa_preset`` and
    ``stosa_value_cov``: STOSA's plugin layers with the refiner (built first, as the
    model file's)."""

    def make_layer(self):
        refiner = self.make_refiner()
        layer = STOSAForms.make_layer(self)
        layer.multi_head_attention.refiner = refiner
        return layer


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
