"""The models as the plugin runs them: each model file of :mod:`recbole_attn.model` with
the plugin's training mixed in, and its options declared once (from which its yaml, the
tables of docs/models.md and the run's checks are generated); the registry ``MODELS``.
"""

import torch
from recbole.utils import get_model

from recbole_attn.data.histories import training_histories
from recbole_attn.errors import UnknownModelError
from recbole_attn.forms.dpatt import DIVERSITY_FORMS, DPAttWithForms
from recbole_attn.forms.parec import PATTERNS, PARecWithForms
from recbole_attn.forms.rksa import ITEM_KERNELS, LOCATION_ACTIVATIONS, RKSAWithForms
from recbole_attn.model import awrsr, dpatt, fparec, parec, patt, rksa
from recbole_attn.options.declared import Default, Integer, Number, OneOf, Opt, Subset
from recbole_attn.sequential.sasrecap import SASREC_OPTIONS, SASRecAP
from recbole_attn.sequential.length_groups import AuxLoss
from recbole_attn.sequential.recommender import (
    AttnSequentialRecommender,
    DotProductScores,
)
from recbole_attn.sequential.stochastic import AWRSR, STOSA

PATT_HEADER = """PAtt (Liu et al., KDD 2024): probabilistic k-DPP attention, Sampler only, value = input.
PAtt^2: dpp_k: 2 (default); PAtt^3: --dpp_k=3 (exact marginal over all third items;
--dpp_triple_samples=4 for the paper's sampled variant). Paper settings: d 64, T 30,
dropout {0.3, 0.5, 0.7}, lr 1e-3, early stopping on NDCG@20 (patience 10). The mechanism
follows the official code but its two leaks (docs/patt.md)."""


class PAtt(DotProductScores, AttnSequentialRecommender, patt.PAtt):
    __doc__ = patt.PAtt.__doc__
    yaml_header = PATT_HEADER
    options = {
        **SASREC_OPTIONS,
        "dpp_k": Opt(
            2,
            OneOf(2, 3, hint="2: PAtt^2, pairs; 3: PAtt^3, triples"),
            "subset size: 2 (dual) or 3 (triple dependency)",
        ),
        "dpp_lambda": Opt(
            0.125,
            Number("positive"),
            "lambda of D = exp(-lambda P): 1/sqrt(d_h), the official softmax scale",
        ),
        "dpp_triple_samples": Opt(
            0,
            Integer(0),
            "k=3 only: 0 = exact sum over all third items; s > 0 = s sampled (training)",
        ),
    }
    defaults = {
        "n_layers": 1,
        "n_heads": 1,
        "inner_size": Default(256, "official code: 4d"),
        "hidden_dropout_prob": Default(
            0.4,
            "the official README's: higher on validation than the paper's 0.5 on "
            "Beauty and ml-100k, level on Office (docs/patt.md)",
        ),
        "attn_dropout_prob": 0.0,
        "hidden_act": Default("gelu", "official code"),
        "loss_type": Default("BCE", "one negative per position (paper, official)"),
        "MAX_ITEM_LIST_LENGTH": Default(
            30, "T, the paper's; long histories want more (ml-100k: 50, docs/patt.md)"
        ),
        "training_mode": "all_position",
        "valid_metric": Default("NDCG@20", "the paper's early stopping"),
        "position_alignment": Default("last", "official left padding"),
    }
    option_rules = (
        lambda c: (
            f"dpp_triple_samples ({c['dpp_triple_samples']}) samples third items, which "
            f"only dpp_k: 3 has; set dpp_triple_samples: 0 with dpp_k: {c['dpp_k']}"
            if c["dpp_triple_samples"] and c["dpp_k"] != 3
            else None
        ),
        lambda c: (
            f"a {c['dpp_k']}-DPP needs a ground set of at least {c['dpp_k']} items but "
            f"MAX_ITEM_LIST_LENGTH is {c['MAX_ITEM_LIST_LENGTH']}; raise "
            "MAX_ITEM_LIST_LENGTH or lower dpp_k"
            if c["MAX_ITEM_LIST_LENGTH"] < c["dpp_k"]
            else None
        ),
    )
    recbole_loss_types = ("BCE", "CE")


