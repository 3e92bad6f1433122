r"""STOSA as the plugin runs it: the RecBole file's model
(:class:`recbole_attn.model.stosa.STOSA`) with the plugin's training (every loss with
in-model negatives, the pvn hinge of eq. 11 under each of them), its options declared
once, and its research forms:

* ``stosa_preset: paper``: the model as the paper writes it (eq. 5-12), four forms
  that differ from the model file's (:data:`PRESETS`: ``layer_means``, ``input``,
  ``ffn``, ``init``; docs/models.md, "STOSA");
* ``stosa_value_cov: paper``: the value covariances as eq. 7 writes them, the linear
  :math:`W_V^\Sigma x` (the model file's are the reference code's
  :math:`\mathrm{ELU}(W_V^\Sigma x) + 1`).

A form replaces whole methods; the layers are :class:`FormsSTOSALayer`, the model file's
parameters computed with the plugin's one-pass backward of :math:`A \circ A` and the
forms."""

import re

import torch
import torch.nn.functional as F
from recbole.model.sequential_recommender.sasrec import SASRec
from torch import nn

from recbole_attn.model import stosa
from recbole_attn.options.declared import Default, Number, OneOf, Opt
from recbole_attn.plugin.sasrecap import SHARED_OPTIONS
from recbole_attn.sequential.recommender import AttnSequentialRecommender

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
#: the values of ``stosa_value_cov``
VALUE_COVS = ("paper", "official")

#: a parameter name of the layers before recbole_attn 0.3 (ModuleDicts by stream:
#: ``query.mean``, ``value.cov``, ``feed_forward.cov``) -> today's
_STREAM_KEY = re.compile(
    r"(trm_encoder\.layer\.\d+\.)(?:multi_head_attention\.(query|key|value|dense|"
    r"LayerNorm)|(feed_forward))\.(mean|cov)\."
)
#: the mean-stream sublayers that checkpoints of recbole_attn 0.1 hold and STOSA's
#: official layers do not build
_UNBUILT = re.compile(
    r"trm_encoder\.layer\.\d+\.(multi_head_attention\.(value|dense|LayerNorm)_mean|"
    r"feed_forward_mean)\."
)


def _new_key(match):
    layer, sublayer, ffn, stream = match.groups()
    if ffn:
        return f"{layer}feed_forward{'_mean' if stream == 'mean' else ''}."
    if sublayer in ("query", "key"):
        return f"{layer}multi_head_attention.{sublayer}_{stream}."
    suffix = "_mean" if stream == "mean" else ""
    return f"{layer}multi_head_attention.{sublayer}{suffix}."


def _upgrade_state_dict(model, state_dict, prefix, *args):
    """Load a checkpoint of an earlier release: its per-stream names renamed (the
    same weights), and a 0.1 checkpoint's dead mean sublayers dropped where the model
    builds none (they never influenced the output)."""
    for key in [k for k in state_dict if _STREAM_KEY.match(k[len(prefix) :])]:
        new = prefix + _STREAM_KEY.sub(_new_key, key[len(prefix) :], count=1)
        state_dict[new] = state_dict.pop(key)
    if model.forms["layer_means"] == "official":
        for key in [k for k in state_dict if _UNBUILT.match(k[len(prefix) :])]:
            del state_dict[key]


@stosa.full_precision
def triplet_wasserstein2_squared(mean, cov, pos_mean, pos_cov, neg_mean, neg_cov):
    r"""The distances of eq. 11-12 between sequences ``[N, d]``, positives ``[N, d]``
    and M negatives each ``[N, M, d]``: ``d(s, j+) [N], d(s, j-) [N, M], d(j+, j-)
    [N, M]``."""
    seq = stosa.gaussian_vector(mean, cov).unsqueeze(-2)
    pos = stosa.gaussian_vector(pos_mean, pos_cov).unsqueeze(-2)
    neg = stosa.gaussian_vector(neg_mean, neg_cov)
    return (
        ((seq - pos) ** 2).sum(-1).squeeze(-1),
        ((seq - neg) ** 2).sum(-1),
        ((pos - neg) ** 2).sum(-1),
    )


