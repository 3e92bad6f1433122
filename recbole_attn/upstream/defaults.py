"""
recbole_attn.upstream.defaults
##############################

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


def differences_line(config):
    """One line for a run's log when the model's yaml here gives keys that RecBole's own
    ``Config`` takes from its dataset or training settings (T, the budget, the
    validation metric) another value than RecBole would and the user did not set them;
    None otherwise (a model without such keys, or the user set them all)."""
    from recbole_attn.upstream.models import MODELS
    from recbole_attn.upstream.yaml_files import reproduction_settings

    name = config["model"]
    if name not in MODELS:
        return None
    given = getattr(config, "given_keys", set())
    ours = {
        k: config[k]
        for k in reproduction_settings(name)
        if k not in given and k in config
    }
    theirs = recbole_values(ours, config["dataset"])
    differ = [k for k in ours if k in theirs and theirs[k] != ours[k]]
    if not differ:
        return None
    return (
        f"{name}: "
        + ", ".join(f"{k}={ours[k]}" for k in differ)
        + f" are recbole_attn's defaults for {name} (its yaml); RecBole's own Config "
        + "gives "
        + ", ".join(f"{k}={theirs[k]}" for k in differ)
        + " (its dataset and training settings, which a model yaml cannot set there): "
        "set them to compare with a run of RecBole's"
    )
