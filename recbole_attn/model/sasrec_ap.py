"""
SASRecAP
################################################

Reference:
    Wang-Cheng Kang and Julian McAuley. "Self-Attentive Sequential Recommendation." in ICDM 2018.

RecBole's own :class:`~recbole.model.sequential_recommender.sasrec.SASRec` (same layers, same
parameters, same initialization), trained with recbole_attn's training modes: by default one
sequence per user with a loss at every position, as in the SASRec paper and in the official
code of every model of this package. It is the baseline that our speed and quality
comparisons use at equal training mode; ``--model=SASRec`` keeps meaning RecBole's own.
"""

import torch
import torch.nn.functional as F
from recbole.model.sequential_recommender.sasrec import SASRec

from recbole_attn.model.abstract_recommender import (
    AttnSequentialRecommender,
    check_loss_type,
)


class _ConfigOverride:
    """Read-only view of a RecBole ``Config`` with some keys replaced (``config[key]`` and
    ``key in config``); used so that RecBole's ``SASRec.__init__``, which accepts only
    ``BPR`` and ``CE``, can build the layers of a BCE-trained model. The user's config
    object is not modified."""

    def __init__(self, config, **overrides):
        self._config = config
        self._overrides = overrides

    def __getitem__(self, key):
        if key in self._overrides:
            return self._overrides[key]
        return self._config[key]

    def __contains__(self, key):
        return key in self._overrides or key in self._config

    def __getattr__(self, name):
        return getattr(self._config, name)


class SASRecAP(AttnSequentialRecommender, SASRec):
    r"""SASRec with all-position training.

    NOTE:
        The only difference from RecBole's SASRec is the training mode
        (``training_mode: all_position`` by default). With ``loss_type: BPR`` the negative
        of each position is drawn uniformly inside the model (one per position), not by
        RecBole's sampler. With ``loss_type: CE`` the softmax over all items is computed
        only at valid (non-padding) positions. ``loss_type: BCE`` (not in RecBole's
        SASRec) is the SASRec paper's loss: binary cross-entropy of one positive and one
        sampled negative per position, the loss PAtt is trained with.
    """

    def __init__(self, config, dataset):
        loss_type = config["loss_type"]
        needs_negatives = check_loss_type("SASRecAP", loss_type)
        if loss_type == "BCE":  # RecBole's SASRec builds BPR or CE only
            config = _ConfigOverride(config, loss_type="BPR")
        super(SASRecAP, self).__init__(config, dataset)
        self.loss_type = loss_type
        self.needs_negatives = needs_negatives

    def encode(self, item_seq, item_seq_len):
        position_ids = torch.arange(item_seq.size(1), device=item_seq.device)
        input_emb = self.item_embedding(item_seq) + self.position_embedding(
            position_ids
        )
        input_emb = self.dropout(self.LayerNorm(input_emb))
        extended_attention_mask = self.get_attention_mask(item_seq)
        trm_output = self.trm_encoder(
            input_emb, extended_attention_mask, output_all_encoded_layers=True
        )
        return trm_output[-1]

    def position_loss(self, output, pos_items, neg_items):
        if self.needs_negatives:
            pos_score = (output * self.item_embedding(pos_items)).sum(-1)
            neg_score = (output * self.item_embedding(neg_items)).sum(-1)
            if self.loss_type == "BPR":  # RecBole's BPRLoss, as in its SASRec
                return self.loss_fct(pos_score, neg_score)
            return self.sampled_loss(pos_score, neg_score, "BCE")
        logits = torch.matmul(output, self.item_embedding.weight.transpose(0, 1))
        return F.cross_entropy(logits, pos_items)

    def score_items(self, output, items):
        return (output * self.item_embedding(items)).sum(-1)

    def score_all_items(self, output):
        return torch.matmul(output, self.item_embedding.weight.transpose(0, 1))