def triplet_distances(model, output, pos_items, neg_items):
    """STOSA's ``(d(s, j+) [N], d(s, j-) [N, M], d(j+, j-) [N, M])``."""
    return triplet_wasserstein2_squared(
        *output, *model.item_gaussians(pos_items), *model.item_gaussians(neg_items)
    )


def pvn_hinge(pos_dist, pos_neg_dist):
    """The hinge of eq. 11, :math:`[d(s, j^+) - d(j^+, j^-)]_+`, averaged."""
    return torch.relu(pos_dist.unsqueeze(-1) - pos_neg_dist).mean()


class SquaredWeightsAggregate(torch.autograd.Function):
    r""":math:`(A \circ A) V` (eq. 7) with a one-pass backward,
    :math:`\partial A = A \circ (\partial O (2V)^\top)`: the plugin's speed path (about
    2x faster than autograd's ``(A * A) @ V`` on one CPU thread), and the computation
    of every stored STOSA run. Not twice differentiable."""

    @staticmethod
    def forward(ctx, weights, value):
        squared = weights * weights
        ctx.save_for_backward(weights, squared, value)
        return squared @ value

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        weights, squared, value = ctx.saved_tensors
        grad_weights = grad_value = None
        if ctx.needs_input_grad[0]:
            doubled = (2.0 * value).to(grad.dtype)
            product = grad @ doubled.transpose(-1, -2)
            if product.dtype == weights.dtype:
                grad_weights = product.mul_(weights)
            else:
                grad_weights = product * weights
        if ctx.needs_input_grad[1]:
            grad_value = squared.to(grad.dtype).transpose(-1, -2) @ grad
        return grad_weights, grad_value


class FormsWassersteinAttention(stosa.WassersteinAttention):
    """The model file's attention sublayer with, for the paper's layer means, a mean
    stream of its own (eq. 7: the means aggregated with A); its parameters are built
    in the order of the releases before 0.3, so a seed draws the same weights."""

    def __init__(self, mean_stream, n_heads, hidden_size, *rates):
        nn.Module.__init__(self)
        hidden_dropout_prob, attn_dropout_prob, layer_norm_eps = rates
        self.n_heads = n_heads
        self.query_mean = nn.Linear(hidden_size, hidden_size)
        self.query_cov = nn.Linear(hidden_size, hidden_size)
        self.key_mean = nn.Linear(hidden_size, hidden_size)
        self.key_cov = nn.Linear(hidden_size, hidden_size)
        if mean_stream:
            self.value_mean = nn.Linear(hidden_size, hidden_size)
        self.value = nn.Linear(hidden_size, hidden_size)
        if mean_stream:
            self.dense_mean = nn.Linear(hidden_size, hidden_size)
        self.dense = nn.Linear(hidden_size, hidden_size)
        if mean_stream:
            self.LayerNorm_mean = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.attn_dropout = nn.Dropout(attn_dropout_prob)
        self.out_dropout = nn.Dropout(hidden_dropout_prob)


def feed_forward(ffn, x, pre_ln):
    r"""The model file's post-LN FFN, or the paper's pre-LN one (eq. 9):
    :math:`x + \mathrm{Dropout}(\mathrm{FFN}(\mathrm{LN}(x)))`."""
    if not pre_ln:
        return ffn(x)
    return x + ffn.dropout(ffn.dense_2(F.elu(ffn.dense_1(ffn.LayerNorm(x)))))


