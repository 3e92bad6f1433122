"""
recbole_attn.engine.defaults
############################

The plugin's defaults beside RecBole's for the same model name. A model's yaml here sets
what the paper (or its reproduction) trains with, the sequence length T among them
(STOSA 100, PAtt and DPAtt 30), and the plugin reads it after RecBole's dataset settings.
Inside RecBole, a model yaml cannot set T (``Config`` reads
``properties/dataset/sample.yaml`` after it) and no model yaml sets a training key, so the
exported model, run through RecBole's own API, trains with RecBole's T = 50 and budget
unless the user sets them (its docs page says how). The plugin keeps its defaults (its
documented results and studies are made with them) and says so in one line of each
run's log, naming RecBole's values: :func:`differences_line`.
"""

import os

import yaml


def recbole_values(keys, dataset):
    """``{key: value}`` that RecBole's own ``Config`` gives a sequential model for
    ``keys`` without any model yaml or user setting: its overall.yaml, sample.yaml, its
    yaml of ``dataset`` (if it has one) and the quick-start settings of sequential
    models, in its order."""
    import recbole

    root = os.path.join(os.path.dirname(recbole.__file__), "properties")
    values = {}
    for path in (
        os.path.join(root, "overall.yaml"),
        os.path.join(root, "dataset", "sample.yaml"),
        os.path.join(root, "dataset", f"{dataset}.yaml"),
        os.path.join(root, "quick_start_config", "sequential.yaml"),
    ):
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                values.update(yaml.safe_load(f) or {})
    return {k: values[k] for k in keys if k in values}


def _exportable(name):
    """Whether ``name`` is one of our models whose file RecBole could merge (a class of
    :mod:`recbole_attn.model` among its bases): SASRecAP, a research baseline, is not.
    """
    from recbole_attn.sequential.models import MODELS

    model = MODELS.get(name)
    return model is not None and any(
        base.__module__.startswith("recbole_attn.model.") for base in model.__mro__
    )


def differences_line(config):
    """One line for a run's log when the model's yaml here gives keys that RecBole's own
    ``Config`` takes from its dataset or training settings (T, the budget, the
    validation metric) another value than RecBole would and the user did not set them;
    None otherwise (a model without such keys, or the user set them all). RecBole's
    values are those its ``Config`` read from its own files for this run
    (``internal_config_dict``: the plugin passes its yaml files as the user's), so no
    file is read again."""
    from recbole_attn.sequential.models import get_model_class
    from recbole_attn.options.declared import model_yaml as declared_yaml

    name = config["model"]
    theirs = getattr(config, "internal_config_dict", None)
    if not _exportable(name) or not theirs:
        return None
    own = {}
    for cls in reversed(get_model_class(name).__mro__):
        if "yaml_header" in vars(
            cls
        ):  # the model's yaml files here, base classes first
            own.update(yaml.safe_load(declared_yaml(cls)) or {})
    given = getattr(config, "given_keys", set())
    differ = [
        k
        for k in own
        if k in theirs
        and k not in given
        and k != "train_neg_sample_args"  # the plugin draws its own negatives
        and config[k] != theirs[k]
    ]
    if not differ:
        return None
    return (
        f"{name}: "
        + ", ".join(f"{k}={config[k]}" for k in differ)
        + f" are recbole_attn's defaults for {name} (its yaml); RecBole's own Config "
        + "gives "
        + ", ".join(f"{k}={theirs[k]}" for k in differ)
        + " (its dataset and training settings, which a model yaml cannot set there): "
        "set them to compare with a run of RecBole's"
    )
