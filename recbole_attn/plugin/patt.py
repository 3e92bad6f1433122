"""PAtt as the plugin runs it: the RecBole file's model
(:class:`recbole_attn.model.patt.PAtt`) with the plugin's training and its options
declared once."""

from recbole_attn.model import patt
from recbole_attn.options.declared import Default, Integer, Number, OneOf, Opt
from recbole_attn.plugin.sasrecap import SASREC_OPTIONS
from recbole_attn.sequential.recommender import (
    AttnSequentialRecommender,
    DotProductScores,
)

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
