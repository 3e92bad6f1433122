"""Our model defaults beside RecBole's: one log line where a run's differ
(docs/upstream.md)."""

import yaml


def _exportable(name):
    """Whether ``name`` is one of our models with a :mod:`recbole_attn.model` base."""
    from recbole_attn.sequential.models import MODELS

    model = MODELS.get(name)
    return model is not None and any(
        base.__module__.startswith("recbole_attn.model.") for base in model.__mro__
    )


def differences_line(config):
    """A log line of our yaml's keys that RecBole would set otherwise; or None."""
    from recbole_attn.sequential.models import get_model_class
    from recbole_attn.options.declared import model_yaml as declared_yaml

    name = config["model"]
    theirs = getattr(config, "internal_config_dict", None)
    if not _exportable(name) or not theirs:
        return None
    own = {}
    for cls in reversed(get_model_class(name).__mro__):
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
        + f" are recbole_attn's defaults for {name} (its yaml); RecBole's own Config "
        + "gives "
        + ", ".join(f"{k}={theirs[k]}" for k in differ)
        + " (its dataset and training settings, which a model yaml cannot set there): "
        "set them to compare with a run of RecBole's"
    )
