"""The reproduce group (experiments/studies.py, experiments/reports.py): ``--quick`` runs
every model on a fixture under the one protocol and writes a well-formed table and the two
charts (the real runs are too slow for CI); the table's gains and notes; the page keeps
every dataset."""

import json
import struct

import pytest

from experiments import reports, runner, studies

pytest.importorskip("matplotlib")

#: the labels of models that read item categories (not run on Office)
CATEGORY_READERS = {"DPAtt", "DPAtt (CE)"}


@pytest.mark.slow
def test_quick_mode_writes_the_table_and_charts(tmp_path):
    (path,) = runner.main(
        ["--group=reproduce", "--quick", f"--root={tmp_path}", "--jobs=2"]
    )
    assert path == str(tmp_path / "reproduce" / "report.md")
    text = open(path).read()
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    header, body = rows[0], rows[1:]
    columns = header.count("|") - 1
    assert all(row.count("|") - 1 == columns for row in body)
    assert {row.split("|")[1].strip() for row in body} == set(studies.REPRODUCE_MODELS)
    for row in body:
        cells = [c.strip() for c in row.split("|")[1:-1]]
        assert cells[1] == studies.REPRODUCE_LOSS[cells[0]]
        assert cells[2] == "1"  # one seed
        metrics = studies.ACCURACY + studies.DIVERSITY
        assert all(0.0 <= float(c) <= 1.0 for c in cells[3 : 3 + len(metrics)])
    for name in ("reproduction_accuracy.png", "reproduction_diversity.png"):
        with open(tmp_path / "reproduce" / name, "rb") as f:
            head = f.read(24)
        assert head[:8] == b"\x89PNG\r\n\x1a\n"
        assert min(struct.unpack(">II", head[16:24])) > 100
        assert f"({name})" in text


def test_loss_column_is_each_models_configured_loss():
    """The table's loss column (studies.REPRODUCE_LOSS) is what each label trains with."""
    from recbole_attn.quick_start import make_config

    assert set(studies.REPRODUCE_LOSS) == set(studies.REPRODUCE_MODELS)
    for label, (model, overrides) in studies.REPRODUCE_MODELS.items():
        config = make_config(
            model, "Office", config_dict={**overrides, "state": "ERROR"}
        )
        assert config["loss_type"] == studies.REPRODUCE_LOSS[label], label


def test_datasets_without_categories_drop_dpatt_and_the_diversity_metrics(tmp_path):
    """Office ships without categories: no DPAtt, no CC/ILD/F1; ml-100k (RecBole's bundled
    copy, genres) keeps both. The declared studies follow each dataset's shipped yaml.
    """
    from recbole_attn.quick_start import has_categories

    for dataset, categories in studies.REPRODUCE_DATASETS.items():
        assert has_categories(dataset, str(tmp_path)) == categories, dataset
        name = studies.reproduce_name(dataset)
        assert studies.STUDIES[name] == studies.reproduce_study(dataset, categories)
        assert name in studies.GROUPS["reproduce"]["studies"]
    office = studies.STUDIES[studies.reproduce_name("Office")]
    ml = studies.STUDIES[studies.reproduce_name("ml-100k")]
    assert "DPAtt" not in office["variants"] and "DPAtt" in ml["variants"]
    assert set(office["variants"]) == set(studies.REPRODUCE_MODELS) - CATEGORY_READERS
    assert "CC" not in office["protocol"]["metrics"]
    assert {"CC", "ILD", "F1"} <= set(ml["protocol"]["metrics"])
    assert office["columns"] == studies.ACCURACY
    assert ml["columns"] == studies.ACCURACY + studies.DIVERSITY