class FormsSTOSALayer(stosa.STOSALayer):
    r"""The model file's layer as the plugin computes it: :math:`A \circ A` by
    :class:`SquaredWeightsAggregate` (the same forward), and the forms the model file
    has not: the paper's means through attention and FFN (eq. 7-9), its pre-LN FFN, its
    linear value covariances; and AWRSR's refiner (``positions``) where the
    attention has one. Its parameters are the model file's, in its order."""

    def __init__(self, forms, n_heads, hidden_size, inner_size, *rates):
        nn.Module.__init__(self)
        hidden_dropout_prob, _, layer_norm_eps = rates
        self.paper_means = forms["layer_means"] == "paper"
        self.pre_ln = forms["ffn"] == "paper"
        self.official_values = forms["value_cov"] == "official"
        self.multi_head_attention = FormsWassersteinAttention(
            self.paper_means, n_heads, hidden_size, *rates
        )

        def ffn():
            return stosa.FeedForward(
                hidden_size, inner_size, hidden_dropout_prob, layer_norm_eps
            )

        if self.paper_means:
            self.feed_forward_mean = ffn()
        self.feed_forward = ffn()

    def forward(self, mean, cov, attention_mask, rows=None, positions=None):
        att = self.multi_head_attention
        q_mean, q_cov = mean, cov
        if rows is not None:
            q_mean, q_cov = stosa.at(mean, rows), stosa.at(cov, rows)
            attention_mask = stosa.at(attention_mask.squeeze(1), rows).unsqueeze(1)
        probs = att.attention_probs(q_mean, q_cov, mean, cov, attention_mask)
        if positions is not None:
            probs = att.refiner(probs, attention_mask, positions)
        probs = att.attn_dropout(probs)

        def aggregate(product, value, dense, layer_norm, query):
            hidden = dense(stosa.merge_heads(product(probs, value)))
            return layer_norm(query + att.out_dropout(hidden))

        if self.paper_means:
            mean_out = aggregate(
                torch.matmul,
                stosa.split_heads(att.value_mean(mean), att.n_heads),
                att.dense_mean,
                att.LayerNorm_mean,
                q_mean,
            )
        value = stosa.split_heads(att.value(cov), att.n_heads)
        if self.official_values:  # zfan20/STOSA modules.py, DistSelfAttention
            value = stosa.elu_plus_one(value)  # per head (the layout of stored runs)
        cov_out = aggregate(
            SquaredWeightsAggregate.apply, value, att.dense, att.LayerNorm, q_cov
        )
        if self.paper_means:
            mean = feed_forward(self.feed_forward_mean, mean_out, self.pre_ln)
        elif rows is not None:
            mean = q_mean
        return mean, stosa.elu_plus_one(
            feed_forward(self.feed_forward, cov_out, self.pre_ln)
        )


class STOSAForms:
    """The forms of ``stosa_preset`` and ``stosa_value_cov`` on a STOSA model file's
    class (STOSA, and AWRSR's STOSA backbone)."""

    def __init__(self, config, dataset, *args):
        self.forms = self.preset_forms(config)
        super().__init__(config, dataset, *args)
        if self.forms["input"] == "paper":  # one LayerNorm per stream
            del self.input_layer_norm
            eps = self.layer_norm_eps
            self.mean_layer_norm = nn.LayerNorm(self.hidden_size, eps=eps)
            self.cov_layer_norm = nn.LayerNorm(self.hidden_size, eps=eps)
        self._register_load_state_dict_pre_hook(_upgrade_state_dict, with_module=True)

    @staticmethod
    def preset_forms(config):
        """The forms of ``stosa_preset``, and the value covariances'
        (``stosa_value_cov``, which no preset sets)."""
        return {
            **PRESETS[config["stosa_preset"]],
            "value_cov": config["stosa_value_cov"],
        }

    def make_layer(self):
        return FormsSTOSALayer(
            self.forms,
            self.n_heads,
            self.hidden_size,
            self.inner_size,
            self.hidden_dropout_prob,
            self.attn_dropout_prob,
            self.layer_norm_eps,
        )

    def _init_weights(self, module):
        """The model file's, after the N(0, std) draw that releases before 0.3 made
        first (the random stream of the stored studies); or RecBole's SASRec init
        with zero padding rows (``init: recbole``)."""
        if self.forms["init"] == "official":
            if isinstance(module, (nn.Linear, nn.Embedding)):
                module.weight.data.normal_(mean=0.0, std=self.initializer_range)
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


