"""The models as the plugin runs them, one file each beside its RecBole file in
:mod:`recbole_attn.model`: the model file's class with the plugin's training mixed in,
its options declared once (from which its yaml, the tables of docs/models.md and the
run's checks are generated) and its research forms; the registry ``MODELS``."""

from recbole.utils import get_model

from recbole_attn.errors import UnknownModelError
from recbole_attn.model import awrsr as awrsr_file
from recbole_attn.plugin.awrsr import AWRSR
from recbole_attn.plugin.dpatt import DPAtt
from recbole_attn.plugin.fparec import FPARec
from recbole_attn.plugin.parec import PARec
from recbole_attn.plugin.patt import PAtt
from recbole_attn.plugin.rksa import RKSA
from recbole_attn.plugin.sasrecap import SASRecAP
from recbole_attn.plugin.stosa import STOSA


def awrsr_combinations():
    """Every valid ``(backbone, refinement)`` of AWRSR (``stoc`` needs STOSA)."""
    return [
        (backbone, refinement)
        for backbone in awrsr_file.BACKBONES
        for refinement in awrsr_file.REFINERS
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
