r"""Attention-weight refiners of AWRSR ("Pay Attention to Attention for Sequential
Recommendation", RecSys 2024): the normalized attention matrix A of a head (rows = query
positions, masked entries exactly 0) is turned into a refined matrix B, which is re-masked
and normalized; the values are aggregated with softmax(B).

Every refiner reads rows of A as representations of the query items ("how item k spreads
its attention") and mixes them with learnable :math:`n \times n` matrices (n =
``MAX_ITEM_LIST_LENGTH``, shared by the heads of a layer). Rows of W are indexed by the key
position of the entry of A they multiply (the context's position ids, so that trimmed
batches and both position alignments read the same entries); their output dimension is the
full n.

**Causality.** Row k of the result reads row k of A and rows t of A only where (k, t) is
allowed by the causal mask (t <= k, t a real item), because B is re-masked before its
softmax (and :math:`M_{value}`'s inner softmax is masked the same way). Row t of A depends
only on the items at positions <= t <= k. So the output at position k depends on no item
after k; it does depend on other query rows, so the last-position shortcut is not exact
(``mixes_rows``).
"""

import math

import torch
from torch import nn

from recbole_attn.model.layers.attention import AttentionRefiner
from recbole_attn.model.layers.masks import masked_softmax
from recbole_attn.model.layers.wasserstein import (
    elu_plus_one,
    pairwise_wasserstein2_squared,
)

REFINEMENTS = ("simp", "value", "add", "stoc")


def rows_at_positions(weight, context):
    """``weight [n, m]`` with rows taken at the key positions: ``[L, m]`` (positions
    counted from the first item) or ``[B, 1, L, m]`` (per sequence, through the one-hot
    of the positions)."""
    start, length = context.window_start, context.item_seq.size(1)
    window = weight[start : start + length]
    if context.alignment == "first":
        return window
    return (context.position_one_hot(weight.dtype) @ window).unsqueeze(1)


def block_at_positions(weight, context):
    """``weight [n, n]`` restricted to the positions on both axes: ``[L, L]`` or
    ``[B, 1, L, L]``."""
    start, length = context.window_start, context.item_seq.size(1)
    window = weight[start : start + length, start : start + length]
    if context.alignment == "first":
        return window
    one_hot = context.position_one_hot(weight.dtype)
    return (one_hot @ window @ one_hot.transpose(-1, -2)).unsqueeze(1)


class AttentionWeightRefiner(AttentionRefiner):
    """Base of the AWRSR refiners: the :math:`n \\times n` matrices (``names``),
    initialized as the identity plus N(0, ``init_std``) noise, so that the refinement
    starts from the correlations of the attention rows themselves (at W = 0 the bilinear
    forms would sit at a saddle point with vanishing gradients)."""

    names = ()

    def __init__(self, max_length, head_size, init_std=0.02):
        super().__init__()
        self.scale = math.sqrt(head_size)
        eye = torch.eye(max_length)
        for name in self.names:
            noise = torch.randn(max_length, max_length) * init_std
            setattr(self, name, nn.Parameter(eye + noise))

    def project(self, probs, weight, context):
        """``A W`` with the rows of W at the key positions: ``[B, h, L, n]``."""
        return probs @ rows_at_positions(weight, context)

    def refine(self, probs, mask, context):
        """The refined matrix B (logits), ``[B, h, L, L]``."""
        raise NotImplementedError

    def forward(self, probs, mask, context):
        return masked_softmax(self.refine(probs, mask, context), mask)


class SimpleRefiner(AttentionWeightRefiner):
    r""":math:`M_{simp}` (eq. 2): :math:`B_{kt} = (A_{k:} W^{RQ}) \cdot (A_{t:} W^{RK})
    / \sqrt{d_h}` (the paper prints an outer product of two rows; a scalar B_kt needs
    their inner product)."""

    names = ("W_RQ", "W_RK")

    def refine(self, probs, mask, context):
        query = self.project(probs, self.W_RQ, context)
        key = self.project(probs, self.W_RK, context)
        return query @ key.transpose(-1, -2) / self.scale


class AdditiveRefiner(AttentionWeightRefiner):
    r""":math:`M_{add}` (eq. 4): :math:`B_{kt} = ((A_{k:} W^{RK}) \cdot (A_{t:} W^{RQ})
    / \sqrt{d_h} + A_{kt}) / 2`."""

    names = ("W_RQ", "W_RK")

    def refine(self, probs, mask, context):
        left = self.project(probs, self.W_RK, context)
        right = self.project(probs, self.W_RQ, context)
        return (left @ right.transpose(-1, -2) / self.scale + probs) / 2.0


class ValueRefiner(AttentionWeightRefiner):
    r""":math:`M_{value}` (eq. 3), read in the row convention of eq. 2 and 4:
    :math:`B = \mathrm{softmax}_{causal}((A W^{RQ})(A W^{RK})^\top / \sqrt{d_h})
    \, (A W^{RV})`: the weights of :math:`M_{simp}` applied to attention-determined
    values :math:`A W^{RV}`, whose columns are key positions (:math:`W^{RV}` maps key
    positions to key positions).

    The paper multiplies by :math:`W^{R\cdot}` from the left, which mixes the rows of A
    (the query positions) over the whole sequence, future rows included: in training
    with a loss at every position that reads later items. Our reading keeps the paper's
    structure (values :math:`W^{RV}A`-like, weights :math:`\mathrm{softmax}((W^{RK}A)^\top
    W^{RQ}A)`-like) with every contraction over query rows restricted by the causal
    mask."""

    names = ("W_RQ", "W_RK", "W_RV")

    def refine(self, probs, mask, context):
        query = self.project(probs, self.W_RQ, context)
        key = self.project(probs, self.W_RK, context)
        weights = masked_softmax(query @ key.transpose(-1, -2) / self.scale, mask)
        values = probs @ block_at_positions(self.W_RV, context)
        return weights @ values


class StochasticRefiner(AttentionWeightRefiner):
    r""":math:`M_{stoc}` (STOSA backbones): row k of A becomes a Gaussian
    :math:`\mathcal{N}(A_{k:} W_\mu^{R}, \mathrm{diag}(\mathrm{ELU}(A_{k:} W_\Sigma^{R})
    + 1))` and :math:`B_{kt} = -W_2^2(\mathcal{N}_k, \mathcal{N}_t) / \sqrt{d_h}`, STOSA's
    own score between the rows (the paper stops at the distributions; the distance is as
    in STOSA's eq. 5-6)."""

    names = ("W_mu", "W_sigma")

    def refine(self, probs, mask, context):
        mean = self.project(probs, self.W_mu, context)
        cov = elu_plus_one(self.project(probs, self.W_sigma, context))
        return -pairwise_wasserstein2_squared(mean, cov, mean, cov) / self.scale


REFINERS = {
    "simp": SimpleRefiner,
    "value": ValueRefiner,
    "add": AdditiveRefiner,
    "stoc": StochasticRefiner,
}


def make_refiner(name, max_length, head_size, init_std=0.02):
    """The refiner ``name`` (AWRSR's ``refinement``, checked with the configuration)."""
    return REFINERS[name](max_length, head_size, init_std)
