"""``python -m experiments.scale --quick``: every model with the sampled softmax and CE on
two tiny synthetic catalogues, each run in its own process, stored and reported (timings
and memory are never asserted); the stored report is what its runs give."""

import os
import subprocess
import sys

import pytest

from conftest import REPO
from experiments import scale


def _quick(out, data):
    """``python -m experiments.scale --quick`` with two models on one catalogue."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.scale",
            "--quick",
            "--threads=1",
            f"--out={out}",
            f"--data_path={data}",
            "--models=SASRecAP,DPAtt",
            "--items=300",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.mark.slow
def test_quick_scale_runs_and_reports(tmp_path):
    out, data = tmp_path / "out", tmp_path / "data"
    done = _quick(out, data)
    assert done.returncode == 0, done.stderr[-3000:]
    runs = scale.load_runs(str(out))
    assert len(runs) == 2 * 2  # models x losses
    assert all(r["finished"] for r in runs), [r.get("why") for r in runs]
    for r in runs:
        assert r["n_items"] == r["items"] + 1  # the whole catalogue, and padding
        assert r["peak_rss_mb"] >= r["peak_rss_mb_after_build"] > 0
        assert 0 <= r["test"]["ndcg@10"] <= 1 and 0 < r["test"]["cc@10"] <= 1
    report = (out / "report.md").read_text()
    assert report == scale.report_text(runs, report.split("by `")[1].split("`")[0])
    assert report.count("| SASRecAP |") == 2 and (out / "scale.png").is_file()
    # resumable: a second invocation finds every run stored and trains nothing
    again = _quick(out, data)
    assert again.returncode == 0 and "epoch" not in again.stdout.split("# Every")[0]


@pytest.mark.slow
def test_a_failed_run_is_stored_with_its_reason():
    record = scale.run_in_process(
        {
            "label": "SASRecAP",
            "loss": "CE",
            "items": 10,
            "negatives": 1,
            "dataset": "missing",
            "data_path": "/nonexistent",
            "threads": 1,
        },
        timeout=300,
    )
    assert record["finished"] is False and record["why"].startswith("exit ")


def test_stored_report_is_what_its_runs_give():
    runs = scale.load_runs(scale.HERE)
    path = os.path.join(scale.HERE, "report.md")
    if not runs:
        return
    with open(path) as f:
        stored = f.read()
    command = stored.split("by `")[1].split("`")[0]
    assert stored == scale.report_text(runs, command)
