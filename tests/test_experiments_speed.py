"""``python -m experiments.speed --quick``: runs on its own tiny fixture and writes
well-formed markdown and CSV with every model (timings are never asserted)."""

import csv
import logging
import subprocess
import sys

import pytest
import torch

from recbole_attn.plugin import MODELS

from conftest import REPO


@pytest.fixture(scope="module")
def bench():
    from experiments import speed

    return speed


def read_outputs(stem):
    with open(stem + ".csv", newline="") as f:
        rows = list(csv.DictReader(f))
    with open(stem + ".md") as f:
        markdown = f.read()
    return rows, markdown


def check_tables(markdown, rows):
    """Every markdown table has a header, a separator and rows with as many cells."""
    tables, current = [], []
    for line in markdown.splitlines() + [""]:
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    assert tables
    for lines in tables:
        cells = [line.strip("|").split("|") for line in lines]
        assert len(lines) >= 3 and set(lines[1].replace("|", "")) == {"-"}
        assert all(len(c) == len(cells[0]) for c in cells)
    for row in rows:
        assert float(row["train_s"]) >= 0 and float(row["epoch_ratio"]) > 0
        assert float(row["peak_mb"]) >= 0
        assert f"| {row['variant']} |" in markdown
        assert int(row["repeats"]) == 1 and int(row["train_samples"]) > 0
        # the distance to the machine's limit (CPU runs): matmul FLOPs counted, their
        # rate against the peak measured in the run, the share of time in matmuls
        assert float(row["gflop"]) > 0 and float(row["gflops"]) > 0
        assert 0 < float(row["matmul_share"]) <= 1
        assert row["peak_share"].endswith(" %") and row["others"].count(" %") == 3
    assert "fp32 matmul peak, measured in this run" in markdown


@pytest.mark.slow
def test_quick_models_from_the_command_line(tmp_path):
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "experiments.speed", "--quick", f"--out={out}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows, markdown = read_outputs(str(out / "quick_models_tiny"))
    check_tables(markdown, rows)
    assert f"Command: `python -m experiments.speed --quick --out={out}`" in markdown
    assert "Machine: " in markdown and "torch " in markdown and "cores" in markdown
    assert {row["model"] for row in rows} == set(MODELS) | {"SASRec"}
    baseline = [row for row in rows if row["variant"] == "SASRecAP"]
    assert len(baseline) == 1 and float(baseline[0]["epoch_ratio"]) == 1.0
    assert {"STOSA, no grouping", "SASRecAP, no grouping"} <= {
        row["variant"] for row in rows
    }
    assert "Length grouping" in markdown


@pytest.mark.parametrize("curve,stem,key", [("T", "quick_curve_T_tiny", "T")])
def test_quick_curves(bench, tmp_path, curve, stem, key):
    try:
        bench.main(["--quick", f"--curve={curve}", f"--out={tmp_path}", "--no_memory"])
    finally:
        logging.getLogger().handlers.clear()
    rows, markdown = read_outputs(str(tmp_path / stem))
    assert {row[key] for row in rows} == {"6", "12"}
    assert {row["variant"] for row in rows} == set(bench.CURVE_LABELS)
    assert "## T = 6" in markdown and "## T = 12" in markdown
    assert all(row["peak_mb"] == "" for row in rows)


def test_quick_users_curve_subsamples(bench, tmp_path):
    try:
        bench.main(["--quick", "--curve=users", f"--out={tmp_path}", "--no_memory"])
    finally:
        logging.getLogger().handlers.clear()
    rows, markdown = read_outputs(str(tmp_path / "quick_curve_users"))
    users = {row["dataset"]: int(row["users"]) for row in rows}
    assert set(users) == {"tiny_u50", "tiny"}
    assert users["tiny_u50"] == 30 and users["tiny"] == 60
    assert "## dataset = tiny_u50" in markdown


def test_amp_variants_train_each_model_under_the_dtype_their_label_names(
    bench, tmp_path, monkeypatch
):
    """``--amp``: each model's variant again under autocast in each dtype, fp16 with
    RecBole's gradient scaler; each trains under its own dtype and leaves the process's
    default as it was; no FLOP pass with ``--no_flops``."""
    seen = []
    train_epoch = bench.Run.epoch

    def epoch(run, rep, device):
        original = run.trainer._train_epoch

        def recorded(*args, **kwargs):
            seen.append(
                (run.label, run.config["enable_amp"], torch.get_autocast_dtype("cpu"))
            )
            return original(*args, **kwargs)

        run.trainer._train_epoch = recorded
        try:
            return train_epoch(run, rep, device)
        finally:
            run.trainer._train_epoch = original

    monkeypatch.setattr(bench.Run, "epoch", epoch)
    default = torch.get_autocast_dtype("cpu")
    try:
        bench.main(
            ["--quick", "--only=PARec", "--amp=fp16,bf16", f"--out={tmp_path}"]
            + ["--no_memory", "--no_flops", "--name=amp"]
        )
    finally:
        logging.getLogger().handlers.clear()
    assert torch.get_autocast_dtype("cpu") == default
    rows, markdown = read_outputs(str(tmp_path / "amp"))
    assert [row["variant"] for row in rows] == [
        "SASRecAP",
        "PARec",
        "PARec, fp16 autocast",
        "PARec, bf16 autocast",
    ]
    assert set(seen) == {
        ("SASRecAP", False, default),
        ("PARec", False, default),
        ("PARec, fp16 autocast", True, torch.float16),
        ("PARec, bf16 autocast", True, torch.bfloat16),
    }
    assert all(row["gflop"] == "" for row in rows)
    assert "matmul peak" not in markdown
    with pytest.raises(SystemExit, match="'fp8' is not one of bf16, fp16"):
        bench.amp_variants(bench.parse_args(["--amp=fp8"]))
    fp16 = bench.amp_variants(bench.parse_args(["--amp=fp16"]))
    assert {label for label, _, _ in fp16} == {
        f"{label}, fp16 autocast" for label in bench.AMP_BASES
    }
    assert all(o["enable_scaler"] and o["enable_amp"] for _, _, o in fp16)
