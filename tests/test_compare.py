"""Per-user results (``evaluate --per_user``) and ``recbole-attn compare``: the per-user
values average to the printed metrics, the paired statistics against scipy and a
brute-force permutation, Holm and Benjamini-Hochberg against hand computations, and
inputs that cannot be compared refused in one line (issue 43)."""

import csv
import itertools
import json
import logging
import math
import os

import numpy as np
import pytest
from scipy import stats

from conftest import TINY_MODEL
from recbole_attn.cli import main as cli_main
from recbole_attn.compare import benjamini_hochberg, compare, holm, paired
from recbole_attn.evaluator.per_user import MARK, read_per_user
from recbole_attn.quick_start import run

LOAD = {"inter": ["user_id", "item_id", "timestamp"], "item": ["item_id", "categories"]}
METRICS = [
    "Recall",
    "NDCG",
    "MRR",
    "Hit",
    "Precision",
    "MAP",
    "CC",
    "ILD",
    "AveragePopularity",
    "TailPercentage",
]


def main(argv, capsys):
    try:
        code = cli_main(argv)
    except SystemExit as exit:
        code = exit.code
    out = capsys.readouterr()
    return code, out.out, out.err


# ---------------------------------------------------------------------- statistics


def test_holm_and_bh_against_hand_computations():
    p = [0.01, 0.04, 0.03, 0.005]
    # Holm: sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 -> 0.02, 0.03, 0.06, 0.04,
    # made monotone -> 0.02, 0.03, 0.06, 0.06
    assert holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # BH: sorted times 4/1, 4/2, 4/3, 4/4 -> 0.02, 0.02, 0.04, 0.04, monotone from the top
    assert benjamini_hochberg(p) == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert holm([0.6, 0.9]) == [1.0, 1.0] and benjamini_hochberg([0.6, 0.9]) == [
        0.9,
        0.9,
    ]
    assert holm([]) == [] and benjamini_hochberg([0.2]) == [0.2]


def test_paired_statistics_against_scipy_and_a_permutation_test():
    rng = np.random.default_rng(1)
    base = rng.random(12)
    other = base + rng.normal(0.08, 0.1, 12)
    got = paired(base, other)
    diff = other - base
    assert got["difference"] == pytest.approx(diff.mean())
    assert got["relative"] == pytest.approx(diff.mean() / base.mean())
    assert got["p_t"] == pytest.approx(stats.ttest_rel(other, base).pvalue)
    assert got["p_wilcoxon"] == pytest.approx(stats.wilcoxon(diff).pvalue)
    # the t interval by its formula
    half = stats.t.ppf(0.975, 11) * diff.std(ddof=1) / math.sqrt(12)
    assert got["ci95"] == pytest.approx([diff.mean() - half, diff.mean() + half])
    # an exact sign-flip permutation test of the mean difference is close to the t-test
    signs = np.array(list(itertools.product((1, -1), repeat=12)))
    flipped = np.abs((signs * diff).mean(axis=1))
    exact = float(np.mean(flipped >= abs(diff.mean()) - 1e-12))
    assert abs(exact - got["p_t"]) < 0.02
    # no difference at all: nothing to test; users missing in one model are left out
    assert paired(base, base)["p_t"] == 1.0 and paired(base, base)["p_wilcoxon"] == 1.0
    with_gap = other.copy()
    with_gap[0] = np.nan
    assert paired(base, with_gap)["users"] == 11


# ---------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def two_models(tiny_data_path, tmp_path_factory):
    root = tmp_path_factory.mktemp("compare")
    cwd = os.getcwd()
    os.chdir(root)
    files = {}
    try:
        for model, seed in (("SASRecAP", 1), ("STOSA", 2)):
            config = {
                "data_path": tiny_data_path,
                "load_col": LOAD,
                "epochs": 2,
                "train_batch_size": 16,
                "checkpoint_dir": str(root / "saved"),
                "state": "ERROR",
                "seed": seed,
                **TINY_MODEL,
            }
            files[model] = run(model, "tiny", config_dict=config)["saved_model_file"]
    finally:
        os.chdir(cwd)
        logging.getLogger().handlers.clear()
    return files


