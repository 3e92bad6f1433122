"""experiments/runner.py: one run of a study on the tiny fixture, and the ``rescore``
option (a run's best model scored under another ranking)."""

import argparse
import json
import os
import random
import statistics

import pytest

from conftest import REPO
from experiments import runner, studies


@pytest.fixture
def tiny_study(tiny_data_path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # run_one moves to a scratch folder
    name = "tiny_rescore"
    study = {
        "dataset": "tiny",
        "protocol": {
            "eval_args": studies.FULL,
            "eval_mask_history": False,
            **studies.HIT_METRICS,
            "epochs": 2,
            "stopping_step": 2,
            "load_col": {"inter": ["user_id", "item_id", "timestamp"]},
            "train_batch_size": 16,
            "eval_batch_size": 64,
            "hidden_size": 16,
            "inner_size": 32,
            "n_layers": 1,
            "n_heads": 2,
            "MAX_ITEM_LIST_LENGTH": 12,
        },
        "columns": ["hit@5", "ndcg@5", "hit@10", "ndcg@10"],
        "baseline": "SASRec",
        "variants": {"SASRec": ("SASRecAP", {})},
        "rescore": {"uni100": studies.UNI100, "full": studies.FULL},
        "paper": "none (test fixture)",
    }
    monkeypatch.setitem(studies.STUDIES, name, study)
    args = argparse.Namespace(
        data_path=tiny_data_path,
        device="cpu",
        epochs=None,
        stopping_step=None,
        threads=None,
    )
    return name, args


@pytest.mark.slow
def test_rescore_scores_the_best_model_under_other_rankings(tiny_study, tmp_path):
    name, args = tiny_study
    result = runner.run_one(name, "SASRec", 2020, args)
    # new runs and stored runs mix in one report: a run written today has every key of
    # the newest stored runs (the reproduce group's PAtt reruns have them all)
    stored = runner.runs_folder(runner.HERE, "reproduce_Office")
    with open(runner.run_path(stored, "PAtt", 2020)) as f:
        assert set(result) == set(json.load(f)) | {
            "rescored",
            "valid_curve",
            "test_ranks",
            "stack",
        }
    assert result["epochs_run"] == 2 and 1 <= result["best_epoch"] <= 2
    full, uni100 = result["rescored"]["full"], result["rescored"]["uni100"]
    # the same model under the same ranking: exactly the run's own test
    assert full == pytest.approx(result["test"], abs=1e-12)
    # ranking the target among 100 sampled items is ranking it within a subset of all
    # items: it can only rise, so every Hit@K is at least the full-ranking one
    for k in (5, 10):
        assert uni100[f"hit@{k}"] >= full[f"hit@{k}"]
    # and on this fixture strictly (NDCG@10 moves with any rank in the top 10; Hit@10 only
    # when a target crosses 10, which torch 2.6's dropout stream does not make it do)
    assert uni100["ndcg@10"] > full["ndcg@10"]

    # runs from before the option get it afterwards (where the model file still exists),
    # and the report shows a second table
    folder = tmp_path / "results" / name / "runs"
    folder.mkdir(parents=True)
    old = {k: v for k, v in result.items() if k != "rescored"}  # a run from before
    gone = dict(old, seed=2021, model_file=str(tmp_path / "deleted.pth"))
    for run in (old, gone):
        with open(runner.run_path(str(folder), run["label"], run["seed"]), "w") as f:
            json.dump(run, f)
    missing = runner.rescore_missing(name, str(folder))
    assert missing == ["SASRec seed 2021 (model file gone)"]
    with open(runner.run_path(str(folder), "SASRec", 2020)) as f:
        filled = json.load(f)
    assert filled["rescored"]["uni100"] == pytest.approx(
        result["rescored"]["uni100"], abs=1e-12
    )
    text = runner.report(name, root=str(tmp_path / "results"))
    assert "test ranked with uni100" in text
    uni_row = f"| SASRec | 1 | {filled['rescored']['uni100']['hit@5']:.4f} |"
    assert uni_row in text
    # the report sits beside the study's runs
    assert (tmp_path / "results" / name / "report.md").read_text() == text


@pytest.mark.slow
def test_progress_prints_every_epoch(tiny_study, capsys):
    name, args = tiny_study
    args.progress = True
    result = runner.run_one(name, "SASRec", 2020, args)
    lines = [l for l in capsys.readouterr().out.splitlines() if " epoch " in l]
    assert len(lines) == result["epochs_run"] == 2
    assert lines[0].startswith(f"{name}: SASRec seed 2020 epoch 0 valid ")


def test_external_rows_come_first_with_their_command():
    """A study's ``external`` rows (runs another script stored, e.g. an official code's)
    are reported before its variants, and the report names their command."""
    from experiments import reports

    study = {
        "dataset": "tiny",
        "protocol": {
            "eval_args": studies.FULL,
            "eval_mask_history": True,
            "valid_metric": "NDCG@5",
            "epochs": 3,
            "stopping_step": 2,
        },
        "columns": ["ndcg@5"],
        "baseline": "ours",
        "variants": {"ours": ("PAtt", {})},
        "external": {"official": {"model": "theirs", "command": "python theirs.py"}},
        "paper": "none (test fixture)",
    }

    def run(label, value):
        return {
            "label": label,
            "seed": 1,
            "test": {"ndcg@5": value},
            "best_valid": {"ndcg@5": value},
            "seconds_per_epoch": 2.0,
            "best_epoch": 1,
            "epochs_run": 3,
            "device": "CPU (1 threads)",
            "config": {},
        }

    text = reports.study_table("tiny", study, [run("ours", 0.1), run("official", 0.2)])
    rows = [
        l
        for l in text.splitlines()
        if l.startswith("| official") or l.startswith("| ours")
    ]
    assert [r.split(" | ")[0] for r in rows] == ["| official", "| ours"]
    assert "official: `python theirs.py`" in text


def test_unknown_variant_is_an_error_not_an_empty_plan(tiny_study, tmp_path):
    """A --variants label that no selected study declares (a typo, or a label cut at its
    comma) stops the runner with the study's labels, instead of training nothing."""
    name, args = tiny_study
    args.variants = "SASRec,SASRec (BCE"
    args.seeds = [2020]
    with pytest.raises(SystemExit, match=r"'SASRec \(BCE'.*its variants: SASRec"):
        runner.plan([name], args, str(tmp_path))
    args.variants = "SASRec"
    jobs = runner.plan([name], args, str(tmp_path))
    assert [(job[2], job[3]) for job in jobs] == [("SASRec", 2020)]


@pytest.mark.slow
def test_a_run_keeps_its_users_ranks_and_they_give_its_metrics(tiny_study):
    """The per-user ranks a run stores recompute its test metrics exactly, and the
    validation ranks (``valid_ranks``) its best validation metrics."""
    from experiments import reports

    name, args = tiny_study
    studies.STUDIES[name]["valid_ranks"] = True  # the fixture's own copy (setitem)
    result = runner.run_one(name, "SASRec", 2020, args)
    valid = {**result, "test_ranks": result["valid_ranks"]}
    for metric in ("hit@10", "ndcg@10"):
        values = reports.user_values(valid, metric)
        assert round(sum(values) / len(values), 4) == result["best_valid"][metric]
    stored = result["test_ranks"]
    assert stored["cap"] == 11 and len(stored["ranks"]) == 60  # users of tiny
    import torch

    assert result["stack"]["torch"] == torch.__version__  # the build that computed it
    for metric in ("hit@5", "hit@10", "ndcg@5", "ndcg@10"):
        values = reports.user_values(result, metric)
        assert round(sum(values) / len(values), 4) == result["test"][metric], metric
    assert reports.user_values(result, "ndcg@20") is None  # past the cap


@pytest.mark.slow
def test_a_sampled_ranking_run_keeps_the_ranks_of_its_own_test(tiny_study, monkeypatch):
    """Under 100 sampled negatives (RKSA's protocol) the stored ranks are those of the
    very evaluation that gave the test metrics (its negatives are drawn once): they
    recompute them exactly, and say which ranking they are."""
    from experiments import reports

    name, args = tiny_study
    study = dict(studies.STUDIES[name])
    study["protocol"] = {**study["protocol"], "eval_args": studies.UNI100}
    study.pop("rescore")
    monkeypatch.setitem(studies.STUDIES, name, study)
    result = runner.run_one(name, "SASRec", 2020, args)
    stored = result["test_ranks"]
    assert stored["ranking"] == "uni100" and len(stored["ranks"]) == 60
    assert max(stored["ranks"]) <= 11 and min(stored["ranks"]) >= 1
    for metric in ("hit@5", "hit@10", "ndcg@5", "ndcg@10"):
        values = reports.user_values(result, metric)
        assert round(sum(values) / len(values), 4) == result["test"][metric], metric


def test_reports_pair_users_averaged_over_seeds():
    """The reports' paired test over users is scipy's on the seed-averaged values;
    Holm marks as a hand computation gives them."""
    from scipy import stats

    from experiments import reports

    stored = {"cap": 11, "data": {"fingerprint": "x"}}

    def fake(seed, ranks):
        return {"seed": seed, "test_ranks": {**stored, "ranks": ranks}}

    rng = random.Random(0)
    a = {s: fake(s, [rng.randint(1, 11) for _ in range(60)]) for s in (1, 2)}
    b = {s: fake(s, [rng.randint(1, 11) for _ in range(60)]) for s in (1, 2)}
    ranks = a[1]["test_ranks"]["ranks"]
    assert reports.user_values(a[1], "recall@5") == [float(r <= 5) for r in ranks]
    assert reports.user_values(a[1], "mrr@10") == [
        1 / r if r <= 10 else 0 for r in ranks
    ]

    def mean(side):
        values = [reports.user_values(side[s], "ndcg@10") for s in (1, 2)]
        return [statistics.mean(v) for v in zip(*values)]

    want = stats.ttest_rel(mean(a), mean(b)).pvalue
    assert reports.paired_p(a, b, "ndcg@10") == pytest.approx(want)
    assert reports.paired_p(a, {1: {"seed": 1}}, "ndcg@10") is None  # an older run
    marks = reports.holm_marks({"x": 0.01, "y": 0.04, "z": None})
    assert marks == {"x": " (p .020*)", "y": " (p .040*)", "z": ""}


@pytest.mark.parametrize(
    "group", [g for g, d in studies.GROUPS.items() if d["report"] in runner.PAGES]
)
def test_stored_group_pages_and_docs_blocks_are_what_the_runner_writes(group):
    """A group's stored report.md (stosa_table1, paper_tables, stosa_tuned) and its
    block of docs/results.md are what ``--group=<group> --report`` writes from the
    stored runs: no page is typed."""
    from experiments import reports

    write_page, what, block = runner.PAGES[studies.GROUPS[group]["report"]]
    sections = [
        (studies.STUDIES[n], runner.runs_folder(runner.HERE, n))
        for n in studies.GROUPS[group]["studies"]
    ]
    text = write_page(group, sections, runner.HERE)
    with open(os.path.join(runner.HERE, group, "report.md")) as f:
        assert text == f.read()
    with open(os.path.join(os.path.dirname(runner.HERE), runner.RESULTS_PAGE)) as f:
        page = f.read()
    markers = reports.docs_markers(group, what, option="--group")
    assert markers[0] in page
    assert reports.with_docs_block(page, markers, block(text), group) == page


def test_ctrl_c_stops_the_running_runs_and_says_what_is_kept(tmp_path):
    """SIGINT to the runner alone (``pkill -INT -f experiments.runner``: its workers
    are not signalled): before, a traceback, and the worker trained on to its end.
    Now the workers are stopped, and one line says what is kept (rc 130)."""
    import signal
    import subprocess
    import sys
    import time

    (tmp_path / "slow_work.py").write_text(
        "import os, time\n"
        "def work(job):\n"
        "    with open(job, 'w') as f:\n"
        "        f.write(str(os.getpid()))\n"
        "    time.sleep(120)\n"
    )
    started = tmp_path / "started"
    driver = (
        "import sys\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "import slow_work\n"
        "from experiments import runner\n"
        "runner._work = slow_work.work\n"
        f"runner.execute([{str(started)!r}], 1)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", driver],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    worker = None
    try:
        deadline = time.monotonic() + 60
        while not (started.exists() and started.read_text()):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the worker never started"
            time.sleep(0.1)
        worker = int(started.read_text())
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        try:
            os.kill(worker, 0)
            worker_alive = True  # training on, orphaned
        except ProcessLookupError:
            worker_alive = False
    finally:  # nothing left behind, whatever failed
        for pid in (proc.pid, worker):
            if pid is not None:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        proc.wait()
    assert proc.returncode == 130, err
    assert err == (
        "stopped: 0 of 1 runs finished and kept; the running ones are dropped; the "
        "same command runs the rest\n"
    ), err
    assert not worker_alive, "the worker trains on after the runner stopped"
