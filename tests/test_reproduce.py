"""benchmarks/reproduce.py --quick: every model on a fixture under the one protocol, a
well-formed table and the two charts (the real runs are too slow for CI)."""

import os
import struct
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytest.importorskip("matplotlib")


@pytest.mark.slow
def test_quick_mode_writes_the_table_and_charts(tmp_path):
    sys.path.insert(0, os.path.join(REPO, "benchmarks"))
    try:
        import reproduce

        path = reproduce.main(["--quick", f"--output={tmp_path}", "--jobs=2"])
    finally:
        sys.path.remove(os.path.join(REPO, "benchmarks"))
    text = open(path).read()
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    header, body = rows[0], rows[1:]
    columns = header.count("|") - 1
    assert all(row.count("|") - 1 == columns for row in body)
    assert {row.split("|")[1].strip() for row in body} == set(reproduce.MODELS)
    for row in body:
        cells = [c.strip() for c in row.split("|")[1:-1]]
        assert cells[1] == reproduce.LOSS[cells[0]]
        assert cells[2] == "1"  # one seed
        metrics = reproduce.ACCURACY + reproduce.DIVERSITY
        assert all(0.0 <= float(c) <= 1.0 for c in cells[3 : 3 + len(metrics)])
    for name in ("reproduction_accuracy.png", "reproduction_diversity.png"):
        with open(tmp_path / name, "rb") as f:
            head = f.read(24)
        assert head[:8] == b"\x89PNG\r\n\x1a\n"
        assert min(struct.unpack(">II", head[16:24])) > 100
        assert f"({name})" in text


def test_loss_column_is_each_models_configured_loss():
    """The table's loss column (reproduce.LOSS) is what each label trains with."""
    from recbole_attn.quick_start import make_config

    sys.path.insert(0, os.path.join(REPO, "benchmarks"))
    try:
        import reproduce
    finally:
        sys.path.remove(os.path.join(REPO, "benchmarks"))
    assert set(reproduce.LOSS) == set(reproduce.MODELS)
    for label, (model, overrides) in reproduce.MODELS.items():
        config = make_config(
            model, "Office", config_dict={**overrides, "state": "ERROR"}
        )
        assert config["loss_type"] == reproduce.LOSS[label], label


def test_datasets_without_categories_drop_dpatt_and_the_diversity_metrics(tmp_path):
    """Office ships without categories: no DPAtt, no CC/ILD/F1; ml-100k (RecBole's bundled
    copy, genres) keeps both."""
    sys.path.insert(0, os.path.join(REPO, "benchmarks"))
    try:
        import reproduce
        import studies
    finally:
        sys.path.remove(os.path.join(REPO, "benchmarks"))
    reproduce.register(["Office", "ml-100k"], str(tmp_path))
    office = studies.STUDIES[reproduce.study_name("Office")]
    ml = studies.STUDIES[reproduce.study_name("ml-100k")]
    assert "DPAtt" not in office["variants"] and "DPAtt" in ml["variants"]
    assert set(office["variants"]) == set(reproduce.MODELS) - {"DPAtt"}
    assert "CC" not in office["protocol"]["metrics"]
    assert {"CC", "ILD", "F1"} <= set(ml["protocol"]["metrics"])
    assert office["columns"] == reproduce.ACCURACY
    assert ml["columns"] == reproduce.ACCURACY + reproduce.DIVERSITY


def test_table_pairs_gains_by_seed_and_says_what_is_missing(tmp_path):
    """Gains over SASRec are paired by seed (a seed without its baseline run is left out);
    labels not run yet and labels with one seed are named under the table."""
    import json

    sys.path.insert(0, os.path.join(REPO, "benchmarks"))
    try:
        import reproduce
    finally:
        sys.path.remove(os.path.join(REPO, "benchmarks"))
    reproduce.register(["Office"], str(tmp_path))
    ndcg = {  # label -> {seed: ndcg@10}
        "SASRec": {2020: 0.10, 2021: 0.20},
        "PARec": {2020: 0.11, 2021: 0.24, 2022: 0.50},  # 2022 has no baseline
        "PAtt": {2020: 0.11, 2021: 0.18},
        "FPARec": {2020: 0.12},
    }
    for label, seeds in ndcg.items():
        model, _ = reproduce.MODELS[label]
        for seed, value in seeds.items():
            run = {
                "label": label,
                "model": model,
                "seed": seed,
                "test": {m: value for m in reproduce.ACCURACY},
                "seconds_per_epoch": 1.0,
                "device": "CPU (1 threads)",
            }
            path = tmp_path / f"{label}_{seed}.json"
            path.write_text(json.dumps(run))
    text, means = reproduce.dataset_table("Office", str(tmp_path))
    rows = {
        line.split("|")[1].strip(): [c.strip() for c in line.split("|")[1:-1]]
        for line in text.splitlines()
        if line.startswith("| ") and not line.startswith("| model")
    }
    gain = rows["PARec"][3 + len(reproduce.ACCURACY)]
    assert gain == "+15.0 ± 7.1 %"  # +10 % and +20 %, not the unpaired seed 2022
    assert rows["PAtt"][3 + len(reproduce.ACCURACY)] == "+0.0 ± 14.1 %"  # not -0.0
    assert rows["FPARec"][3 + len(reproduce.ACCURACY)] == "+20.0 %"
    assert rows["PARec"][2] == "3" and rows["FPARec"][2] == "1"
    assert means["PARec"]["ndcg@10"] == pytest.approx((0.11 + 0.24 + 0.50) / 3)
    missing = set(reproduce.MODELS) - {"DPAtt"} - set(ndcg)
    line = next(x for x in text.splitlines() if x.startswith("Not run yet on Office"))
    assert set(line.split(": ", 1)[1].rstrip(".").split(", ")) == missing
    assert "One seed only for FPARec:" in text


def test_a_run_on_one_dataset_keeps_the_other_tables(tmp_path):
    """The page is rewritten whole: ``--datasets=Office`` must not drop ml-100k's table."""
    import json

    sys.path.insert(0, os.path.join(REPO, "benchmarks"))
    try:
        import reproduce
    finally:
        sys.path.remove(os.path.join(REPO, "benchmarks"))
    folder = tmp_path / "results" / reproduce.study_name("ml-100k")
    folder.mkdir(parents=True)
    run = {
        "label": "SASRec",
        "model": "SASRecAP",
        "seed": 2020,
        "test": {m: 0.1 for m in reproduce.ACCURACY + reproduce.DIVERSITY},
        "seconds_per_epoch": 1.0,
        "device": "CPU (1 threads)",
    }
    (folder / "SASRec_2020.json").write_text(json.dumps(run))
    path = reproduce.main(
        [
            "--report",
            "--datasets=Office",
            f"--results={tmp_path / 'results'}",
            f"--output={tmp_path / 'docs'}",
        ]
    )
    text = open(path).read()
    assert "### Office" in text and "### ml-100k" in text
    assert "| SASRec | CE | 1 | 0.1000 |" in text
