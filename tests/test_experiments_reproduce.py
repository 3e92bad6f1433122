"""The reproduce group (experiments/studies.py, experiments/reports.py): ``--quick`` runs
every model on a fixture under the one protocol and writes a well-formed table and the two
charts (the real runs are too slow for CI); the table's gains and notes; the page keeps
every dataset."""

import json
import math
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
    from recbole_attn.engine.config import make_config

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
    from experiments.categories import has_categories

    for dataset, categories in studies.REPRODUCE_DATASETS.items():
        assert has_categories(dataset, str(tmp_path)) == categories, dataset
        name = studies.reproduce_name(dataset)
        # as declared, with the linear value covariances its STOSA rows ran
        want = studies.with_linear_values(studies.reproduce_study(dataset, categories))
        assert studies.STUDIES[name] == want
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


def _write_run(folder, label, seed, ranks=None, **fields):
    run = {
        "label": label,
        "seed": seed,
        "seconds_per_epoch": 1.0,
        "device": "CPU (1 threads)",
        "parameters": 100,
        "best_epoch": 5,
        "test": {"ndcg@10": 0.1, "recall@10": 0.2, "cc@10": 0.5},
        **fields,
    }
    if ranks is not None:
        run["test_ranks"] = {"cap": 11, "data": {"fingerprint": "f"}, "ranks": ranks}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{label.replace(' ', '_')}__seed{seed}.json"
    path.write_text(json.dumps(run))


def test_rerun_lines_say_which_labels_kept_their_numbers_and_why_others_moved(tmp_path):
    """A rerun beside its superseded runs: equal labels are named, each other label has
    a row with its NDCG@10 means before and now and what differs (device, parameters,
    torch, only a diversity metric, the best epoch)."""
    new, old = tmp_path / "runs", tmp_path / reports.SUPERSEDED
    for seed in (2020, 2021):
        for folder in (new, old):
            _write_run(folder, "SASRec", seed)  # equal
        _write_run(old, "PARec", seed)
        _write_run(
            new,
            "PARec",
            seed,
            device="GPU (H100)",
            test={"ndcg@10": 0.1 + seed % 2 / 10, "recall@10": 0.2, "cc@10": 0.5},
            best_epoch=5 + seed % 2,
            stack={"torch": "2.11.0", "cpu": "AMD EPYC (AVX2)"},
        )
        _write_run(old, "STOSA", seed, parameters=120)
        _write_run(new, "STOSA", seed, test={"ndcg@10": 0.3})
        _write_run(old, "RKSA", seed)
        _write_run(
            new, "RKSA", seed, test={"ndcg@10": 0.1, "recall@10": 0.2, "cc@10": 0.51}
        )
    runs = reports._by_label_and_seed(reports.load_runs(str(new)))
    lines = reports.rerun_lines(runs, str(old))
    assert "SASRec give the earlier numbers to the last digit." in lines[1]
    rows = {line.split("|")[1].strip(): line for line in lines if line.startswith("| ")}
    assert set(rows) == {"model", "PARec", "STOSA", "RKSA"}
    assert "| 1 of 2 | 0.1000 -> 0.1500 |" in rows["PARec"]
    assert "computed on GPU (H100) (before: CPU (1 threads))" in rows["PARec"]
    assert "torch 2.11.0 (before: not recorded)" in rows["PARec"]
    assert "cpu AMD EPYC (AVX2) (before: not recorded)" in rows["PARec"]
    assert "best epoch moved on 1 of 2 seeds" in rows["PARec"]
    assert "| 0 of 2 | 0.1000 -> 0.3000 |" in rows["STOSA"]
    assert "120 -> 100 trainable parameters" in rows["STOSA"]
    assert "only cc@10 differs: accuracy is equal" in rows["RKSA"]
    assert reports.rerun_lines(runs, str(tmp_path / "none")) == []


def test_gains_that_hold_sorts_each_test_by_its_holm_corrected_p(tmp_path):
    """The page's last section, from per-user ranks: a clear gain holds, a clear loss
    holds, a coin flip does not; a dataset without ranks says it has no test."""
    import random

    rng = random.Random(1)
    study = studies.reproduce_study("quick", categories=False, quick=True)
    folder = tmp_path / "runs"
    base = [rng.randint(1, 11) for _ in range(300)]
    shifted = {
        "SASRec": base,
        "PARec": [max(1, r - 3) for r in base],  # better for most users
        "FPARec": [min(11, r + 3) for r in base],  # worse
        "RKSA (CE)": [r if rng.random() < 0.5 else rng.randint(1, 11) for r in base],
    }
    for label, ranks in shifted.items():
        for seed in (2020, 2021):
            ndcg = sum(1 / math.log2(r + 1) for r in ranks if r <= 10)
            _write_run(folder, label, seed, ranks, test={"ndcg@10": ndcg / len(ranks)})
    other = dict(study, dataset="other")
    lines = reports.gains_that_hold([(study, str(folder)), (other, str(tmp_path))])
    text = "\n".join(lines)
    assert "- **quick** (3 tests):" in text
    holds = next(l for l in lines if l.startswith("  - gains that hold"))
    loses = next(l for l in lines if l.startswith("  - losses that hold"))
    rest = next(l for l in lines if l.startswith("  - not significant"))
    assert "PARec vs SASRec +" in holds and "FPARec" not in holds
    assert "FPARec vs SASRec -" in loses
    assert "RKSA (CE) vs SASRec" in rest
    assert "- **other**: no per-user results, no test." in text
