"""experiments' paper_tables group (each paper's own table on its own data, issue 72):
every baseline trains as its paper's did, each refinement with its backbone's exact
settings; the page's levels, paired gains and Holm-corrected tests over users come from
the stored ranks (brute-forced here); the stored page is what the runner writes."""

import json
import math
import os
import statistics

import pytest
from scipy import stats

from experiments import reports, runner, studies
from recbole_attn.engine.config import make_config

GROUP = "paper_tables"


def test_each_study_is_its_papers_protocol_with_its_baseline():
    group = studies.GROUPS[GROUP]
    for name in group["studies"]:
        study = studies.STUDIES[name]
        assert study["report"] == GROUP and study["full_ranks"], name
        assert tuple(study["seeds"]) == (2020, 2021, 2022), name
        labels = set(study["variants"]) | set(study.get("borrowed", {}))
        for label, base in study["paired"]:
            assert {label, base} <= labels, (name, label, base)
        assert set(study["paper_numbers"]) <= labels, name
        for numbers in study["paper_numbers"].values():
            assert set(numbers) <= set(study["columns"]), name
    # the SASRec papers' baseline: the SASRec authors' model (BCE, 2 blocks, 1 head)
    for name in ("rksa_table2_Games", "parec_table3_Sports", "patt_table2_Beauty"):
        model, overrides = studies.STUDIES[name]["variants"]["SASRec"]
        assert model == "SASRecAP"
        assert {k: overrides[k] for k in studies.SASREC_PAPER} == studies.SASREC_PAPER
    rksa = studies.STUDIES["rksa_table2_Games"]
    assert rksa["protocol"]["eval_args"]["mode"] == "uni100"
    assert rksa["protocol"]["train_batch_size"] == 128
    assert rksa["protocol"]["MAX_ITEM_LIST_LENGTH"] == 50
    patt = studies.STUDIES["patt_table2_Beauty"]["protocol"]
    assert (patt["valid_metric"], patt["stopping_step"]) == ("NDCG@20", 10)


KEYS = (
    "n_layers", "n_heads", "hidden_size", "inner_size", "hidden_dropout_prob",
    "attn_dropout_prob", "hidden_act", "layer_norm_eps", "initializer_range",
    "loss_type", "MAX_ITEM_LIST_LENGTH", "position_alignment", "training_mode",
    "train_batch_size", "learning_rate", "epochs", "stopping_step", "valid_metric",
    "stosa_preset", "pvn_weight", "weight_decay",
)  # fmt: skip


@pytest.mark.parametrize("backbone", ["SASRec", "STOSA"])
def test_awrsr_trains_with_its_backbone_runs_exact_settings(backbone):
    """AWRSR's rows are paired with the stosa_table1 backbone runs: every setting but
    the refinement is the backbone run's, resolved by the same Config."""
    study = studies.STUDIES["awrsr_table2_Beauty"]
    other, there = study["borrowed"][backbone]
    resolved = []
    for name, label in ((other, there), ("awrsr_table2_Beauty", f"{backbone} + simp")):
        model, overrides = studies.STUDIES[name]["variants"][label]
        protocol = studies.STUDIES[name]["protocol"]
        config = make_config(model, "ml-100k", config_dict={**protocol, **overrides})
        resolved.append({k: config[k] for k in KEYS if k in config})
    assert resolved[0] == resolved[1]


def _run(label, seed, ranks, cap=1001, valid=0.1):
    test = {}
    for k in (5, 10):
        test[f"hit@{k}"] = statistics.mean(float(r <= k) for r in ranks)
        test[f"ndcg@{k}"] = statistics.mean(
            1.0 / math.log2(r + 1) if r <= k else 0.0 for r in ranks
        )
    return {
        "label": label,
        "seed": seed,
        "test": test,
        "best_valid": {"ndcg@10": valid},
        "test_ranks": {"cap": cap, "data": {"fingerprint": "x"}, "ranks": ranks},
        "best_epoch": 3,
        "epochs_run": 9,
        "seconds_per_epoch": 2.0,
        "seconds": 120.0,
        "device": "CPU (1 threads)",
    }


def _write(root, name, run):
    folder = runner.runs_folder(root, name)
    os.makedirs(folder, exist_ok=True)
    path = runner.run_path(folder, run["label"], run["seed"])
    with open(path, "w") as f:
        json.dump(run, f)


def _cells(page, first):
    return [
        [c.strip() for c in line.split("|")[1:-1]]
        for line in page.splitlines()
        if line.startswith(f"| {first} |")
    ]


