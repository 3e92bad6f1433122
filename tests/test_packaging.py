"""The installed package carries every subpackage and the yaml defaults."""

import configparser
import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_setup_cfg_lists_every_subpackage():
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(REPO, "setup.cfg"))
    listed = set(cfg["options"]["packages"].split())
    found = {"recbole_attn.properties"}
    for root, dirs, files in os.walk(os.path.join(REPO, "recbole_attn")):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        if "__init__.py" in files:
            rel = os.path.relpath(root, REPO)
            found.add(rel.replace(os.sep, "."))
    assert found == listed
    data = cfg["options.package_data"]["recbole_attn.properties"]
    for sub in ("model", "dataset"):
        assert f"{sub}/*.yaml" in data
    assert "hyper/*.hyper" in data


def test_every_model_has_its_yaml():
    from recbole_attn.model import MODELS

    for name in MODELS:
        assert os.path.isfile(os.path.join(REPO, "properties", "model", f"{name}.yaml"))
