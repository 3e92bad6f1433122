"""recbole_attn models. Every model is a RecBole ``SequentialRecommender``."""

from recbole_attn.model.abstract_recommender import AttnSequentialRecommender
from recbole_attn.model.awrsr import AWRSR
from recbole_attn.model.parec import FPARec, PARec
from recbole_attn.model.patt import DPAtt, PAtt
from recbole_attn.model.rksa import RKSA
from recbole_attn.model.sasrec_ap import SASRecAP
from recbole_attn.model.stosa import STOSA

#: model name -> class, the models that ``run_recbole_attn.py --model=NAME`` resolves first
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

__all__ = ["AttnSequentialRecommender", "MODELS", *MODELS]
