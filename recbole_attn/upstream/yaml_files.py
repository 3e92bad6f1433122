"""The ``recbole/properties/model/<Name>.yaml`` of the export: the keys the model's
files read, with the plugin's defaults, but those a model yaml cannot set in RecBole
(``Config`` reads ``sample.yaml``, the dataset's yaml and the quick-start files after
it, and no RecBole model yaml sets a training key of ``overall.yaml``): the docs page
shows those as the model's reproduction settings."""

import os
import re

import yaml

from recbole_attn.upstream.models import MODELS
from recbole_attn.upstream.sources import model_file, model_sources, read_text


def _read_keys(sources):
    """The keys the sources read (``config["..."]``), in the order read."""
    return list(dict.fromkeys(re.findall(r"config\[\"(\w+)\"\]", "\n".join(sources))))


def _yaml_keys(path, skip=()):
    """The keys of RecBole's yaml files at ``properties/<path>``, but ``skip`` and the
    models' (unless ``path`` is ``model``)."""
    import recbole

    top = os.path.join(os.path.dirname(recbole.__file__), "properties", path)
    walk = os.walk(top) if os.path.isdir(top) else [("", [], [top])]
    keys = set()
    for folder, dirs, names in walk:
        dirs[:] = [d for d in dirs if d != "model"]
        for name in names:
            if name.endswith(".yaml") and name not in skip:
                keys |= set(yaml.safe_load(read_text(os.path.join(folder, name))) or {})
    return keys


def recbole_config_keys():
    """Every key of RecBole's own yaml files (not the models')."""
    return _yaml_keys("")


def keys_a_model_yaml_cannot_set():
    """The keys RecBole's ``Config`` reads after a model's yaml, and those of
    ``overall.yaml`` that no RecBole model yaml sets (training and evaluation)."""
    later = _yaml_keys("", skip=("overall.yaml",))
    return later | (_yaml_keys("overall.yaml") - _yaml_keys("model"))


def _declared(name):
    from recbole_attn.options.declared import model_yaml as declared_yaml
    from recbole_attn.plugin import get_model_class

    cls = name if isinstance(name, type) else get_model_class(name)
    return yaml.safe_load(declared_yaml(cls)) or {}


def plugin_defaults(name):
    """The plugin's defaults for model ``name`` in the order of its yaml files (its base
    classes' first), then the plugin's overall.yaml, then the models it also reads."""
    from recbole_attn.engine.config import model_yaml_files, properties_dir
    from recbole_attn.plugin import get_model_class

    values = {}
    for path in model_yaml_files(get_model_class(name), options=_declared(name)):
        values.update(_declared(os.path.splitext(os.path.basename(path))[0]))
    with open(os.path.join(properties_dir(), "overall.yaml"), encoding="utf-8") as f:
        overall = yaml.safe_load(f) or {}
    for other in [overall, *map(_declared, MODELS[name].also_reads)]:
        for key, value in other.items():
            values.setdefault(key, value)
    return values


#: the comments of the keys of SASRec's blocks
COMMON_COMMENTS = {
    "n_layers": "(int) The number of attention blocks.",
    "n_heads": "(int) The number of attention heads.",
    "hidden_size": "(int) The size of the item embeddings and of the hidden states.",
    "inner_size": "(int) The inner size of the feed-forward sublayer.",
    "hidden_dropout_prob": "(float) The dropout rate of the embeddings and sublayers.",
    "attn_dropout_prob": "(float) The dropout rate of the attention weights.",
    "hidden_act": "(str) The activation function of the feed-forward sublayer.",
    "layer_norm_eps": "(float) The epsilon of layer normalization.",
    "initializer_range": "(float) The standard deviation of the normal initialization.",
    "category_field": "(str) The token_seq item feature that holds the item's "
    "categories.",
    "position_alignment": "(str) Position ids counted from the first item ('first') or "
    "back from the most recent item ('last').",
}


def accepted_losses(name, files):
    """The ``loss_type`` values the model's check names (as RecBole's SASRec's)."""
    for text in model_sources(files, name):
        match = re.search(r"loss_type'? in (\[[^\]]*\])", text)
        if match:
            return yaml.safe_load(match.group(1))
    raise AssertionError(f"{model_file(name)} does not check loss_type")


