r"""The probabilistic (k-DPP) attention score of PAtt / DPAtt (Liu et al., KDD 2024).

Per head, the Sampler :math:`S = M W^S` (eq. 8; the attention's ``query`` projection,
without bias) defines the kernel :math:`L = S S^\top` of a k-DPP on the valid causal prefix
of every query t. The dependency attention of eq. 7 is :math:`D_{tr} = \exp(-\lambda
P^k(r, t))` for keys r < t and :math:`D_{tt} = 1`; as logits :math:`-\lambda P^k(r, t)`
(0 on the diagonal, where P is 0), the shared attention's masked softmax divides every row
of D by its sum, and ``normalize = False`` keeps the paper's raw weights. The value is the
input M itself (the attention is built with ``value=False``).

Three options follow the official code (github.com/l-lyl/PAtt; docs/patt.md, "Against
the official code") where it differs from the paper: the self weight
:math:`D_{tt} = \exp(-\lambda L_{tt})` (``diagonal="kernel"``; the paper: 1), the Sampler
:math:`S = (M W + b)^{\circ 2}` (``sampler="squared"``; the paper: :math:`M W^S`) and the
k-DPP on every position of the padded sequence, padding and future items included
(``ground_set="sequence"``, a LEAK: row t then depends on the items after t).
"""

import torch

from recbole_attn.model.layers.attention import AttentionScore
from recbole_attn.model.layers.dpp import (
    causal_masks,
    check_diversity_form,
    check_k,
    dpp_pair_probabilities,
)
from recbole_attn.model.layers.dpp_diversity import causal_dpp_pair_weights

#: key of the DPAtt sequence category kernel ``[B, T, T]`` in ``context.features``
CATEGORY_KERNEL = "dpp_category_kernel"
#: ``one``: :math:`D_{tt} = 1` (eq. 7); ``kernel``: :math:`D_{tt} = \exp(-\lambda
#: L_{tt})`, the official code's self logit :math:`-L_{tt}/\sqrt{d_h}`
DIAGONALS = ("one", "kernel")
#: ``linear``: :math:`S = M W^S` (eq. 8); ``squared``: :math:`S = (M W + b)^{\circ 2}`
#: (official: a biased projection squared elementwise, so every kernel entry is >= 0)
SAMPLERS = ("linear", "squared")
#: ``prefix``: query t's k-DPP lives on the valid prefix :math:`\{x \le t\}`;
#: ``sequence``: one k-DPP on every position of the padded sequence, padding and future
#: items included (the official normalizer; a LEAK, opt-in)
GROUND_SETS = ("prefix", "sequence")


def _check(name, value, allowed):
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")


class DPPScore(AttentionScore):
    r"""Logits :math:`-\lambda P^k(r, t)` of the per-prefix k-DPP pair marginals
    (:func:`~recbole_attn.model.layers.dpp_diversity.causal_dpp_pair_probabilities`, as
    :math:`W \cdot (-\lambda / Z)`: one pass).

    Args:
        k (int): 2 or 3.
        lam (float): :math:`\lambda`.
        triple_samples (int): k = 3: 0 = exact sum over all third items; s > 0 = the
            paper's sampled estimate while training (exact in evaluation).
        row_normalize (bool): divide every row of D by its sum (masked softmax).
        jitter (float): DPAtt's floor of the category minors.
        diversity_form (str): DPAtt's ``ratio`` or ``product`` form; used only when the
            model puts a sequence category kernel into ``context.features``.
        diagonal (str): :data:`DIAGONALS`.
        sampler (str): :data:`SAMPLERS` (``squared`` gives the projection a bias).
        ground_set (str): :data:`GROUND_SETS`; ``sequence`` reads every position of the
            batch (the model keeps its batches at full length) and takes no category
            kernel and no sampled triples.
    """

    projections = ("query",)

    def __init__(
        self,
        k=2,
        lam=1.0,
        triple_samples=0,
        row_normalize=True,
        jitter=0.1,
        diversity_form="ratio",
        diagonal="one",
        sampler="linear",
        ground_set="prefix",
    ):
        super().__init__()
        check_k(k)  # the k-DPP functions' own argument checks (the model's options are
        check_diversity_form(diversity_form)  # checked with the configuration)
        _check("diagonal", diagonal, DIAGONALS)
        _check("sampler", sampler, SAMPLERS)
        _check("ground_set", ground_set, GROUND_SETS)
        if ground_set == "sequence" and triple_samples:
            raise ValueError("ground_set='sequence' is exact only: triple_samples=0")
        self.k = k
        self.lam = lam
        self.triple_samples = int(triple_samples)
        self.normalize = bool(row_normalize)
        self.jitter = jitter
        self.diversity_form = diversity_form
        self.diagonal = diagonal
        self.sampler = sampler
        self.ground_set = ground_set
        #: read by the attention when it builds the Sampler projection
        self.projection_bias = sampler == "squared"

    def forward(self, query, key, context, rows=None, inputs=None):
        if rows is not None:  # every query row needs the whole prefix kernel
            raise ValueError("DPPScore computes every query row (no row shortcut)")
        sampler = query * query if self.sampler == "squared" else query
        if self.ground_set == "sequence":
            logits = self._sequence_logits(sampler, context)
        else:
            logits = self._prefix_logits(sampler, context)
        if self.diagonal == "kernel":  # -lambda L_tt on the diagonal
            logits = logits - torch.diag_embed(self.lam * (sampler * sampler).sum(-1))
        return logits

    def _sequence_logits(self, sampler, context):
        r""":math:`-\lambda P` of one k-DPP per sequence on all of its positions."""
        if CATEGORY_KERNEL in context.features:
            raise ValueError("ground_set='sequence' takes no category kernel (DPAtt)")
        kernel = sampler @ sampler.transpose(-1, -2)
        everywhere = torch.ones_like(context.valid).unsqueeze(1)  # [B, 1, T]
        return dpp_pair_probabilities(kernel, everywhere, self.k) * -self.lam

    def _prefix_logits(self, sampler, context):
        r""":math:`-\lambda P` of the per-prefix k-DPPs (0 on the diagonal)."""
        mask = context.valid
        sampler = sampler * mask[:, None, :, None].to(sampler.dtype)  # padding rows 0
        kernel = sampler @ sampler.transpose(-1, -2)
        masks = context.cached(
            ("dpp_masks", self.k, sampler.dtype),
            lambda: causal_masks(mask, self.k, True, sampler.dtype),
        )
        num, norm = causal_dpp_pair_weights(
            kernel,
            mask,
            self.k,
            diversity_form=self.diversity_form,
            category=context.features.get(CATEGORY_KERNEL),
            masks=masks,
            triple_samples=self.triple_samples if self.training else 0,
            jitter=self.jitter,
            premasked=True,
        )
        return num * (-self.lam / norm).unsqueeze(-1)  # -lambda P
