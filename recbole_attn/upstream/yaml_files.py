"""
recbole_attn.upstream.yaml_files
################################

The ``recbole/properties/model/<Name>.yaml`` of the RecBole export, from our yaml files:
the model's (and its backbones'), the keys of our base class that the exported code reads
and RecBole's own yaml files lack, without the plugin's training keys, and RecBole's
negative sampler off where the model's loss is CE (as RecBole's SASRec.yaml).
"""

import os
import re

import yaml

from recbole_attn import __version__
from recbole_attn.host import EVALUATION_KEYS
from recbole_attn.options import model_yaml as declared_yaml
from recbole_attn.upstream.models import MARK, MODELS, cite_docs
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


def _read_keys(sources):
    """The config keys the sources read (``config["..."]``)."""
    return sorted(set(re.findall(r"config\[\"(\w+)\"\]", "\n".join(sources))))


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
    (``config["..."]``) and RecBole's overall.yaml lacks, with our defaults; none of the
    keys only the plugin reads (its training mode and negatives); RecBole's negative
    sampler off under CE."""
    from recbole_attn.config import get_model_class, model_yaml_files, properties_dir

    model_class = get_model_class(name)
    read = _read_keys(model_sources(files, name))
    own = yaml.safe_load(declared_yaml(model_class)) or {}
    # the yaml files our Config reads for the model (its base classes' first: DPAtt.yaml
    # adds to PAtt.yaml; AWRSR's backbone's)
    entries, header = {}, ""
    for yaml_path in model_yaml_files(model_class, options=own):
        cls = get_model_class(os.path.splitext(os.path.basename(yaml_path))[0])
        # from the declarations (the shipped file is the same text; a test checks it)
        cls_header, cls_entries = _yaml_entries(text=declared_yaml(cls))
        header = cls_header if cls is model_class else header
        entries.update(cls_entries)
    for other in MODELS[name].also_reads:
        _, other_entries = _yaml_entries(text=declared_yaml(get_model_class(other)))
        # its options (what its own file reads), not its training settings
        own_keys = _read_keys([files[model_file(other)]])
        for key, text in other_entries.items():
            if key in own_keys:
                entries.setdefault(key, text)
    recbole_keys = recbole_config_keys()
    _, ours = _yaml_entries(os.path.join(properties_dir(), "overall.yaml"))
    for key in read:
        if key not in entries and key not in recbole_keys and key in ours:
            entries[key] = ours[key]
    # what only the plugin reads: the training mode, its negatives, its batches
    keep = set(read) | recbole_keys
    entries = {k: v for k, v in entries.items() if k in keep}
    for key in EVALUATION_KEYS:
        if key in entries:
            lines = entries.pop(key).splitlines(keepends=True)
            entries[f"#{key}"] = (
                "# the paper's evaluation (set it with topk and metrics to match):\n"
                + "".join(
                    line if line.startswith("#") else "# " + line for line in lines
                )
            )
    loss = yaml.safe_load(entries.get("loss_type", "loss_type: CE"))["loss_type"]
    if loss == "CE":  # RecBole's sampler draws no negatives for the softmax
        entries["train_neg_sample_args"] = "train_neg_sample_args: ~\n"
    text = cite_docs(f"# {MARK} {__version__}\n" + header + "".join(entries.values()))
    yaml.safe_load(text)  # a broken yaml is our bug: fail here, not in RecBole
    return text
