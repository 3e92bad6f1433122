"""SASRecAP, the baseline of every comparison at equal training mode: RecBole's SASRec
(its layers, parameter names and initialization) with the plugin's training;
:data:`SHARED_OPTIONS` are the layer options of every model of ours built on SASRec's
blocks."""

import torch
from recbole.model.abstract_recommender import SequentialRecommender
from recbole.model.layers import TransformerLayer
from recbole.model.loss import BPRLoss
from recbole.model.sequential_recommender.sasrec import SASRec
from torch import nn

from recbole_attn.options.values import VALUE_RULES
from recbole_attn.options.declared import OneOf, Opt
from recbole_attn.sequential.losses import LOSS_TYPE_HINT, LOSS_TYPES
from recbole_attn.sequential.recommender import (
    AttnSequentialRecommender,
    DotProductScores,
)

#: the options of the layers every model of ours shares (SASRec's, with RecBole's SASRec
#: defaults): a model class spreads these into its ``options`` and states its paper's
#: values in ``defaults``
SHARED_OPTIONS = {
    "loss_type": Opt(
        "CE",
        OneOf(*LOSS_TYPES, hint=LOSS_TYPE_HINT),
        "CE (softmax over all items), BPR, BCE or SSM (sampled softmax, log-Q corrected)",
    ),
    "n_layers": Opt(2, VALUE_RULES["n_layers"], "attention blocks"),
    "n_heads": Opt(2, VALUE_RULES["n_heads"], "attention heads"),
    "hidden_size": Opt(64, VALUE_RULES["hidden_size"], "d, the embedding size"),
    "inner_size": Opt(256, VALUE_RULES["inner_size"], "FFN width"),
    "hidden_dropout_prob": Opt(
        0.5,
        VALUE_RULES["hidden_dropout_prob"],
        "dropout of the input embeddings and of every sublayer's output",
    ),
    "attn_dropout_prob": Opt(
        0.5, VALUE_RULES["attn_dropout_prob"], "dropout of the attention weights"
    ),
    "layer_norm_eps": Opt(1e-12, VALUE_RULES["layer_norm_eps"], "LayerNorm epsilon"),
    "initializer_range": Opt(
        0.02, VALUE_RULES["initializer_range"], "std of the normal initialization"
    ),
}


#: the activations of RecBole's feed-forward sublayer
ACTIVATIONS = ("gelu", "relu", "swish", "tanh", "sigmoid")
#: the options of the models built on SASRec's blocks
SASREC_OPTIONS = {
    **SHARED_OPTIONS,
    "hidden_act": Opt("gelu", OneOf(*ACTIVATIONS), "activation of the FFN"),
}


