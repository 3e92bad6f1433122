"""experiments/patt_official.py: the official PAtt code's inputs written from our converter
(the same sequences and categories as our dataset), the run-time change of its ranking
(ours: real items only, history excluded) and the run record it stores. The official code
itself is not run here (it is not ours to ship): these are its adapters."""

import json
import os
import pickle

import numpy as np
import pytest
import torch

from experiments import patt_official, studies
from recbole_attn.data.convert import clean, seqfile

SHARED_BEAUTY = os.path.join(
    os.path.dirname(__file__), "..", "..", "shared", "datasets", "raw", "beauty"
)


def _write_raw(tmp_path, lines, attributes):
    seq = tmp_path / "seq.txt"
    seq.write_text("".join(line + "\n" for line in lines))
    attrs = tmp_path / "attrs.json"
    attrs.write_text(json.dumps(attributes))
    return str(seq), str(attrs)


def _read_official(out, name):
    with open(os.path.join(out, f"{name}.txt")) as f:
        seqs = [line.split() for line in f.read().splitlines()]
    with open(os.path.join(out, name, "cate.txt")) as f:
        cates = [list(map(int, line.split())) for line in f.read().splitlines()]
    with open(os.path.join(out, name, "item_kernel_3.pkl"), "rb") as f:
        kernel = pickle.load(f)
    return seqs, cates, kernel


def test_inputs_are_our_converted_data(tmp_path):
    """Sequences in time order with the item ids kept (1..n), one cate.txt line per item
    (0-based id, then its categories: our converter's tokens, brand-like first ids
    dropped), and a zero kernel of the official shape."""
    lines = ["1 1 2 3 4 5", "2 2 3 4 5 1", "3 3 4 5 1 2", "4 4 5 1 2 3", "5 5 1 2 3 4"]
    attributes = {"1": [90, 10, 11], "2": [91, 10], "3": [12], "4": [92, 12, 10]}
    seq, attrs = _write_raw(tmp_path, lines, attributes)
    out = str(tmp_path / "official")
    stats = patt_official.official_inputs(seq, attrs, "toy", out)
    seqs, cates, kernel = _read_official(out, "toy")
    assert [" ".join(s) for s in seqs] == lines  # nothing filtered: the raw file
    cats, _ = seqfile.split_attributes(seqfile.parse_item2attributes(attrs))
    tokens = sorted({c for cs in cats.values() for c in cs})
    assert stats == {"users": 5, "items": 5, "categories": len(tokens)}
    assert [c[0] for c in cates] == [0, 1, 2, 3, 4]
    # our .item file's tokens, each written as one id (a bijection across all lines)
    ids = {}
    for item, line in enumerate(cates, start=1):
        assert len(line) - 1 == len(cats.get(str(item), []))
        for token, cid in zip(cats.get(str(item), []), line[1:]):
            assert ids.setdefault(token, cid) == cid
    assert len(set(ids.values())) == len(ids) == len(tokens)
    assert kernel["V"].shape == (5, 64) and not kernel["V"].any()


def test_inputs_relabel_items_that_are_not_1_to_n(tmp_path):
    """After a k-core filter removes items, ids become 1..n in order of first appearance,
    the same in the sequences and in cate.txt."""
    lines = ["1 10 20 30", "2 20 30 10", "3 30 10 20 99"]
    attributes = {"10": [7, 1], "20": [7, 2], "30": [7, 3], "99": [7, 4]}
    seq, attrs = _write_raw(tmp_path, lines, attributes)
    out = str(tmp_path / "official")
    patt_official.official_inputs(seq, attrs, "toy", out, k=3)
    seqs, cates, _ = _read_official(out, "toy")
    assert seqs == [["1", "1", "2", "3"], ["2", "2", "3", "1"], ["3", "3", "1", "2"]]
    assert [c[0] for c in cates] == [0, 1, 2]
    assert [len(c) for c in cates] == [2, 2, 2]
    assert len({c[1] for c in cates}) == 3  # items 10, 20, 30 keep distinct categories


@pytest.mark.slow
def test_beauty_inputs_are_the_raw_file(tmp_path):
    path = os.path.join(SHARED_BEAUTY, "Beauty.txt")
    if not os.path.isfile(path):
        pytest.skip(f"the shared Beauty files are not at {SHARED_BEAUTY}")
    attrs = os.path.join(SHARED_BEAUTY, "Beauty_item2attributes.json")
    out = str(tmp_path / "official")
    stats = patt_official.official_inputs(path, attrs, "beauty", out)
    assert stats == {"users": 22363, "items": 12101, "categories": 202}
    with open(path) as a, open(os.path.join(out, "beauty.txt")) as b:
        assert a.read() == b.read()


