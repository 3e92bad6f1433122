"""
recbole_attn.upstream.yaml_files
################################

The ``recbole/properties/model/<Name>.yaml`` of the RecBole export. RecBole's ``Config``
reads ``overall.yaml``, then the model's yaml, then ``properties/dataset/sample.yaml``,
the dataset's yaml and the quick-start settings of sequential models, each replacing
what came before: a model yaml can set a key only where none of the later files sets it
(``MAX_ITEM_LIST_LENGTH`` is ``sample.yaml``'s 50 whatever a model yaml says), and no
RecBole model yaml sets a training key of ``overall.yaml``. So the exported yaml holds the
keys the exported model file (and the files it imports) reads that no later file sets
and that ``overall.yaml`` lacks, with the plugin's defaults, each with a comment of its
own, and ``train_neg_sample_args: ~`` where the loss is CE (RecBole's ``Config`` refuses
a sequential model under CE with negatives); the keys that a model yaml cannot set (T, the training budget, the validation
metric) are the model's reproduction settings (:func:`reproduction_settings`), which the
docs page shows as a user's config.
"""

import os
import re

import yaml

from recbole_attn.upstream.models import MODELS
from recbole_attn.upstream.sources import model_file, model_sources


def _read_keys(sources):
    """The config keys the sources read (``config["..."]``), in the order they are read."""
    keys = []
    for key in re.findall(r"config\[\"(\w+)\"\]", "\n".join(sources)):
        if key not in keys:
            keys.append(key)
    return keys


def _recbole_properties():
    import recbole

    return os.path.join(os.path.dirname(recbole.__file__), "properties")


def _keys_of(path):
    with open(path, encoding="utf-8") as f:
        return set(yaml.safe_load(f) or {})


def recbole_config_keys():
    """Every key of RecBole's own yaml files (overall, dataset and quick-start settings,
    not the models'): those stay RecBole's and the user's."""
    keys = set()
    for folder, dirs, names in os.walk(_recbole_properties()):
        dirs[:] = [d for d in dirs if d != "model"]
        for name in names:
            if name.endswith(".yaml"):
                keys |= _keys_of(os.path.join(folder, name))
    return keys


def recbole_model_yaml_keys():
    """Every key some model yaml of RecBole sets."""
    keys = set()
    folder = os.path.join(_recbole_properties(), "model")
    for name in os.listdir(folder):
        if name.endswith(".yaml"):
            keys |= _keys_of(os.path.join(folder, name))
    return keys


def keys_a_model_yaml_cannot_set():
    """The keys RecBole's ``Config`` reads after a model's yaml (the dataset settings,
    ``sample.yaml`` and the quick-start files), and the keys of ``overall.yaml`` that no
    RecBole model yaml sets (the training and evaluation settings)."""
    later = set()
    for folder, dirs, names in os.walk(_recbole_properties()):
        dirs[:] = [d for d in dirs if d != "model"]
        for name in names:
            if name.endswith(".yaml") and name != "overall.yaml":
                later |= _keys_of(os.path.join(folder, name))
    overall = _keys_of(os.path.join(_recbole_properties(), "overall.yaml"))
    return later | (overall - recbole_model_yaml_keys())


def plugin_defaults(name):
    """``{key: value}`` of the plugin's defaults for model ``name``, in the order of its
    yaml files: the model's (its base classes' first: DPAtt.yaml adds to PAtt.yaml), the
    model keys of the plugin's overall.yaml, then the keys only the models whose files it
    also runs read (AWRSR: STOSA's pvn_weight)."""
    from recbole_attn.engine.config import model_yaml_files, properties_dir
    from recbole_attn.sequential.models import get_model_class
    from recbole_attn.options.declared import model_yaml as declared_yaml

    model_class = get_model_class(name)
    values = {}
    own = yaml.safe_load(declared_yaml(model_class)) or {}
    for path in model_yaml_files(model_class, options=own):
        cls = get_model_class(os.path.splitext(os.path.basename(path))[0])
        values.update(yaml.safe_load(declared_yaml(cls)) or {})
    with open(os.path.join(properties_dir(), "overall.yaml"), encoding="utf-8") as f:
        for key, value in (yaml.safe_load(f) or {}).items():
            values.setdefault(key, value)
    for other in MODELS[name].also_reads:
        for key, value in (
            yaml.safe_load(declared_yaml(get_model_class(other))) or {}
        ).items():
            values.setdefault(key, value)
    return values


