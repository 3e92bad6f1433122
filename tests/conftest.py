"""Shared test fixtures: a tiny atomic-file dataset the tests write themselves."""

import logging
import os
import re

import pytest

from experiments.synthetic import write_synthetic_dataset

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_RAW = os.path.join(os.path.dirname(REPO), "shared", "datasets", "raw")

#: small model sizes that keep every end-to-end test at a few seconds on 2 cores
TINY_MODEL = {
    "hidden_size": 16,
    "inner_size": 32,
    "n_layers": 1,
    "n_heads": 2,
    "MAX_ITEM_LIST_LENGTH": 12,
}


@pytest.fixture(autouse=True)
def threads_as_torch_sets_them(monkeypatch):
    """In-process runs keep torch's default threads (results that do not depend on the
    machine's load; no idle-core measurement per build): the rule is tested on its own
    (test_threads.py) and by the runs the tests start as processes."""
    monkeypatch.setattr("recbole_attn.engine.threads.idle_cores", lambda: None)


@pytest.fixture(autouse=True)
def an_author_for_the_export(monkeypatch):
    """The export's file header names git's author: the same one on every machine."""
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Ann Author")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "ann@example.com")


#: the synthetic dataset every test writes (users u1.., items i1.., categories c0..)
write_tiny_dataset = write_synthetic_dataset


def raw_sequences(data_path, name="tiny"):
    """user token -> the user's item tokens in time order, read from the fixture's .inter
    file (what every test compares the pipeline's splits and histories with)."""
    seqs = {}
    with open(os.path.join(data_path, name, f"{name}.inter")) as f:
        next(f)
        for line in f:
            u, i, t = line.rstrip("\n").split("\t")
            seqs.setdefault(u, []).append((float(t), i))
    return {u: [i for _, i in sorted(v)] for u, v in seqs.items()}


@pytest.fixture(scope="session")
def tiny_data_path(tmp_path_factory):
    """``data_path`` holding the ``tiny`` dataset (and ``tiny_nocat``, without .item)."""
    root = tmp_path_factory.mktemp("data")
    write_tiny_dataset(str(root))
    nocat = write_tiny_dataset(str(root), name="tiny_nocat")
    os.remove(os.path.join(nocat, "tiny_nocat.item"))
    return str(root)


@pytest.fixture
def tiny_config(tiny_data_path, tmp_path, monkeypatch):
    """Config dict for a fast run on ``tiny``; RecBole's log/ and saved/ go to tmp_path."""
    monkeypatch.chdir(tmp_path)
    # RecBole's own Config (some tests build one directly) reads --key=value from argv
    monkeypatch.setattr("sys.argv", ["pytest"])
    yield {
        "data_path": tiny_data_path,
        "load_col": {"inter": ["user_id", "item_id", "timestamp"]},
        "epochs": 2,
        "train_batch_size": 16,
        "eval_batch_size": 64,
        "checkpoint_dir": str(tmp_path / "saved"),
        "state": "ERROR",
        "seed": 2020,
        **TINY_MODEL,
    }
    logging.getLogger().handlers.clear()


#: STOSA's names since its layers hold one module a sublayer (issue 74) -> the
#: per-stream ModuleDict names the patterns above were written for
STOSA_STREAMS = [
    (r"(\.multi_head_attention\.)(query|key)_(mean|cov)\.", r"\1\2.\3."),
    (r"(\.multi_head_attention\.)(value|dense|LayerNorm)_mean\.", r"\1\2.mean."),
    (r"(\.multi_head_attention\.)(value|dense|LayerNorm)\.(?!mean\.)", r"\1\2.cov."),
    (r"\.feed_forward_mean\.", r".feed_forward.mean."),
    (r"\.feed_forward\.(dense|Layer)", r".feed_forward.cov.\1"),
]


def per_stream_name(name):
    """A STOSA parameter's name as releases before issue 74 wrote it (per stream)."""
    for pattern, replacement in STOSA_STREAMS:
        name = re.sub(pattern, replacement, name)
    return name
