r"""
AWRSR
################################################

Reference:
    "Pay Attention to Attention for Sequential Recommendation" (AWRSR), RecSys 2024.

No public code exists; the paper is the spec (docs/models.md, "AWRSR").

AWRSR refines the attention matrix of an existing self-attentive recommender: every
attention layer of the backbone (SASRec or STOSA) gets a refiner
(:mod:`recbole_attn.model.layers.refiners`) between its normalized matrix A and the
aggregation. Embedding, loss and prediction are the backbone's own code.
"""

from recbole_attn.config_check import OneOf
from recbole_attn.model.abstract_recommender import AttnSequentialRecommender
from recbole_attn.model.layers.refiners import REFINEMENTS, make_refiner
from recbole_attn.model.sasrec_ap import SASRecAP
from recbole_attn.model.stosa import STOSA
from recbole_attn.options import Opt

#: backbone name -> model class (each takes a refiner factory)
BACKBONES = {"SASRec": SASRecAP, "STOSA": STOSA}


class AWRSR(AttnSequentialRecommender):
    r"""Attention-weight refinement on a SASRec or STOSA backbone (``backbone``), with
    ``refinement`` ``simp`` (eq. 2), ``value`` (eq. 3), ``add`` (eq. 4) or ``stoc``
    (STOSA only). The backbone (:attr:`backbone`) is the backbone model itself, built with a
    refiner in every attention layer; AWRSR's defaults are the backbone's yaml plus
    ``AWRSR.yaml``.

    NOTE:
        Decisions where the paper is ambiguous (each tested):

        * The refiners act on the post-softmax, causally masked A (masked entries
          exactly 0), B is re-masked (causal + padding) before its softmax, and
          STOSA's covariance stream is aggregated with :math:`\mathrm{softmax}(B) \circ
          \mathrm{softmax}(B)`, as its means with :math:`\mathrm{softmax}(B)`.
          Under STOSA's default ``stosa_layer_means: official`` (the official code's
          model) the layers' mean outputs are dropped, so only the covariances are
          aggregated with the refined weights.
        * :math:`M_{simp}` and :math:`M_{add}`: the paper prints an outer product of two
          rows; we use their inner product (B_kt must be a scalar). Scale
          :math:`\sqrt{d_h}` (per head).
        * :math:`M_{value}`: the paper multiplies by the refinement matrices from the
          left, which mixes query rows over the whole sequence (a future-item leak in
          all-position training); we read it in the row convention of eq. 2 and 4 with
          a causally masked inner softmax
          (:class:`~recbole_attn.model.layers.refiners.ValueRefiner`).
        * :math:`M_{stoc}`: B is :math:`-W_2^2/\sqrt{d_h}` between the row Gaussians
          (the paper stops at the distributions).
        * One set of :math:`n \times n` matrices per layer, shared by its heads,
          initialized as identity + N(0, ``initializer_range``) noise (the paper gives no
          initialization; at zero the bilinear refinements start at a saddle point).
        * Refiners mix query rows, so prediction computes every position of the last
          layer (no last-position shortcut).
    """

    last_position_shortcut = False
    yaml_header = """AWRSR ("Pay Attention to Attention for Sequential Recommendation", RecSys 2024):
attention-weight refinement on a backbone. The backbone's yaml (SASRecAP.yaml or
STOSA.yaml) is loaded first, so every other default is the backbone's (paper: the
refinement reuses the backbone's tuned settings)."""
    options = {
        "backbone": Opt("SASRec", OneOf(*BACKBONES), "SASRec or STOSA"),
        "refinement": Opt(
            "simp",
            OneOf(*REFINEMENTS),
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
        """The classes whose yaml files configure AWRSR, given the user's options (files
        and overrides): its backbone's, then AWRSR's own."""
        backbone = BACKBONES.get(options["backbone"] if "backbone" in options else None)
        return [backbone, cls] if backbone else [cls]

    def __init__(self, config, dataset):
        super(AWRSR, self).__init__(config, dataset)

        # the backbone's sizes: a refiner per attention layer works on one head
        head_size = config["hidden_size"] // config["n_heads"]
        init_range = config["initializer_range"]

        def refiner():
            return make_refiner(
                self.refinement, self.max_seq_length, head_size, init_range
            )

        # define layers and loss: the backbone (the option names it), with a refiner in
        # every attention layer
        self.backbone = BACKBONES[self.backbone](config, dataset, make_refiner=refiner)

    @property
    def trm_encoder(self):
        """The backbone's layer stack (the name every model's stack has)."""
        return self.backbone.trm_encoder

    def encode(self, context):
        return self.backbone.encode(context)

    @property
    def loss_type(self):
        """The backbone's (AWRSR trains with its backbone's loss)."""
        return self.backbone.loss_type

    @property
    def needs_negatives(self):
        return self.backbone.needs_negatives

    @property
    def extra_loss_names(self):
        return self.backbone.extra_loss_names

    def position_loss(self, output, pos_items, neg_items, neg_log_q=None):
        return self.backbone.position_loss(output, pos_items, neg_items, neg_log_q)

    def score_items(self, output, items):
        return self.backbone.score_items(output, items)

    def score_all_items(self, output):
        return self.backbone.score_all_items(output)

    def score_factors(self, output):
        return self.backbone.score_factors(output)

    def item_factors(self, items=None):
        return self.backbone.item_factors(items)


def combinations():
    """Every valid ``(backbone, refinement)`` pair (``stoc`` needs STOSA)."""
    return [
        (backbone, refinement)
        for backbone in BACKBONES
        for refinement in REFINEMENTS
        if refinement != "stoc" or backbone == "STOSA"
    ]
