"""Run by tests/test_upstream.py in a child process whose ``recbole`` package is a copy
with the export written into it, and which never imports ``recbole_attn`` (none of its
hooks on RecBole's ``Config``): RecBole's own ``Config`` of every exported model, on a
dataset with a yaml of RecBole's (ml-100k) and on one without, and the value of every key
of the exported yaml, read with RecBole's yaml loader.

    python upstream_config.py PAYLOAD_JSON

PAYLOAD_JSON: ``{"models": [...], "datasets": [...]}``; prints one JSON line: per model
and dataset, ``{key: [the yaml's value, Config's value]}`` of every key of the yaml.
"""

import json
import os
import sys


def main(payload):
    import numpy as np

    # the aliases RecBole's Config.compatibility_settings reads and numpy 2 removed (a
    # fix of the stack, not of the configuration)
    for alias, target in (("float_", "float64"), ("complex_", "complex128")):
        if not hasattr(np, alias):
            setattr(np, alias, getattr(np, target))
    if not hasattr(np, "unicode_"):
        np.unicode_ = np.str_
    import recbole
    import yaml
    from recbole.config import Config

    assert "recbole_attn" not in sys.modules
    sys.argv = sys.argv[:1]  # RecBole's Config reads the command line
    root = os.path.dirname(recbole.__file__)
    out = {"recbole": root}
    for name in payload["models"]:
        path = os.path.join(root, "properties", "model", f"{name}.yaml")
        with open(path, encoding="utf-8") as f:
            exported = yaml.load(f.read(), Loader=Config._build_yaml_loader(None))
        for dataset in payload["datasets"]:
            config = Config(model=name, dataset=dataset)
            out[f"{name} {dataset}"] = {
                key: [value, config[key]] for key, value in exported.items()
            }
            if "train_neg_sample_args" in exported:  # None: RecBole's "no sampling"
                got = config["train_neg_sample_args"]["distribution"]
                out[f"{name} {dataset}"]["train_neg_sample_args"] = [
                    exported["train_neg_sample_args"],
                    None if got == "none" else got,
                ]
    assert "recbole_attn" not in sys.modules
    print(json.dumps(out))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
