"""One log line where our model defaults differ from RecBole's (docs/upstream.md)."""

import os

import yaml

#: the training keys of our overall.yaml that change what a model learns (RecBole's
#: train_batch_size is 2048, ours 256: one batch an epoch on ml-100k)
TRAINING_KEYS = ("train_batch_size", "learning_rate", "epochs", "stopping_step")


def differences_line(config):
    """A log line of our yaml's keys that RecBole would set otherwise; or None."""
    from recbole_attn.plugin import MODELS
    from recbole_attn.options.declared import model_yaml as declared_yaml

    name = config["model"]
    theirs = getattr(config, "internal_config_dict", None)
    mro = MODELS[name].__mro__ if name in MODELS else ()
    exported = any(c.__module__.startswith("recbole_attn.model.") for c in mro)
    if not (exported and theirs):  # ours, with a recbole_attn.model base
        return None
    from recbole_attn.engine.config import properties_dir

    with open(os.path.join(properties_dir(), "overall.yaml"), encoding="utf-8") as f:
        overall = yaml.safe_load(f) or {}
    own = {k: overall[k] for k in TRAINING_KEYS if k in overall}
    for cls in reversed(mro):
        if "yaml_header" in vars(cls):  # the model's yaml files, base classes first
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
        + f" are recbole_attn's defaults for {name} (its yaml and overall.yaml); RecBole's own Config "
        + "gives "
        + ", ".join(f"{k}={theirs[k]}" for k in differ)
        + " (its dataset and training settings, which a model yaml cannot set there): "
        "set them to compare with a run of RecBole's"
    )