class SASRecLayers(SequentialRecommender):
    """RecBole's SASRec layer by layer, with its outputs at every position (item scores:
    :class:`DotProductScores`)."""

    def __init__(self, config, dataset):
        super().__init__(config, dataset)
        for key in SASREC_OPTIONS:
            setattr(self, key, config[key])
        self.item_embedding = nn.Embedding(
            self.n_items, self.hidden_size, padding_idx=0
        )
        self.position_embedding = nn.Embedding(self.max_seq_length, self.hidden_size)
        self.trm_encoder = nn.Module()  # RecBole's TransformerEncoder, layer by layer
        self.trm_encoder.layer = nn.ModuleList(
            TransformerLayer(
                self.n_heads,
                self.hidden_size,
                self.inner_size,
                self.hidden_dropout_prob,
                self.attn_dropout_prob,
                self.hidden_act,
                self.layer_norm_eps,
            )
            for _ in range(self.n_layers)
        )
        self.LayerNorm = nn.LayerNorm(self.hidden_size, eps=self.layer_norm_eps)
        self.dropout = nn.Dropout(self.hidden_dropout_prob)
        self.apply(self._init_weights)

    _init_weights = SASRec._init_weights

    def encode(self, item_seq, item_seq_len, last_only=False):
        """Outputs ``[B, L, H]``; ``last_only``: ``[B, H]`` at the last items, the last
        layer for that row alone."""
        steps = torch.arange(item_seq.size(1), device=item_seq.device).unsqueeze(0)
        if self.position_alignment == "first":
            positions = steps.expand_as(item_seq)
        else:  # the most recent item at T - 1, padding clamped there
            positions = steps + (self.max_seq_length - item_seq_len).unsqueeze(1)
            positions = positions.clamp(max=self.max_seq_length - 1)
        hidden = self.item_embedding(item_seq) + self.position_embedding(positions)
        hidden = self.dropout(self.LayerNorm(hidden))
        mask = self.get_attention_mask(item_seq)
        layers = list(self.trm_encoder.layer)
        last = layers.pop() if last_only and layers else None
        for layer in layers:
            hidden = layer(hidden, mask)
        if not last_only:
            return hidden
        if last is None:  # n_layers: 0
            return self.gather_indexes(hidden, item_seq_len - 1)
        rows = (item_seq_len - 1).view(-1, 1, 1)
        mask = mask.gather(2, rows.unsqueeze(1).expand(-1, 1, 1, mask.size(-1)))
        return _last_row_layer(last, hidden, mask, rows).squeeze(1)

    def forward(self, item_seq, item_seq_len):
        return self.encode(item_seq, item_seq_len, last_only=True)

    def all_item_scores(self, output):
        return output @ self.item_embedding.weight.transpose(0, 1)

    def interaction_output(self, interaction):
        return self.forward(interaction[self.ITEM_SEQ], interaction[self.ITEM_SEQ_LEN])

    def calculate_loss(self, interaction):
        output = self.interaction_output(interaction)
        pos_items = interaction[self.POS_ITEM_ID]
        if self.loss_type == "CE":
            return nn.functional.cross_entropy(self.all_item_scores(output), pos_items)
        neg_items = interaction[self.NEG_ITEM_ID]
        return BPRLoss()(
            self.item_scores(output, pos_items), self.item_scores(output, neg_items)
        )

    def predict(self, interaction):
        output = self.interaction_output(interaction)
        return self.item_scores(output, interaction[self.ITEM_ID])

    def full_sort_predict(self, interaction):
        return self.all_item_scores(self.interaction_output(interaction))


def _last_row_layer(layer, hidden, mask, rows):
    """``layer(hidden, full_mask)`` at one query row per sequence, ``[B, 1, H]``."""
    attention = layer.multi_head_attention
    row = hidden.gather(1, rows.expand(-1, 1, hidden.size(-1)))

    def heads(x):  # [B, n, H] -> [B, h, n, d]
        return attention.transpose_for_scores(x).permute(0, 2, 1, 3)

    query = heads(attention.query(row))
    key, value = heads(attention.key(hidden)), heads(attention.value(hidden))
    scores = query @ key.transpose(-1, -2) / attention.sqrt_attention_head_size
    probs = attention.attn_dropout(attention.softmax(scores + mask))
    context = (probs @ value).permute(0, 2, 1, 3).reshape(row.shape)
    output = attention.LayerNorm(attention.out_dropout(attention.dense(context)) + row)
    return layer.feed_forward(output)


class SASRecAP(DotProductScores, AttnSequentialRecommender, SASRecLayers):
    """RecBole's SASRec (a SASRec ``state_dict`` loads into it and predicts the same
    scores) with the plugin's training: by default one sequence per user with a loss at
    every position, as in the SASRec paper. ``--model=SASRec`` stays RecBole's own."""

    yaml_header = (
        "SASRec (RecBole's layers and defaults) trained in all-position mode: the "
        "baseline\nour models are compared with at equal training mode."
    )
    options = SASREC_OPTIONS
    defaults = {"training_mode": "all_position"}
    recbole_loss_types = ("BPR", "CE")
