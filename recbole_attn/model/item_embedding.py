"""
recbole_attn.model.item_embedding
#################################

:class:`ItemEmbeddingRecommender`: the base of the models that score items as SASRec does,
by the dot product of the sequence representation with the item embedding (SASRecAP,
PAtt, DPAtt, RKSA, PARec, FPARec), with SASRec's input layer and transformer stack built
around the shared attention.
"""

from recbole_attn.config_check import OneOf
from recbole_attn.model.abstract_recommender import (
    SHARED_OPTIONS,
    AttnSequentialRecommender,
)
from recbole_attn.model.layers.attention import MultiHeadSelfAttention
from recbole_attn.model.layers.transformer import (
    ACTIVATIONS,
    FeedForward,
    TransformerEncoder,
    TransformerLayer,
)
from recbole_attn.options import Opt


class ItemEmbeddingRecommender(AttnSequentialRecommender):
    r"""A sequential recommender whose prediction layer is SASRec's: the score of item j
    is the dot product of the sequence representation with row j of ``item_embedding``.

    Trained with any ``loss_type`` of the base class (CE over all items, BPR, BCE or the
    sampled softmax SSM; BCE with one negative is the SASRec paper's loss). A subclass
    creates ``item_embedding`` (and, for :meth:`embed_sequence`, ``position_embedding``,
    ``LayerNorm`` and ``dropout``).
    """

    options = {
        **SHARED_OPTIONS,
        "hidden_act": Opt("gelu", OneOf(*ACTIVATIONS), "activation of the FFN"),
    }

    def transformer_encoder(self, make_score, make_refiner=None, **attention_options):
        """SASRec's stack of ``n_layers`` blocks: the shared attention with the score module
        ``make_score()`` (and the refiner ``make_refiner()``) of every layer, then RecBole's
        post-LN feed-forward sublayer; sizes from the model's ``n_heads``,
        ``hidden_size``, ``inner_size``, dropouts, ``hidden_act`` and ``layer_norm_eps``.
        """
        return TransformerEncoder(
            TransformerLayer(
                MultiHeadSelfAttention(
                    make_score(),
                    self.n_heads,
                    self.hidden_size,
                    self.hidden_dropout_prob,
                    self.attn_dropout_prob,
                    self.layer_norm_eps,
                    refiner=make_refiner() if make_refiner else None,
                    **attention_options,
                ),
                FeedForward(
                    self.hidden_size,
                    self.inner_size,
                    self.hidden_dropout_prob,
                    self.hidden_act,
                    self.layer_norm_eps,
                ),
            )
            for _ in range(self.n_layers)
        )

    def embed_sequence(self, context):
        """SASRec's input layer: ``Dropout(LN(E[s] + P[pos]))``."""
        hidden = self.item_embedding(context.item_seq) + self.position_embedding(
            context.positions
        )
        return self.dropout(self.LayerNorm(hidden))

    def score_factors(self, output):
        return output

    def item_factors(self, items=None):
        if items is None:
            return self.item_embedding.weight
        return self.item_embedding(items)
