"""Shared building blocks: THE attention, the transformer blocks around it, and one score
or refiner module per mechanism.

* :mod:`.attention` -- :class:`MultiHeadSelfAttention` (projections, score module, masked
  normalization, refiner, aggregation, output sublayer) and the score / refiner interfaces;
* :mod:`.transformer` -- feed-forward sublayer, layer and encoder stack;
* :mod:`.context` -- :class:`SequenceContext`, what layers know about the batch;
* :mod:`.masks` -- the causal / padding mask and masked softmax;
* :mod:`.dot` -- scaled dot-product scores (SASRec);
* :mod:`.wasserstein` -- 2-Wasserstein distances and the Wasserstein score (STOSA);
* :mod:`.dpp` -- closed-form k-DPP quantities; :mod:`.dpp_score` -- the k-DPP score
  (PAtt / DPAtt).
"""

from recbole_attn.model.layers.attention import (
    AttentionRefiner,
    AttentionScore,
    MultiHeadSelfAttention,
    merge_heads,
    split_heads,
)
from recbole_attn.model.layers.context import SequenceContext, position_ids
from recbole_attn.model.layers.dot import DotProductScore
from recbole_attn.model.layers.dpp import dpp_pair_probabilities
from recbole_attn.model.layers.dpp_diversity import causal_dpp_pair_probabilities
from recbole_attn.model.layers.dpp_score import DPPScore
from recbole_attn.model.layers.masks import causal_padding_mask, masked_softmax
from recbole_attn.model.layers.transformer import (
    FeedForward,
    TransformerEncoder,
    TransformerLayer,
)
from recbole_attn.model.layers.wasserstein import (
    GAUSSIAN_STREAMS,
    GaussianFeedForward,
    WassersteinScore,
    elu_plus_one,
    gaussian_vector,
    pairwise_wasserstein2_squared,
    wasserstein2_squared,
)

__all__ = [
    "AttentionRefiner",
    "AttentionScore",
    "MultiHeadSelfAttention",
    "merge_heads",
    "split_heads",
    "SequenceContext",
    "position_ids",
    "DotProductScore",
    "DPPScore",
    "causal_dpp_pair_probabilities",
    "dpp_pair_probabilities",
    "causal_padding_mask",
    "masked_softmax",
    "FeedForward",
    "TransformerEncoder",
    "TransformerLayer",
    "GAUSSIAN_STREAMS",
    "GaussianFeedForward",
    "WassersteinScore",
    "elu_plus_one",
    "gaussian_vector",
    "pairwise_wasserstein2_squared",
    "wasserstein2_squared",
]
