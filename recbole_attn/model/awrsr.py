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

from recbole_attn.config_check import OneOf, check_model_options
from recbole_attn.model.abstract_recommender import AttnSequentialRecommender
from recbole_attn.model.layers.refiners import REFINEMENTS, make_refiner
from recbole_attn.model.sasrec_ap import SASRecAP
from recbole_attn.model.stosa import STOSA


class AWRSR(AttnSequentialRecommender):
    r"""Attention-weight refinement on a SASRec or STOSA backbone (``backbone``), with
    ``refinement`` ``simp`` (eq. 2), ``value`` (eq. 3), ``add`` (eq. 4) or ``stoc``
    (STOSA only). Building ``AWRSR`` gives an instance of the backbone's AWRSR class
    (:class:`AWRSRSASRec`, :class:`AWRSRSTOSA`), whose defaults are the backbone's yaml
    plus ``AWRSR.yaml``.

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
    options = {
        "backbone": OneOf("SASRec", "STOSA"),
        "refinement": OneOf(*REFINEMENTS),
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

    def __new__(cls, config, dataset):
        if cls is AWRSR:
            cls = cls.implementation(config)
        return super().__new__(cls)

    @staticmethod
    def implementation(config):
        """The AWRSR class of ``config['backbone']`` (its options checked first)."""
        check_model_options(AWRSR, config)
        return BACKBONES[config["backbone"]]

    def __init__(self, config, dataset):
        # load parameters info (before the backbone builds its layers, which call
        # attention_refiner)
        self.backbone = config["backbone"]
        self.refinement = config["refinement"]
        super().__init__(config, dataset)

    def attention_refiner(self):
        return make_refiner(
            self.refinement,
            self.max_seq_length,
            self.hidden_size // self.n_heads,
            self.initializer_range,
        )


class AWRSRSASRec(AWRSR, SASRecAP):
    """AWRSR on SASRec (:class:`~recbole_attn.model.sasrec_ap.SASRecAP`)."""


class AWRSRSTOSA(AWRSR, STOSA):
    """AWRSR on STOSA (:class:`~recbole_attn.model.stosa.STOSA`)."""


BACKBONES = {"SASRec": AWRSRSASRec, "STOSA": AWRSRSTOSA}


def combinations():
    """Every valid ``(backbone, refinement)`` pair (``stoc`` needs STOSA)."""
    return [
        (backbone, refinement)
        for backbone in BACKBONES
        for refinement in REFINEMENTS
        if refinement != "stoc" or backbone == "STOSA"
    ]