class STOSA(AttnSequentialRecommender, STOSAForms, stosa.STOSA):
    __doc__ = stosa.STOSA.__doc__
    extra_loss_names = ("pvn",)  # the hinge of eq. 11, with negatives
    #: checkpoints written before ``stosa_value_cov`` existed (2026-12-01) trained the
    #: linear value covariances, the default until 2026-12-02
    checkpoint_defaults = {"stosa_value_cov": "paper"}
    yaml_header = """STOSA (Fan et al., WWW 2022). Defaults = the official README run on Amazon data
(docs/models.md, "STOSA") and the official code's model without its leak of held-out
items (stosa_preset: official); stosa_preset: paper is the model as the paper writes it."""
    options = {
        **SHARED_OPTIONS,
        "pvn_weight": Opt(0.005, Number(), "lambda of the positive-vs-negative hinge"),
        "stosa_preset": Opt(
            "official",
            OneOf(*PRESETS),
            "official: the official code's model (better on validation); paper: the "
            "model as the paper writes it (eq. 5-12)",
        ),
        "stosa_value_cov": Opt(
            "official",
            OneOf(*VALUE_COVS),
            "the value covariances aggregated with A*A: official, the reference code's "
            "ELU(W_V x) + 1; paper, the linear W_V x of eq. 7 (a tie on validation: "
            "experiments/stosa_value_cov_*)",
        ),
    }
    defaults = {
        "n_layers": 1,
        "n_heads": 4,
        "inner_size": Default(256, "paper: d; official code: 4d; the FFN uses ELU"),
        "hidden_dropout_prob": 0.3,
        "attn_dropout_prob": 0.0,
        "loss_type": Default("BPR", "BPR on W2 distances + pvn hinge (eq. 12)"),
        "position_alignment": "last",
        "MAX_ITEM_LIST_LENGTH": 100,
        "epochs": Default(
            1000,
            "a cap the paper's rule (patience 50 on MRR) reaches first: best epochs "
            "169-349 on Office, where the official code's 200 cut runs still improving "
            "(experiments/stosa_value_cov_Office)",
        ),
        "stopping_step": Default(
            50, "the official code's 100 picks the same epochs (experiments/budget_*)"
        ),
        "training_mode": "all_position",
        "valid_metric": Default("MRR@20", "the official code early-stops on MRR"),
    }
    recbole_loss_types = ("BPR", "CE")

    @property
    def needs_negatives(self):
        """The sampled losses and the pvn hinge (weight not 0) need negatives."""
        return super().needs_negatives or self.pvn_weight > 0

    def encode(self, item_seq, item_seq_len, rows=None):
        """The model file's; with no layer (``n_layers: 0``), the input Gaussians."""
        if self.trm_encoder.layer:
            return super().encode(item_seq, item_seq_len, rows)
        positions = self.position_ids(item_seq_len, item_seq.size(1))
        mean, cov = self.input_gaussians(item_seq, positions)
        if rows is None:
            return mean, cov
        return stosa.at(mean, rows), stosa.at(cov, rows)

    def item_scores(self, output, items):
        mean, cov = output
        item_mean, item_cov = self.item_gaussians(items)
        if item_mean.dim() > mean.dim():
            mean, cov = mean.unsqueeze(-2), cov.unsqueeze(-2)
        return -stosa.wasserstein2_squared(mean, cov, item_mean, item_cov)

    def pvn_loss(self, output, pos_items, neg_items):
        pos_dist, _, pos_neg_dist = triplet_distances(
            self, output, pos_items, neg_items
        )
        return pvn_hinge(pos_dist, pos_neg_dist)

    def position_terms(self, output, pos_items, neg_items):
        if neg_items is None:
            return ()
        return (self.pvn_weight * self.pvn_loss(output, pos_items, neg_items),)

    def position_losses(self, output, pos_items, neg_items=None, neg_log_q=None):
        """A sampled loss and the pvn hinge from one set of distances."""
        if neg_items is None or self.loss_type == "CE":
            return super().position_losses(output, pos_items, neg_items, neg_log_q)
        pos_dist, neg_dist, pos_neg_dist = triplet_distances(
            self, output, pos_items, neg_items
        )
        loss = self.sampled_position_loss(
            -pos_dist, -neg_dist, pos_items, neg_items, neg_log_q
        )
        return loss, self.pvn_weight * pvn_hinge(pos_dist, pos_neg_dist)