def test_page_medians_pairs_and_holm_over_the_papers_whole_table(tmp_path):
    root = str(tmp_path)
    names = ["parec_table3_Beauty", "parec_table3_Toys"]
    ranks = {
        ("Beauty", "SASRec"): {2020: [2, 6, 9, 1, 60, 8], 2021: [3, 5, 7, 4, 12, 2],
                               2022: [1, 9, 11, 3, 30, 5]},
        ("Beauty", "PARec"): {2020: [1, 2, 5, 1, 45, 3], 2021: [1, 4, 2, 2, 9, 1],
                              2022: [2, 3, 8, 1, 20, 4]},
        ("Toys", "SASRec"): {2020: [4, 4, 12, 2, 8, 9], 2021: [5, 3, 10, 1, 9, 7]},
        ("Toys", "PARec"): {2020: [3, 5, 11, 2, 6, 9], 2021: [4, 2, 12, 1, 9, 6]},
    }  # fmt: skip
    for (dataset, label), of in ranks.items():
        for seed, r in of.items():
            _write(root, f"parec_table3_{dataset}", _run(label, seed, r))
    sections = [(studies.STUDIES[n], runner.runs_folder(root, n)) for n in names]
    page = reports.paper_tables_page(GROUP, sections)

    def value(metric, r):
        k = int(metric.split("@")[1])
        if metric.startswith("hit"):
            return float(r <= k)
        return 1.0 / math.log2(r + 1) if r <= k else 0.0

    def mean_of(rs, metric):
        return statistics.mean(value(metric, r) for r in rs)

    # the level: the median over seeds (the paper's), the paper's number and the ratio
    row = _cells(page, "PARec")[0]
    beauty = [
        mean_of(ranks["Beauty", "PARec"][s], "hit@10") for s in (2020, 2021, 2022)
    ]
    paper = studies.PAREC_TABLE3_PAPER["Beauty"]["PARec"]["hit@10"]
    centre = statistics.median(beauty)
    assert row[2] == (
        f"{centre:.4f} ± {statistics.stdev(beauty):.4f} "
        f"({paper:.4f}, {centre / paper:.2f})"
    )
    # the gains: per-seed relative gains, Holm over both datasets and both metrics
    pvalues = {}
    for dataset in ("Beauty", "Toys"):
        for metric in ("hit@10", "ndcg@10"):
            mine, base = ranks[dataset, "PARec"], ranks[dataset, "SASRec"]
            seeds = sorted(mine)
            a = [statistics.mean(value(metric, x) for x in u) for u in zip(*(mine[s] for s in seeds))]  # fmt: skip
            b = [statistics.mean(value(metric, x) for x in u) for u in zip(*(base[s] for s in seeds))]  # fmt: skip
            pvalues[dataset, metric] = float(stats.ttest_rel(a, b).pvalue)
    order = sorted(pvalues, key=pvalues.get)
    holm, running = {}, 0.0
    for i, key in enumerate(order):
        running = max(running, min(1.0, (len(order) - i) * pvalues[key]))
        holm[key] = running
    gains_rows = {(c[0], c[1], c[2]): c for c in _cells(page, "Beauty") + _cells(page, "Toys")}  # fmt: skip
    row = gains_rows["Beauty", "PARec", "SASRec"]
    gains = [
        100 * (mean_of(ranks["Beauty", "PARec"][s], "ndcg@10") / mean_of(ranks["Beauty", "SASRec"][s], "ndcg@10") - 1)  # fmt: skip
        for s in (2020, 2021, 2022)
    ]
    want = f"{round(statistics.mean(gains), 1) + 0.0:+.1f} ± {statistics.stdev(gains):.1f} %"
    assert row[4].startswith(want + f" (p {reports._p_text(holm['Beauty', 'ndcg@10'])}")
    assert row[4].endswith(" / -2.5 %")  # the paper's: .0395 against .0405
    toys = gains_rows["Toys", "PARec", "SASRec"]
    assert f"(p {reports._p_text(holm['Toys', 'hit@10'])}" in toys[3]
    # no SASRec (CE) run: no gain over it; the missing runs are listed
    assert gains_rows["Beauty", "PARec", "SASRec (CE)"][3] == "- / -"
    assert "PARec / FPARec, Table 3, Toys (SASRec 2022; SASRec (CE) 2020, 2021, 2022; PARec 2022; FPARec 2020, 2021, 2022)" in page  # fmt: skip


def test_borrowed_rows_and_the_choice_on_validation(tmp_path):
    root = str(tmp_path)
    _write(root, "stosa_table1_Beauty", _run("STOSA", 2020, [1, 3, 5, 2]))
    awrsr = studies.STUDIES["awrsr_table2_Beauty"]
    page = reports.paper_tables_page(
        GROUP, [(awrsr, runner.runs_folder(root, "awrsr_table2_Beauty"))]
    )
    assert _cells(page, "STOSA")[0][1] == "2020"  # the backbone run, borrowed
    rksa = studies.STUDIES["rksa_table2_Games"]
    _write(root, "rksa_table2_Games", _run("RKSA C", 2020, [1, 2], valid=0.31))
    _write(root, "rksa_table2_Games", _run("RKSA C", 2021, [1, 2], valid=0.33))
    _write(root, "rksa_table2_Games", _run("RKSA C+I+U", 2020, [1, 2], valid=0.325))
    page = reports.paper_tables_page(
        GROUP, [(rksa, runner.runs_folder(root, "rksa_table2_Games"))]
    )
    assert (
        "Chosen on validation (mean NDCG@10 over seeds: RKSA C 0.3200, RKSA C+I+U "
        "0.3250): **RKSA C+I+U** stands for the paper's model." in page
    )
