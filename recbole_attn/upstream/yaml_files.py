"""
recbole_attn.upstream.yaml_files
################################

The ``recbole/properties/model/<Name>.yaml`` of the RecBole export, from our yaml files:
the model's (and its backbones'), the keys of our base class that the exported code reads
and RecBole's own yaml files lack, a preset written out as its options, RecBole's
training mode, and RecBole's negative sampler off (the models draw their own).
"""

import os
import re

import yaml

from recbole_attn import __version__
from recbole_attn.host import EVALUATION_KEYS
from recbole_attn.options import model_yaml as declared_yaml
from recbole_attn.upstream.models import (
    MARK,
    MODELS,
    RECBOLE_TRAINING_MODE,
    cite_docs,
)
from recbole_attn.upstream.sources import model_file, model_sources


def _yaml_entries(path=None, text=None):
    """``(header, {key: text})`` of one of our yaml files (or of its ``text``): the comment
    lines before the first key, and every top-level key with its line(s) and the comments
    right above."""
    header, entries, pending, key = [], {}, [], None
    if text is None:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    for line in text.splitlines(keepends=True):
        match = re.match(r"([A-Za-z_][\w]*):", line)
        if match:
            key = match.group(1)
            entries[key] = "".join(pending) + line
            pending = []
        elif line[:1] in (" ", "\t") and key is not None and not pending:
            entries[key] += line  # continuation of the value or of its comment
        elif line.startswith("#") and not entries:
            header.append(line)
        elif line.strip():
            pending.append(line)
    return "".join(header), entries


def _set_value(text, key, value, comment):
    return (
        f"{key}: {value}".ljust(32) + f"# {comment}\n"
        if comment
        else f"{key}: {value}\n"
    )


def _read_keys(sources):
    """The config keys the sources read: ``config[...]`` subscripts and the classes'
    ``config_keys`` (:mod:`recbole_attn.upstream.bundle`)."""
    text = "\n".join(sources)
    keys = set(re.findall(r"config\[\"(\w+)\"\]", text))
    for group in re.findall(r"config_keys = \(([^)]*)\)", text):
        keys |= set(re.findall(r"[\"'](\w+)[\"']", group))
    return sorted(keys)


def recbole_config_keys():
    """Every key of RecBole's own yaml files (overall, dataset and quick-start settings,
    not the models'): those stay RecBole's and the user's."""
    import recbole

    keys = set()
    root = os.path.join(os.path.dirname(recbole.__file__), "properties")
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != "model"]
        for name in names:
            if name.endswith(".yaml"):
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    keys |= set(yaml.safe_load(f) or {})
    return keys


def model_yaml(name, files):
    """The upstream yaml of model ``name`` from ours: the yaml of its backbones (AWRSR),
    then its own, then every key of ours that the exported code reads
    (``config["..."]`` in ``sources``) and RecBole's overall.yaml lacks, with our
    defaults; presets resolved; RecBole's training mode."""
    from recbole_attn.config import get_model_class, model_yaml_files, properties_dir

    def path(*parts):
        return os.path.join(properties_dir(), *parts)

    model_class = get_model_class(name)
    sources = model_sources(files, name)
    read = _read_keys(sources)
    own = yaml.safe_load(declared_yaml(model_class)) or {}
    # the yaml files our Config reads for the model (its base classes' first: DPAtt.yaml
    # adds to PAtt.yaml; AWRSR's backbone's)
    entries, header, classes = {}, "", []
    for yaml_path in model_yaml_files(model_class, options=own):
        cls = get_model_class(os.path.splitext(os.path.basename(yaml_path))[0])
        # from the declarations (the shipped file is the same text; a test checks it)
        cls_header, cls_entries = _yaml_entries(text=declared_yaml(cls))
        classes.append(cls)
        header = cls_header if cls is model_class else header
        entries.update(cls_entries)
    for other in MODELS[name].also_reads:
        other_class = get_model_class(other)
        classes.append(other_class)
        _, other_entries = _yaml_entries(text=declared_yaml(other_class))
        presets = vars(other_class).get("presets", {})
        # its options (what its own file reads), not its training settings
        own_keys = _read_keys([files[model_file(other)]])
        for key, text in other_entries.items():
            if key in own_keys or key in presets:
                entries.setdefault(key, text)
    recbole_keys = recbole_config_keys()
    _, ours = _yaml_entries(path("overall.yaml"))
    added = [
        key
        for key in read
        if key not in entries and key not in recbole_keys and key in ours
    ]
    for key in added:
        entries[key] = ours[key]
    # presets: the default preset's options, written out (RecBole has no presets)
    for cls in classes:
        for preset_key, table in vars(cls).get("presets", {}).items():
            chosen = yaml.safe_load(entries.pop(preset_key, f"{preset_key}: ~"))[
                preset_key
            ]
            chosen = chosen or next(iter(table))
            for option, value in table[chosen].items():
                others = ", ".join(
                    f"{p}: {t[option]}" for p, t in table.items() if p != chosen
                )
                entries[option] = _set_value(
                    entries.get(option, ""),
                    option,
                    value,
                    f"(str) {preset_key} {chosen}; {others}",
                )
    for key in EVALUATION_KEYS:
        if key in entries:
            lines = entries.pop(key).splitlines(keepends=True)
            entries[f"#{key}"] = (
                "# the paper's evaluation (set it with topk and metrics to match):\n"
                + "".join(
                    line if line.startswith("#") else "# " + line for line in lines
                )
            )
    entries["training_mode"] = _set_value(
        "",
        "training_mode",
        RECBOLE_TRAINING_MODE,
        "(str) RecBole's: one sample per prefix, loss at its last position",
    )
    # the models draw their negatives themselves: RecBole's sampler stays off
    entries["train_neg_sample_args"] = (
        "# negatives are drawn inside the model (neg_sample_num per position): "
        "no RecBole sampler\n"
        "train_neg_sample_args: ~\n"
    )
    text = cite_docs(f"# {MARK} {__version__}\n" + header + "".join(entries.values()))
    yaml.safe_load(text)  # a broken yaml is our bug: fail here, not in RecBole
    return text
