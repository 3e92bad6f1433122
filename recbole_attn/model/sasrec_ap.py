"""
SASRecAP
################################################

Reference:
    Wang-Cheng Kang and Julian McAuley. "Self-Attentive Sequential Recommendation." in ICDM 2018.

RecBole's :class:`~recbole.model.sequential_recommender.sasrec.SASRec` (same layers, same
parameter names and shapes, same initialization: a RecBole SASRec ``state_dict`` loads into
it and predicts the same scores), on recbole_attn's shared attention and training modes: by
default one sequence per user with a loss at every position, as in the SASRec paper and in
the official code of every model of this package. It is the baseline that our speed and
quality comparisons use at equal training mode; ``--model=SASRec`` keeps meaning RecBole's
own.
"""

from torch import nn

from recbole_attn.model.item_embedding import ItemEmbeddingRecommender
from recbole_attn.model.layers import DotProductScore


class SASRecAP(ItemEmbeddingRecommender):
    r"""SASRec with all-position training.

    NOTE:
        The only differences from RecBole's SASRec are the training mode
        (``training_mode: all_position`` by default) and the losses: with ``loss_type:
        BPR`` the negatives of each position are drawn inside the model
        (``neg_sample_num``, default one), not by RecBole's sampler; with ``loss_type:
        CE`` the softmax over all items is computed only at valid (non-padding)
        positions. ``loss_type: BCE`` (not in RecBole's SASRec) is the SASRec paper's
        loss: binary cross-entropy of one positive and one sampled negative per
        position, the loss PAtt is trained with; ``SSM`` is the sampled softmax.
    """

    last_position_shortcut = True
    yaml_header = (
        "SASRec (RecBole's layers and defaults) trained in all-position mode: the "
        "baseline\nour models are compared with at equal training mode."
    )
    defaults = {"training_mode": "all_position"}

    def __init__(self, config, dataset, make_refiner=None):
        """``make_refiner``: a factory of the refiner of every attention layer (AWRSR's);
        None: no refiner."""
        super(SASRecAP, self).__init__(config, dataset)

        # define layers and loss
        self.item_embedding = nn.Embedding(
            self.n_items, self.hidden_size, padding_idx=0
        )
        self.position_embedding = nn.Embedding(self.max_seq_length, self.hidden_size)
        self.trm_encoder = self.transformer_encoder(
            DotProductScore, make_refiner=make_refiner
        )
        self.LayerNorm = nn.LayerNorm(self.hidden_size, eps=self.layer_norm_eps)
        self.dropout = nn.Dropout(self.hidden_dropout_prob)

        # parameters initialization
        self.apply(self._init_weights)

    def encode(self, context):
        return self.trm_encoder(self.embed_sequence(context), context)
