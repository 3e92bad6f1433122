"""
recbole_attn.model.item_embedding
#################################

:class:`ItemEmbeddingRecommender`: the base of the models that score items as SASRec does,
by the dot product of the sequence representation with the item embedding (SASRecAP,
PAtt, DPAtt, RKSA, PARec, FPARec), with SASRec's input layer and transformer stack built
around the shared attention.
"""

from recbole_attn.config_check import OneOf
from recbole_attn.model.abstract_recommender import AttnSequentialRecommender
from recbole_attn.model.layers.attention import MultiHeadSelfAttention
from recbole_attn.model.layers.transformer import (
    ACTIVATIONS,
    FeedForward,
    TransformerEncoder,
    TransformerLayer,
)
from recbole_attn.model.losses import (
    LOSS_TYPES,
    SAMPLED_LOSS_TYPES,
    chunked_cross_entropy,
)


class ItemEmbeddingRecommender(AttnSequentialRecommender):
    r"""A sequential recommender whose prediction layer is SASRec's: the score of item j
    is the dot product of the sequence representation with row j of ``item_embedding``.

    Trained with ``loss_type`` ``CE`` (softmax over all items), ``BPR`` or ``BCE`` (one
    sampled negative per position; BCE is the SASRec paper's loss). A subclass creates
    ``item_embedding`` (and, for :meth:`embed_sequence`, ``position_embedding``,
    ``LayerNorm`` and ``dropout``) and sets ``loss_type``, then calls
    :meth:`check_loss_type`.
    """

    options = {
        "loss_type": OneOf(
            *LOSS_TYPES,
            hint="CE: softmax over all items; BCE (the SASRec and PAtt papers') and "
            "BPR: one sampled negative per position",
        ),
        "hidden_act": OneOf(*ACTIVATIONS),
    }

    def check_loss_type(self):
        """Set :attr:`needs_negatives` from ``loss_type`` (checked with the
        configuration)."""
        self.needs_negatives = self.loss_type in SAMPLED_LOSS_TYPES

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

    def position_loss(self, output, pos_items, neg_items):
        if not self.needs_negatives:
            return chunked_cross_entropy(
                output, self.item_embedding.weight, pos_items, self.ce_logits_budget_mb
            )
        pos_score = self.score_items(output, pos_items)
        neg_score = self.score_items(output, neg_items)
        return self.sampled_loss(pos_score, neg_score, self.loss_type)

    def score_items(self, output, items):
        return (output * self.item_embedding(items)).sum(-1)

    def score_all_items(self, output):
        return output @ self.item_embedding.weight.transpose(0, 1)
