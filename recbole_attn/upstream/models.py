"""What the RecBole export knows of each model: its module here, its paper, the cases of
RecBole's ``test_model_auto.py``."""

from dataclasses import dataclass, field

SEQUENTIAL = "recbole.model.sequential_recommender"


@dataclass
class Model:
    module: str
    year: str
    pub: str
    paper: str
    authors: str
    paper_link: str = ""
    ref_code: str = ""
    #: test name suffix -> config dict (besides "model"); "" is the default case
    cases: dict = field(default_factory=lambda: {"": {}})
    #: test name suffix -> sizes that only make RecBole's case cheap (not the variant)
    sizes: dict = field(default_factory=dict)
    #: what else the pull request must say
    notes: str = ""
    #: models whose yaml keys the model also reads where its own lack them (AWRSR)
    also_reads: tuple = ()
    #: the docs page's running example: its ``config_dict`` on RecBole's ml-100k
    example: dict = field(default_factory=dict)
    #: the docs page's ``hyper.test``: key -> choices, besides those of every model
    hyper: dict = field(default_factory=dict)


#: RecBole's negative sampler, one uniform negative per sample
RECBOLE_NEGATIVES = {"distribution": "uniform", "sample_num": 1}
#: RecBole's test data has its genres in the token_seq item field ``class``
TEST_CATEGORIES = {"category_field": "class"}
#: RecBole's ml-100k has its genres in the token_seq item field ``class`` too, which
#: its yaml does not load (``load_col`` names only the .inter file's columns)
ML100K_CATEGORIES = {
    "category_field": "class",
    "load_col": {
        "inter": ["user_id", "item_id", "rating", "timestamp"],
        "item": ["item_id", "class"],
    },
}
#: a loss the model's check accepts, other than its yaml's: RecBole's Config refuses a
#: sequential model under CE with negatives, and the sampled losses need RecBole's
CE = {"loss_type": "CE", "train_neg_sample_args": None}
BPR = {"loss_type": "BPR", "train_neg_sample_args": RECBOLE_NEGATIVES}
BCE = {"loss_type": "BCE", "train_neg_sample_args": RECBOLE_NEGATIVES}
#: the layer variant of a model whose yaml has one block, and the other alignment
TWO_LAYERS = {"n_layers": 2}
FIRST = {"position_alignment": "first"}
LAST = {"position_alignment": "last"}

PATT_PAPER = {
    "year": "2024",
    "pub": "KDD'24",
    "paper": "Probabilistic Attention for Sequential Recommendation",
    "authors": "Yuli Liu, Christian Walder, Lexing Xie and Yiqun Liu",
    "paper_link": "https://doi.org/10.1145/3637528.3671733",
    "ref_code": "https://github.com/l-lyl/PAtt",
}
PAREC_PAPER = {
    # a preprint (its v3 lists Haibo He among the authors)
    "year": "2024",
    "pub": "arXiv'24",
    "paper": "Learning Positional Attention for Sequential Recommendation",
    "authors": "Fan Luo, Haibo He, Juan Zhang and Shenghui Xu",
    "paper_link": "https://arxiv.org/abs/2407.02793",
    "ref_code": "https://github.com/NetEase-Media/FPARec",
}

MODELS = {
    "STOSA": Model(
        "recbole_attn.model.stosa",
        "2022",
        "WWW'22",
        "Sequential Recommendation via Stochastic Self-Attention",
        "Ziwei Fan, Zhiwei Liu, Yu Wang, Alice Wang, Zahra Nazari, Lei Zheng, Hao Peng "
        "and Philip S. Yu",
        "https://doi.org/10.1145/3485447.3512077",
        "https://github.com/zfan20/STOSA",
        # a case for each loss, layer count and alignment the file reads
        cases={"": {}, "ce": CE, "two_layers": TWO_LAYERS, "first": FIRST},
        hyper={"pvn_weight": [0.0, 0.005, 0.05]},
    ),
    "PAtt": Model(
        "recbole_attn.model.patt",
        **PATT_PAPER,
        cases={
            "": {},
            "k3": {"dpp_k": 3},
            "k3_sampled": {"dpp_k": 3, "dpp_triple_samples": 2},
            "ce": CE,
            "two_layers": TWO_LAYERS,
            "first": FIRST,
        },
    ),
    "DPAtt": Model(
        "recbole_attn.model.dpatt",
        **PATT_PAPER,
        cases={
            "": TEST_CATEGORIES,
            "ce": {**TEST_CATEGORIES, **CE},
            "two_layers": {**TEST_CATEGORIES, **TWO_LAYERS},
            "first": {**TEST_CATEGORIES, **FIRST},
        },
        example=ML100K_CATEGORIES,
    ),
    "AWRSR": Model(
        "recbole_attn.model.awrsr",
        "2024",
        "RecSys'24",
        "Pay Attention to Attention for Sequential Recommendation",
        "Yuli Liu, Min Liu and Xiaojing Liu",
        "https://doi.org/10.1145/3640457.3688164",
        # no case for refinement "value": RecBole's Config eval()s it (``notes``)
        cases={
            "": {},
            "add": {"refinement": "add"},
            "stosa_stoc": {
                "backbone": "STOSA",
                "refinement": "stoc",
                "loss_type": "BPR",
                "train_neg_sample_args": RECBOLE_NEGATIVES,
            },
            "bpr": BPR,
            "last": LAST,
        },
        # the refiners are L^3 a head: T 20 runs every part at a fraction of the cost
        sizes=dict.fromkeys(
            ("", "add", "stosa_stoc", "bpr", "last"), {"MAX_ITEM_LIST_LENGTH": 20}
        ),
        also_reads=("STOSA",),
        hyper={"refinement": ["simp", "add"]},
        notes="`refinement: value` must be set in a yaml file (`config_file_list`): "
        "`Config._convert_config_dict` calls `eval()` on every string of a config dict "
        "or command line inside a function with a local variable named `value`, so "
        "`--refinement=value` reaches the model as the previous option's value "
        "(`ast.literal_eval` there would fix it for every model).",
    ),
    "PARec": Model(
        "recbole_attn.model.parec",
        **PAREC_PAPER,
        cases={"": {}, "bpr": BPR, "first": FIRST},
    ),
    "FPARec": Model(
        "recbole_attn.model.fparec",
        **PAREC_PAPER,
        cases={"": {}, "bpr": BPR, "first": FIRST},
        hyper={"factor_k": [10, 20, 40]},
    ),
    "RKSA": Model(
        "recbole_attn.model.rksa",
        "2020",
        "AAAI'20",
        "Sequential Recommendation with Relation-Aware Kernelized Self-Attention",
        "Mingi Ji, Weonyoung Joo, Kyungwoo Song, Yoon-Yeong Kim and Il-Chul Moon",
        "https://arxiv.org/abs/1911.06478",
        # the paper's batch 128 makes 44 steps at T 50 (SASRec's case: 3 of 2048)
        cases={"": {}, "ce": CE, "last": LAST},
        sizes=dict.fromkeys(
            ("", "ce", "last"), {"MAX_ITEM_LIST_LENGTH": 20, "train_batch_size": 2048}
        ),
        hyper={"rksa_rank_weight": [0.0001, 0.001, 0.01]},
    ),
}