def test_table_pairs_gains_by_seed_and_says_what_is_missing(tmp_path):
    """Gains over SASRec are paired by seed (a seed without its baseline run is left out);
    labels not run yet and labels with one seed are named under the table."""
    ndcg = {  # label -> {seed: ndcg@10}
        "SASRec": {2020: 0.10, 2021: 0.20},
        "PARec": {2020: 0.11, 2021: 0.24, 2022: 0.50},  # 2022 has no baseline
        "PAtt": {2020: 0.11, 2021: 0.18},
        "FPARec": {2020: 0.12},
    }
    for label, seeds in ndcg.items():
        model, _ = studies.REPRODUCE_MODELS[label]
        for seed, value in seeds.items():
            run = {
                "label": label,
                "model": model,
                "seed": seed,
                "test": {m: value for m in studies.ACCURACY},
                "seconds_per_epoch": 1.0,
                "device": "CPU (1 threads)",
            }
            path = tmp_path / f"{label}_{seed}.json"
            path.write_text(json.dumps(run))
    office = studies.STUDIES[studies.reproduce_name("Office")]
    text, means = reports.dataset_table(office, str(tmp_path))
    rows = {
        line.split("|")[1].strip(): [c.strip() for c in line.split("|")[1:-1]]
        for line in text.splitlines()
        if line.startswith("| ") and not line.startswith("| model")
    }
    gain = rows["PARec"][3 + len(studies.ACCURACY)]
    assert gain == "+15.0 ± 7.1 %"  # +10 % and +20 %, not the unpaired seed 2022
    assert rows["PAtt"][3 + len(studies.ACCURACY)] == "+0.0 ± 14.1 %"  # not -0.0
    assert rows["FPARec"][3 + len(studies.ACCURACY)] == "+20.0 %"
    assert rows["PARec"][2] == "3" and rows["FPARec"][2] == "1"
    assert means["PARec"]["ndcg@10"] == pytest.approx((0.11 + 0.24 + 0.50) / 3)
    missing = set(studies.REPRODUCE_MODELS) - CATEGORY_READERS - set(ndcg)
    line = next(x for x in text.splitlines() if x.startswith("Not run yet on Office"))
    assert set(line.split(": ", 1)[1].rstrip(".").split(", ")) == missing
    assert "One seed only for FPARec:" in text


def test_a_run_on_one_dataset_keeps_the_other_tables(tmp_path):
    """The page is rewritten whole: a report of ``--study=reproduce_Office`` must not
    drop ml-100k's table."""
    folder = tmp_path / studies.reproduce_name("ml-100k") / "runs"
    folder.mkdir(parents=True)
    run = {
        "label": "SASRec",
        "model": "SASRecAP",
        "seed": 2020,
        "test": {m: 0.1 for m in studies.ACCURACY + studies.DIVERSITY},
        "seconds_per_epoch": 1.0,
        "device": "CPU (1 threads)",
    }
    (folder / "SASRec_2020.json").write_text(json.dumps(run))
    written = runner.main(
        ["--report", "--study=reproduce_Office", f"--root={tmp_path}"]
    )
    assert written == [str(tmp_path / "reproduce" / "report.md")]
    text = open(written[0]).read()
    assert "### Office" in text and "### ml-100k" in text
    assert "| SASRec | CE | 1 | 0.1000 |" in text


def test_gain_columns_carry_a_paired_test_over_users_where_runs_have_ranks(tmp_path):
    """Runs with per-user ranks get p-values beside both NDCG@10 gains, Holm-corrected
    over the table; the same runs without ranks read as before."""
    import json
    import random

    from experiments import reports, studies

    rng = random.Random(0)
    study = studies.reproduce_study("quick", categories=False, quick=True)
    folder = tmp_path / "runs"
    folder.mkdir()
    for label, shift in (("SASRec", 0), ("STOSA (CE)", 3), ("SASRec (BPR)", 1)):
        for seed in (2020, 2021):
            ranks = [max(1, min(11, rng.randint(1, 11) - shift)) for _ in range(200)]
            values = {"ndcg@10": 0.0, "recall@10": 0.0}
            run = {
                "label": label,
                "seed": seed,
                "seconds_per_epoch": 1.0,
                "device": "CPU",
                "test": {c: 0.1 for c in study["columns"]} | values,
                "test_ranks": {"cap": 11, "data": {"fingerprint": "f"}, "ranks": ranks},
            }
            path = folder / f"{label.replace(' ', '_')}__seed{seed}.json"
            path.write_text(json.dumps(run))
    text, _ = reports.dataset_table(study, str(folder))
    row = next(l for l in text.splitlines() if l.startswith("| STOSA (CE) |"))
    # CE's own-loss baseline is the baseline: one test, shown in both columns
    assert row.count("(p <.001*)") == 2
    bpr = next(l for l in text.splitlines() if l.startswith("| SASRec (BPR) |"))
    assert bpr.count("(p ") == 1  # against SASRec; it is its own loss's baseline
    assert "Holm-corrected over the 2 tests" in text
    for path in folder.iterdir():
        run = json.loads(path.read_text())
        del run["test_ranks"]
        path.write_text(json.dumps(run))
    text, _ = reports.dataset_table(study, str(folder))
    assert "(p " not in text and "Holm" not in text