def _release_topk(scores, history, k):
    """What the release does with predict_full's output (REFERENCE_NOTES §2): history
    scores set to 0, then the top k by score."""
    scores = scores.copy()
    scores[history] = 0
    ind = np.argpartition(scores, -k)[:, -k:]
    part = scores[np.arange(len(scores))[:, None], ind]
    return ind[
        np.arange(len(scores))[:, None], np.argsort(-part, axis=1, kind="stable")
    ]


def test_our_order_makes_the_release_rank_as_we_do():
    """After our_order, the release's history-to-0 and top-k give every row's unseen real
    items in the order of their raw scores (padding and mask ids never ranked), while
    the release alone lets history items and the padding/mask ids in."""
    gen = torch.Generator().manual_seed(0)
    users, items, k = 50, 30, 10
    mask_id = items + 1
    scores = torch.randn(users, items + 2, generator=gen) * 3 - 2  # mostly negative
    history = torch.rand(users, items + 2, generator=gen) < 0.3
    history[:, 0] = history[:, mask_id] = False
    got = _release_topk(
        patt_official.our_order(scores, mask_id).numpy(), history.numpy(), k
    )
    for u in range(users):
        real = [i for i in range(1, mask_id) if not history[u, i]]
        want = sorted(real, key=lambda i: -float(scores[u, i]))[:k]
        assert got[u].tolist() == want
    raw = _release_topk(scores.numpy(), history.numpy(), k)
    leaked = {int(i) for u in range(users) for i in raw[u] if history[u, i]}
    assert leaked or any(i in (0, mask_id) for i in raw.ravel())


def _record():
    metrics = lambda n5, r10: {"ndcg@5": n5, "recall@10": r10, "cc@10": 0.08}
    evals = [
        {"epoch": 0, "time": 0.0, **metrics(0.9, 0.1)},  # epoch 0 never saved
        {"epoch": 1, "time": 10.0, **metrics(0.2, 0.3)},
        {"epoch": 2, "time": 22.0, **metrics(0.4, 0.5)},
        {"epoch": 3, "time": 30.0, **metrics(0.4, 0.6)},  # not strictly better
        {"epoch": "best", "time": 31.0, **metrics(0.4, 0.5)},
        {"epoch": "best", "time": 32.0, **metrics(0.3, 0.45)},
    ]
    return {
        "evaluations": evals,
        "start": 0.0,
        "end": 40.0,
        "device": "CPU (1 threads)",
    }


def test_run_dict_follows_the_official_early_stopping():
    run = patt_official.run_dict(_record(), 2020, {"epochs": "200"}, "abc")
    assert run["label"] == patt_official.LABEL
    assert run["study"] == patt_official.STUDY
    assert run["best_epoch"] == 3  # epoch 2 (0-based): first strict best from epoch 1
    assert run["epochs_run"] == 4
    assert run["best_valid"] == {"ndcg@5": 0.4, "recall@10": 0.5, "cc@10": 0.08}
    assert run["test"] == {"ndcg@5": 0.3, "recall@10": 0.45, "cc@10": 0.08}
    assert run["seconds_per_epoch"] == 10.0  # median of 10, 12, 8
    assert run["changes"] == patt_official.CHANGES
    external = studies.STUDIES[patt_official.STUDY]["external"][patt_official.LABEL]
    assert run["model"] == external["model"]


def test_metric_names():
    post_fix = {
        "Epoch": 3,
        "cc@5": "0.05",
        "HIT@5": "0.10",
        "NDCG@10": "0.07",
        "F1@10": "0.09",
        "MRR": "0.04",
    }
    assert patt_official._metrics(post_fix) == {
        "cc@5": 0.05,
        "recall@5": 0.10,
        "ndcg@10": 0.07,
    }


def test_bad_arguments_exit_with_a_reason(tmp_path):
    with pytest.raises(SystemExit, match="--official_dir is needed"):
        patt_official.main([])
    args = ["--sequences=x", "--attributes=y", f"--official_dir={tmp_path}"]
    with pytest.raises(SystemExit, match="no main.py: clone"):
        patt_official.main(args)
    with pytest.raises(SystemExit, match="--epochs must be >= 2"):
        patt_official.main(args + ["--epochs=1"])


def test_study_rows_are_the_declared_official_behaviours():
    """official-like = every one-at-a-time step; without leaks = all but the two leaks."""
    study = studies.STUDIES[patt_official.STUDY]
    variants = study["variants"]
    base = variants["ours"][1]
    for step, change in studies.PATT_STEPS.items():
        assert variants[f"ours + {step}"][1] == {**base, **change}
    assert variants["official-like"][1] == {**base, **studies.PATT_OFFICIAL}
    no_leak = variants["official-like without leaks"][1]
    assert no_leak["dpp_ground_set"] == "prefix"
    assert no_leak.get("neg_exclude_heldout", False) is False
    assert {k: no_leak[k] for k in studies.PATT_NO_LEAK} == studies.PATT_NO_LEAK
    assert clean.Options().k == 5  # the official inputs use our default k-core
