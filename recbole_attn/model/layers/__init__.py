"""Shared building blocks, one module per mechanism.

* :mod:`.masks` -- causal / padding attention masks and masked softmax;
* :mod:`.wasserstein` -- 2-Wasserstein distances between diagonal Gaussians, Wasserstein
  self-attention and the stochastic Transformer block of STOSA;
* :mod:`.dpp` -- closed-form k-DPP pair marginals (k = 2, 3), causal per-prefix forms and
  the probabilistic attention of PAtt / DPAtt.
"""

from recbole_attn.model.layers.dpp import (
    DPPAttention,
    DPPTransformerLayer,
    causal_dpp_pair_probabilities,
    dpp_pair_probabilities,
)
from recbole_attn.model.layers.masks import causal_padding_mask, masked_softmax
from recbole_attn.model.layers.wasserstein import (
    StochasticEncoder,
    StochasticTransformerLayer,
    WassersteinMultiHeadAttention,
    elu_plus_one,
    pairwise_wasserstein2_squared,
    wasserstein2_squared,
)

__all__ = [
    "DPPAttention",
    "DPPTransformerLayer",
    "causal_dpp_pair_probabilities",
    "dpp_pair_probabilities",
    "causal_padding_mask",
    "masked_softmax",
    "StochasticEncoder",
    "StochasticTransformerLayer",
    "WassersteinMultiHeadAttention",
    "elu_plus_one",
    "pairwise_wasserstein2_squared",
    "wasserstein2_squared",
]