class DPAtt(PAtt, DPAttWithForms):
    __doc__ = dpatt.DPAtt.__doc__
    needs_item_categories = True
    yaml_header = """DPAtt (Liu et al., KDD 2024): PAtt with the diversity-aware kernel, subset weight
det(L_Y) / det(C_Y) (or the paper's product kernel: dpp_diversity_form). C is learned
in a pre-stage with eq. 10 from training histories and item categories (category_field),
then frozen. DPAtt^3: --dpp_k=3. Every other key comes from PAtt.yaml (loaded first)."""
    options = {
        "dpp_cat_jitter": Opt(
            0.1, Number("probability"), "beta of C = (1-beta) V V^T + beta I"
        ),
        "dpp_cat_rank": Opt(32, Integer(1), "rank r of C"),
        "dpp_cat_set_size": Opt(
            4, Integer(2), "size of the (diverse, less diverse) training sets"
        ),
        "dpp_cat_draws": Opt(
            8, Integer(1), "random subsets per training history and step"
        ),
        "dpp_cat_steps": Opt(200, Integer(0), "Adam steps of the pre-stage"),
        "dpp_cat_lr": Opt(0.05, Number("positive"), "learning rate of the pre-stage"),
        "dpp_diversity_form": Opt(
            "ratio",
            OneOf(*DIVERSITY_FORMS),
            "ratio: subset weight det(L_Y)/det(C_Y); product: k-DPP of the paper's "
            "T = L_{<=t} C_{<=t}^-1 per prefix, minors clamped at 0, O(B T^4) time",
        ),
    }
    defaults = {
        "category_field": Default(
            "categories", "token_seq item feature with the categories (ml-100k: class)"
        )
    }
    option_rules = (
        lambda c: (
            "dpp_diversity_form: product is exact only: set dpp_triple_samples: 0 with "
            "it, or use dpp_diversity_form: ratio"
            if c["dpp_diversity_form"] == "product" and c["dpp_triple_samples"]
            else None
        ),
    )

    def calculate_loss(self, interaction):
        """The plugin's loss, after the pre-stage that learns C (once)."""
        self.fit_category_kernel()
        return super().calculate_loss(interaction)


class PARec(DotProductScores, AttnSequentialRecommender, PARecWithForms):
    __doc__ = parec.PARec.__doc__
    yaml_header = """PARec ("Positional Attention for Sequential Recommendation"): pre-LN blocks whose
attention is a learned matrix R_l over (query, key) positions, no query/key projection.
Paper settings: 2 blocks, full cross-entropy over all items at every position, T in
{50, 100, 200} for the Amazon data (official scripts: d 50, 1 head, dropout 0.5)."""
    options = {
        **SASREC_OPTIONS,
        "positional_pattern": Opt(
            "learned",
            OneOf(*PATTERNS),
            "learned R; average, linear, exponential: the fixed patterns of the "
            "paper's ablation (Table 4)",
        ),
        "pattern_decay": Opt(
            0.5,
            Number("positive"),
            "gamma of the exponential pattern, w = gamma^(t - s)",
        ),
    }
    defaults = {
        "n_heads": 1,
        "inner_size": Default(64, "official code: d"),
        "hidden_act": Default("relu", "eq. 8: ReLU"),
        "layer_norm_eps": 1e-8,
        "loss_type": Default("CE", "eq. 11: cross-entropy over all items"),
        "MAX_ITEM_LIST_LENGTH": 50,
        "position_alignment": Default(
            "last", "R relative to the most recent item (official: right-aligned)"
        ),
        "training_mode": "all_position",
        "valid_metric": "NDCG@10",
    }
    recbole_loss_types = ("BPR", "CE")