def test_per_user_values_average_to_the_printed_metrics(two_models, tmp_path, capsys):
    out = tmp_path / "sasrec.csv"
    code, stdout, err = main(
        [
            "evaluate",
            f"--model_file={two_models['SASRecAP']}",
            f"--per_user={out}",
            f"--metrics={METRICS}",
            "--topk=[1,5,10]",
            "--state=ERROR",
        ],
        capsys,
    )
    assert code == 0, err
    printed = eval(stdout.split("test: ", 1)[1].splitlines()[0])
    assert out.read_text().startswith(MARK)
    meta, header, rows = read_per_user(str(out))
    assert meta["model"] == "SASRecAP" and meta["split"] == "test"
    assert header[:2] == ["user", "rank"] and len(rows) == len({r[0] for r in rows})
    assert {"averagepopularity@5", "tailpercentage@10", "map@5"} <= set(header)
    for column in header[2:]:
        values = [
            float(r[header.index(column)]) for r in rows if r[header.index(column)]
        ]
        mean = sum(values) / len(values) if values else 0.0  # ILD: no user
        assert round(mean, 4) == printed[column], column
    # the rank is the target's place in the full ranking: recall@k = [rank <= k]
    for row in rows:
        rank = int(row[1])
        for k in (1, 5, 10):
            assert float(row[header.index(f"recall@{k}")]) == float(rank <= k)
            want = 1 / math.log2(rank + 1) if rank <= k else 0.0
            assert float(row[header.index(f"ndcg@{k}")]) == pytest.approx(want)
    assert "f1@5" not in header


def test_compare_two_models_from_their_files_and_checkpoints(
    two_models, tmp_path, capsys
):
    files = []
    for model in ("SASRecAP", "STOSA"):
        path = tmp_path / f"{model}.csv"
        code, _, err = main(
            ["evaluate", f"--model_file={two_models[model]}", f"--per_user={path}"],
            capsys,
        )
        assert code == 0, err
        files.append(str(path))
    output = tmp_path / "cmp.json"
    code, stdout, err = main(
        ["compare", *files, "--metrics=ndcg@10,recall@10", f"--output={output}"], capsys
    )
    assert code == 0, err
    assert "baseline: SASRecAP" in stdout and "ndcg@10" in stdout
    result = json.loads(output.read_text())
    assert [r["metric"] for r in result["rows"]] == ["ndcg@10", "recall@10"]
    # the numbers are those of the per-user files
    _, header, base_rows = read_per_user(files[0])
    _, _, other_rows = read_per_user(files[1])
    col = header.index("ndcg@10")
    base = np.array([float(r[col]) for r in sorted(base_rows)])
    other = np.array([float(r[col]) for r in sorted(other_rows)])
    row = result["rows"][0]
    assert row["baseline"] == pytest.approx(base.mean())
    assert row["mean"] == pytest.approx(other.mean())
    assert row["p_t"] == pytest.approx(stats.ttest_rel(other, base).pvalue)
    assert [r["p_t_holm"] for r in result["rows"]] == holm(
        [r["p_t"] for r in result["rows"]]
    )
    # checkpoints are evaluated on the spot, with the same result
    direct = compare([two_models["SASRecAP"], two_models["STOSA"]], ["ndcg@10"])
    assert direct["rows"][0]["p_t"] == pytest.approx(row["p_t"])


def test_inputs_that_cannot_be_compared_are_one_line(two_models, tmp_path, capsys):
    path = tmp_path / "a.csv"
    code, _, err = main(
        ["evaluate", f"--model_file={two_models['SASRecAP']}", f"--per_user={path}"],
        capsys,
    )
    assert code == 0, err
    text = path.read_text()
    fewer = tmp_path / "fewer.csv"
    fewer.write_text("\n".join(text.splitlines()[:-3]) + "\n")
    other_data = tmp_path / "other.csv"
    meta = json.loads(text.splitlines()[0][len(MARK) :])
    meta["data"]["fingerprint"] = "0" * 16
    other_data.write_text(
        MARK + json.dumps(meta) + "\n" + "\n".join(text.splitlines()[1:]) + "\n"
    )
    not_ours = tmp_path / "plain.csv"
    not_ours.write_text("user,rank\nu1,3\n")
    cases = [
        ([str(path), str(fewer)], "have other users"),
        ([str(path), str(other_data)], "were not evaluated alike: data is"),
        ([str(path), str(not_ours)], "is not a per-user file"),
        ([str(path)], "at least two inputs"),
        ([str(path), str(path), "--metrics=f1@5"], "are not in every input"),
        ([str(path), str(tmp_path / "none.csv")], "not found"),
    ]
    for argv, fragment in cases:
        code, _, err = main(["compare", *argv], capsys)
        assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
        assert fragment in err, err
