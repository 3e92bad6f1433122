r"""The probabilistic (k-DPP) attention score of PAtt / DPAtt (Liu et al., KDD 2024).

Per head, the Sampler :math:`S = M W^S` (eq. 8; the attention's ``query`` projection,
without bias) defines the kernel :math:`L = S S^\top` of a k-DPP on the valid causal prefix
of every query t. The dependency attention of eq. 7 is :math:`D_{tr} = \exp(-\lambda
P^k(r, t))` for keys r < t and :math:`D_{tt} = 1`; as logits :math:`-\lambda P^k(r, t)`
(0 on the diagonal, where P is 0), the shared attention's masked softmax divides every row
of D by its sum, and ``normalize = False`` keeps the paper's raw weights. The value is the
input M itself (the attention is built with ``value=False``).
"""

from recbole_attn.model.layers.attention import AttentionScore
from recbole_attn.model.layers.dpp import (
    causal_dpp_pair_weights,
    causal_masks,
    check_diversity_form,
    check_k,
)

#: key of the DPAtt sequence category kernel ``[B, T, T]`` in ``context.features``
CATEGORY_KERNEL = "dpp_category_kernel"


class DPPScore(AttentionScore):
    r"""Logits :math:`-\lambda P^k(r, t)` of the per-prefix k-DPP pair marginals
    (:func:`~recbole_attn.model.layers.dpp.causal_dpp_pair_probabilities`, as
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
    """

    projections = ("query",)
    projection_bias = False

    def __init__(
        self,
        k=2,
        lam=1.0,
        triple_samples=0,
        row_normalize=True,
        jitter=0.1,
        diversity_form="ratio",
    ):
        super().__init__()
        check_k(k)  # the k-DPP functions' own argument checks (the model's options are
        check_diversity_form(diversity_form)  # checked with the configuration)
        self.k = k
        self.lam = lam
        self.triple_samples = int(triple_samples)
        self.normalize = bool(row_normalize)
        self.jitter = jitter
        self.diversity_form = diversity_form

    def forward(self, query, key, context, rows=None, inputs=None):
        if rows is not None:  # every query row needs the whole prefix kernel
            raise ValueError("DPPScore computes every query row (no row shortcut)")
        mask = context.valid
        sampler = query * mask[:, None, :, None].to(query.dtype)  # padding rows 0
        kernel = sampler @ sampler.transpose(-1, -2)
        masks = context.cached(
            ("dpp_masks", self.k, query.dtype),
            lambda: causal_masks(mask, self.k, True, query.dtype),
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
