"""STOSA's presets (``stosa_preset``): the model file is the official code's model;
``paper`` is the model as the paper writes it (eq. 5-12), four forms that differ
(:data:`PRESETS`: ``layer_means``, ``input``, ``ffn``, ``init``; docs/models.md,
"STOSA")."""

import torch.nn.functional as F
from recbole.model.sequential_recommender.sasrec import SASRec
from torch import nn

from recbole_attn.model import awrsr, stosa

#: what ``stosa_preset`` sets: the paper's model, or the official code's
PRESETS = {
    "paper": {
        "layer_means": "paper",
        "input": "paper",
        "ffn": "paper",
        "init": "recbole",
    },
    "official": dict.fromkeys(("layer_means", "input", "ffn", "init"), "official"),
}


class PaperWassersteinAttention(stosa.WassersteinAttention):
    """Wasserstein attention with the mean stream of eq. 7: means aggregated with A."""

    outputs = ("mean", "cov")

    def aggregate(self, name, probs, value):
        if name == "mean":
            return probs @ value
        return super().aggregate(name, probs, value)


class OfficialValueCov:
    r"""The reference code's value covariances (zfan20/STOSA ``modules.py``,
    ``DistSelfAttention``): :math:`\mathrm{ELU}(W_V^\Sigma x) + 1`, positive as the
    query and key covariances are, before :math:`A \circ A` aggregates them (eq. 7 as
    the paper writes it, the model file's: the linear :math:`W_V^\Sigma x`)."""

    def aggregate(self, name, probs, value):
        if name == "cov":
            value = stosa.elu_plus_one(value)
        return super().aggregate(name, probs, value)


class OfficialCovWassersteinAttention(OfficialValueCov, stosa.WassersteinAttention):
    pass


class PaperOfficialCovWassersteinAttention(OfficialValueCov, PaperWassersteinAttention):
    pass


#: (the paper's mean stream, stosa_value_cov) -> the attention class
ATTENTIONS = {
    (False, "paper"): stosa.WassersteinAttention,
    (False, "official"): OfficialCovWassersteinAttention,
    (True, "paper"): PaperWassersteinAttention,
    (True, "official"): PaperOfficialCovWassersteinAttention,
}
#: the values of ``stosa_value_cov``
VALUE_COVS = ("paper", "official")


class PreLNFeedForward(stosa.FeedForward):
    r"""The paper's pre-LN FFN (eq. 9): :math:`x +
    \mathrm{Dropout}(\mathrm{FFN}(\mathrm{LN}(x)))`."""

    def forward(self, x):
        return x + self.dropout(self.dense_2(F.elu(self.dense_1(self.LayerNorm(x)))))


class PaperSTOSALayer(stosa.STOSALayer):
    """A layer whose means go through attention and FFN too (eq. 7-9)."""

    def update(self, mean, cov, outputs):
        mean_out, cov_out = outputs
        mean = self.feed_forward["mean"](mean_out)
        return mean, stosa.elu_plus_one(self.feed_forward["cov"](cov_out))


class STOSAWithForms(stosa.STOSA):

    def __init__(self, config, dataset, *args):
        self.forms = self.preset_forms(config)
        super().__init__(config, dataset, *args)
        if self.forms["input"] == "paper":  # one LayerNorm per stream
            del self.input_layer_norm
            eps = self.layer_norm_eps
            self.mean_layer_norm = nn.LayerNorm(self.hidden_size, eps=eps)
            self.cov_layer_norm = nn.LayerNorm(self.hidden_size, eps=eps)

    @staticmethod
    def preset_forms(config):
        """The forms of ``stosa_preset``, and the value covariances'
        (``stosa_value_cov``, which no preset sets)."""
        return {
            **PRESETS[config["stosa_preset"]],
            "value_cov": config["stosa_value_cov"],
        }

    def make_layer(self):
        paper_means = self.forms["layer_means"] == "paper"
        attention_class = ATTENTIONS[paper_means, self.forms["value_cov"]]
        attention = attention_class(
            self.n_heads,
            self.hidden_size,
            self.hidden_dropout_prob,
            self.attn_dropout_prob,
            self.layer_norm_eps,
        )
        paper_ffn = self.forms["ffn"] == "paper"
        ffn_class = PreLNFeedForward if paper_ffn else stosa.FeedForward
        feed_forward = {
            name: ffn_class(
                self.hidden_size,
                self.inner_size,
                self.hidden_dropout_prob,
                self.layer_norm_eps,
            )
            for name in attention.outputs
        }
        layer_class = PaperSTOSALayer if paper_means else stosa.STOSALayer
        return layer_class(attention, feed_forward)

    def _init_weights(self, module):
        """The model file's, or RecBole's SASRec init with zero padding rows."""
        if self.forms["init"] == "official":
            return super()._init_weights(module)
        SASRec._init_weights(self, module)
        if isinstance(module, nn.Embedding) and module.padding_idx is not None:
            module.weight.data[module.padding_idx].zero_()

    def input_gaussians(self, item_seq, positions):
        if self.forms["input"] == "official":
            return super().input_gaussians(item_seq, positions)
        mean = self.mean_item_embedding(item_seq) + self.mean_position_embedding(
            positions
        )
        cov = self.cov_item_embedding(item_seq) + self.cov_position_embedding(positions)
        return (
            self.dropout(self.mean_layer_norm(mean)),
            self.dropout(self.cov_layer_norm(cov)),
        )


class RefinedSTOSAWithForms(awrsr.RefinedSTOSA, STOSAWithForms):
    """AWRSR's STOSA backbone built with the forms of ``stosa_preset``."""