class FPARec(PARec, fparec.FPARec):
    __doc__ = fparec.FPARec.__doc__
    yaml_header = """FPARec: PARec with R_l = R1 R2^T, R1, R2 of size n x k per head (PARec.yaml is loaded
first). Paper: k >= 20 is robust (Table 5)."""
    options = {"factor_k": Opt(20, Integer(1), "k, the rank of R1 R2^T")}
    option_rules = (
        lambda c: (
            f"factor_k factorizes the learned R; positional_pattern "
            f"{c['positional_pattern']!r} is fixed: use PARec for fixed patterns"
            if c["positional_pattern"] != "learned"
            else None
        ),
    )


class RKSA(DotProductScores, AttnSequentialRecommender, RKSAWithForms):
    __doc__ = rksa.RKSA.__doc__
    encode_reads_user = True
    yaml_header = """RKSA (Ji et al., AAAI 2020): SASRec with skew-normal latent attention logits whose
correlation is a user-weighted mix of co-occurrence, item and user kernels. Paper
settings: 2 blocks, 1 head, d 64, dropout 0.5, batch 128, lr 1e-3, T 50, lambda_r 1e-3,
BCE with one negative per position; evaluation on 100 sampled negatives (uni100)."""
    options = {
        **SASREC_OPTIONS,
        "kernels": Opt(
            ["count", "item", "user"],
            Subset(*rksa.KERNELS),
            "the kernels mixed into psi (Table 3 ablation: any non-empty subset)",
        ),
        "item_kernel": Opt(
            "linear", OneOf(*ITEM_KERNELS), "on unit-norm representations"
        ),
        "location_activation": Opt("none", OneOf(*LOCATION_ACTIVATIONS), "f of eq. 7"),
        "rksa_jitter": Opt(
            0.001,
            Number("positive"),
            "epsilon of the Cholesky of (psi + eps I) / (1 + eps)",
        ),
        "rksa_rank_weight": Opt(
            0.001, Number(), "lambda_r of the listwise co-occurrence loss"
        ),
    }
    defaults = {
        "n_heads": 1,
        "inner_size": Default(64, "SASRec paper: d"),
        "hidden_act": Default("relu", "point-wise FFN with ReLU (paper)"),
        "layer_norm_eps": 1e-8,
        "loss_type": Default("BCE", "eq. 12: one sampled negative per position"),
        "train_batch_size": 128,
        "MAX_ITEM_LIST_LENGTH": 50,
        "training_mode": "all_position",
        "valid_metric": "NDCG@10",
    }
    recbole_loss_types = ("BCE", "CE")

    def training_interactions(self, dataset):
        """The users' complete training histories (also in ``all_position``)."""
        histories = training_histories(dataset)
        users = torch.repeat_interleave(histories.users, histories.lengths)
        return users.numpy(), histories.items.numpy()

    def aux_terms(self):
        if not self.rksa_rank_weight or not self.training:
            return ()
        weight = self.rksa_rank_weight / self.n_layers
        return tuple(
            AuxLoss(weight * value, count)
            for value, count in (
                layer.multi_head_attention.score.rank_loss
                for layer in self.trm_encoder.layer
            )
        )


def awrsr_combinations():
    """Every valid ``(backbone, refinement)`` of AWRSR (``stoc`` needs STOSA)."""
    return [
        (backbone, refinement)
        for backbone in awrsr.BACKBONES
        for refinement in awrsr.REFINERS
        if refinement != "stoc" or backbone == "STOSA"
    ]


#: model name -> class, the models that ``recbole-attn --model=NAME`` resolves first
MODELS = {
    "STOSA": STOSA,
    "SASRecAP": SASRecAP,
    "PAtt": PAtt,
    "DPAtt": DPAtt,
    "PARec": PARec,
    "FPARec": FPARec,
    "AWRSR": AWRSR,
    "RKSA": RKSA,
}


def get_model_class(model):
    """Resolve ``model`` (a name or a class) to a model class: ours first, then RecBole's."""
    if isinstance(model, type):
        return model
    if model in MODELS:
        return MODELS[model]
    try:
        return get_model(model)
    # RecBole raises ValueError for an unknown name, after trying to import its optional
    # exlib models (ImportError without lightgbm/xgboost)
    except (ValueError, AttributeError, ImportError):
        from recbole_attn.options.names import unknown_model_message

        raise UnknownModelError(unknown_model_message(model)) from None