#: the comments of the keys every model built on SASRec's blocks reads
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
    """The ``loss_type`` values the exported model accepts: the list its file's check
    names (``Make sure 'loss_type' in [...]``, as RecBole's SASRec)."""
    for text in model_sources(files, name):
        match = re.search(r"loss_type'? in (\[[^\]]*\])", text)
        if match:
            return yaml.safe_load(match.group(1))
    raise AssertionError(f"{model_file(name)} does not check loss_type")


def _meaning(name, key):
    """The one-line meaning of a key the plugin declares, for a yaml comment: without
    the plugin's references (its docs, experiments, research forms)."""
    from recbole_attn.sequential.models import get_model_class
    from recbole_attn.options.declared import declared_options

    classes = [get_model_class(name)] + [
        get_model_class(other) for other in MODELS[name].also_reads
    ]
    for cls in classes:
        opt = declared_options(cls).get(key)
        if opt is not None:
            text = re.sub(r"\s*\([^()]*(docs/|experiments/)[^()]*\)", "", opt.meaning)
            return f"({opt.kind}) {text.rstrip('.')}."
    return ""


def _scalar(value):
    if value is None:
        return "~"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_scalar(v) for v in value) + "]"
    if isinstance(value, str):
        return repr(value)  # as RecBole's yaml files quote strings
    return (
        yaml.safe_dump(value).splitlines()[0]
        if isinstance(value, float)
        else str(value)
    )


def exported_keys(name, files):
    """``{key: value}`` the exported yaml of ``name`` sets."""
    cannot = keys_a_model_yaml_cannot_set()
    defaults = plugin_defaults(name)
    read = _read_keys(model_sources(files, name))
    order = [k for k in defaults if k in read] + [k for k in read if k not in defaults]
    # a key the plugin gives no default is read only where another model's options say
    # so (PARec's file reads FPARec's factor_k): it is that model's
    out = {k: defaults[k] for k in order if k not in cannot and k in defaults}
    if out.get("loss_type") == "CE":
        # RecBole's Config refuses a sequential model under CE whose
        # train_neg_sample_args is not None (its SASRec's users pass None)
        out["train_neg_sample_args"] = None
    return out


def reproduction_settings(name):
    """``{key: value}``: the plugin's defaults for ``name`` that a model yaml cannot set
    inside RecBole (T, the training budget, the validation metric), which the docs page
    gives as a user's config."""
    from recbole_attn.sequential.models import get_model_class
    from recbole_attn.options.declared import model_yaml as declared_yaml

    cannot = keys_a_model_yaml_cannot_set()
    own = {}
    for cls in reversed(get_model_class(name).__mro__):
        if "yaml_header" in vars(cls):
            own.update(yaml.safe_load(declared_yaml(cls)) or {})
    return {
        k: v
        for k, v in own.items()
        if k in cannot and k not in ("train_neg_sample_args", "training_mode")
    }


def model_yaml(name, files):
    """The text of the exported ``recbole/properties/model/<name>.yaml``."""
    values = exported_keys(name, files)
    lines = []
    for key, value in values.items():
        if key == "train_neg_sample_args":
            comment = (
                "(dict) No negatives under CE (RecBole requires None there); BPR needs "
                "{'distribution': 'uniform', 'sample_num': 1}."
            )
        elif key == "loss_type":
            comment = (
                "(str) The type of loss function. Range in "
                f"{accepted_losses(name, files)}."
            )
        else:
            comment = COMMON_COMMENTS.get(key) or _meaning(name, key)
        text = f"{key}: {_scalar(value)}"
        lines.append((text + " ").ljust(32) + f"# {comment}" if comment else text)
    text = "\n".join(lines) + "\n"
    loaded = yaml.safe_load(text)
    assert loaded == values, (name, loaded, values)  # a broken yaml is our bug
    return text