def _meaning(name, key):
    """A declared key's meaning for a yaml comment, without the plugin's references."""
    from recbole_attn.options.declared import declared_options
    from recbole_attn.plugin import get_model_class

    for other in (name, *MODELS[name].also_reads):
        opt = declared_options(get_model_class(other)).get(key)
        if opt is not None:
            text = re.sub(r"\s*\([^()]*(docs/|experiments/)[^()]*\)", "", opt.meaning)
            return f"({opt.kind}) {text.rstrip('.')}."
    return ""


def _scalar(value):  # as RecBole's yaml files write them (strings quoted)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(_scalar, value)) + "]"
    if isinstance(value, float):
        return yaml.safe_dump(value).splitlines()[0]
    return (
        "~" if value is None else repr(value) if isinstance(value, str) else str(value)
    )


def exported_keys(name, files):
    """The keys of ``name``'s files that a model yaml can set, with their defaults."""
    cannot = keys_a_model_yaml_cannot_set()
    read = _read_keys(model_sources(files, name))
    defaults = plugin_defaults(name).items()
    out = {k: v for k, v in defaults if k in read and k not in cannot}
    if out.get("loss_type") == "CE":
        # RecBole's Config refuses a sequential model under CE with negatives
        out["train_neg_sample_args"] = None
    return out


def reproduction_settings(name):
    """The plugin's defaults for ``name`` that a model yaml cannot set in RecBole (T,
    the training budget, the validation metric): the docs page's user config."""
    from recbole_attn.plugin import get_model_class

    cannot = keys_a_model_yaml_cannot_set() - {"train_neg_sample_args", "training_mode"}
    own = {}
    for cls in reversed(get_model_class(name).__mro__):
        if "yaml_header" in vars(cls):
            own.update(_declared(cls))
    out = {k: v for k, v in own.items() if k in cannot}
    if "valid_metric" in out:  # computable only with its K in topk, its name in metrics
        out = _with_valid_metric_computed(out, plugin_defaults(name))
    return out


def recbole_overall_defaults():
    """RecBole's own ``overall.yaml`` (the installed RecBole's)."""
    import recbole

    path = os.path.join(os.path.dirname(recbole.__file__), "properties", "overall.yaml")
    return yaml.safe_load(read_text(path)) or {}


def _with_valid_metric_computed(settings, plugin):
    """``settings`` with the ``topk`` (and ``metrics``) RecBole needs to compute their
    ``valid_metric``, right after it: RecBole's Trainer reads ``valid_metric`` from the
    validation results, which hold only ``metrics`` at every K of ``topk``. Where
    RecBole's defaults lack them, the plugin's (``plugin``), which the model was
    reproduced with."""
    metric, _, k = str(settings["valid_metric"]).partition("@")
    recbole_own = recbole_overall_defaults()
    extra = {}
    topk = recbole_own["topk"]
    if k and int(k) not in ([topk] if isinstance(topk, int) else topk):
        extra["topk"] = plugin["topk"]
    metrics = [m.lower() for m in recbole_own["metrics"]]
    if metric.lower() not in metrics:
        extra["metrics"] = plugin["metrics"]
    topk = extra.get("topk", topk)
    names = [m.lower() for m in extra.get("metrics", recbole_own["metrics"])]
    # the plugin's defaults compute it: its valid_metric is checked before a run
    assert int(k or topk[0]) in topk and metric.lower() in names, settings
    out = {}
    for key, value in settings.items():
        out[key] = value
        if key == "valid_metric":
            out.update(extra)
    return out


def model_yaml(name, files):
    """The text of the exported ``recbole/properties/model/<name>.yaml``."""
    values = exported_keys(name, files)
    comments = {
        **COMMON_COMMENTS,
        "train_neg_sample_args": "(dict) No negatives under CE (RecBole requires None "
        "there); BPR needs {'distribution': 'uniform', 'sample_num': 1}.",
        "loss_type": "(str) The type of loss function. Range in "
        f"{accepted_losses(name, files)}.",
    }
    lines = []
    for key, value in values.items():
        comment = comments.get(key) or _meaning(name, key)
        text = f"{key}: {_scalar(value)}"
        lines.append((text + " ").ljust(32) + f"# {comment}" if comment else text)
    text = "\n".join(lines) + "\n"
    assert yaml.safe_load(text) == values, name  # a broken yaml is our bug
    return text
