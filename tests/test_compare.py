"""Per-user results (``evaluate --per_user``) and ``recbole-attn compare``: the per-user
values average to the printed metrics, the paired statistics against scipy and a
brute-force permutation, Holm and Benjamini-Hochberg against hand computations, and
inputs that cannot be compared refused in one line (issue 43); degenerate differences as
scipy computes them, hand-edited files checked, outputs strict JSON or CSV, every output
checked before the work, the file plain CSV that pandas reads, and compare of files
without torch or RecBole (issue 53)."""

import csv
import itertools
import json
import logging
import math
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from conftest import TINY_MODEL
from recbole_attn.cli import main as cli_main
from conftest import REPO
from recbole_attn.commands.compare import (
    adjusted,
    benjamini_hochberg,
    compare,
    holm,
    paired,
)
from recbole_attn.per_user_file import FORMAT, MARK, meta_path, read_per_user
from recbole_attn.engine.quick_start import run

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
    assert benjamini_hochberg(p) == pytest.approx(
        list(stats.false_discovery_control(p, method="bh"))
    )
    # an undefined p-value (NaN) stays undefined and is not one of the family
    got = adjusted([0.01, float("nan"), 0.04], "holm")
    assert got[0] == pytest.approx(0.02) and got[2] == pytest.approx(0.04)
    assert math.isnan(got[1])


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
    # no difference at all: scipy's t-test is undefined, its Wilcoxon p is 1; users
    # missing in one model are left out
    same = paired(base, base)
    assert math.isnan(same["p_t"]) and math.isnan(stats.ttest_rel(base, base).pvalue)
    assert same["p_wilcoxon"] == 1.0
    try:  # scipy >= 1.15 defines this p as 1; 1.13 (the oldest stack) raises
        assert stats.wilcoxon(base - base).pvalue == 1.0
    except ValueError:
        pass
    with_gap = other.copy()
    with_gap[0] = np.nan
    assert paired(base, with_gap)["users"] == 11


def test_differences_that_are_all_equal_are_tested_as_scipy_tests_them():
    """Every user one better by the same amount: before, p = 1 (no variation: nothing
    to test); scipy's t-test gives p ~ 0, its exact Wilcoxon 2 / 2^10."""
    base = np.linspace(0.05, 0.9, 10)
    other = base + 0.1
    got = paired(base, other)
    assert got["p_t"] == stats.ttest_rel(other, base).pvalue and got["p_t"] < 1e-10
    assert got["p_wilcoxon"] == stats.wilcoxon(other - base).pvalue
    assert got["p_wilcoxon"] == pytest.approx(2 / 2**10)
    assert got["ci95"] == pytest.approx([0.1, 0.1])


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
    meta, header, rows = read_per_user(str(out))
    assert meta["model"] == "SASRecAP" and meta["split"] == "test"
    assert header[:2] == ["user", "rank"] and len(rows) == len({r[0] for r in rows})
    # plain CSV, as standard readers read it; what was evaluated is beside it
    with open(out, newline="") as f:
        assert next(csv.reader(f)) == header
    frame = pd.read_csv(out)
    assert list(frame.columns) == header and len(frame) == len(rows)
    assert frame["ndcg@10"].mean() == pytest.approx(printed["ndcg@10"], abs=5e-5)
    with open(meta_path(out)) as f:
        assert json.load(f) == {"format": FORMAT, **meta}
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
    text, meta_text = path.read_text(), open(meta_path(path)).read()
    fewer = tmp_path / "fewer.csv"
    fewer.write_text("\n".join(text.splitlines()[:-3]) + "\n")
    open(meta_path(fewer), "w").write(meta_text)
    other_data = tmp_path / "other.csv"
    meta = json.loads(meta_text)
    meta["data"]["fingerprint"] = "0" * 16
    other_data.write_text(text)
    open(meta_path(other_data), "w").write(json.dumps(meta))
    not_ours = tmp_path / "plain.csv"
    not_ours.write_text("user,rank\nu1,3\n")
    cases = [
        ([str(path), str(fewer)], "have other users"),
        ([str(path), str(other_data)], "were not evaluated alike: data is"),
        ([str(path), str(not_ours)], "no plain.csv.json beside it"),
        ([str(path)], "at least two inputs"),
        ([str(path), str(path), "--metrics=f1@5"], "are not in every input"),
        ([str(path), str(tmp_path / "none.csv")], "not found"),
    ]
    for argv, fragment in cases:
        code, _, err = main(["compare", *argv], capsys)
        assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
        assert fragment in err, err


# ---------------------------------------------------------------------- the files (issue 53)

META = {
    "data": {"dataset": "toy", "fingerprint": "f" * 16, "n_items": 9, "n_users": 7},
    "dataset": "toy",
    "eval_mask_history": False,
    "model": "A",
    "split": "test",
}


def write_table(path, header, rows, meta=None, layout="sidecar"):
    """A per-user file written by hand: the current layout (CSV + FILE.json) or the
    first one (the metadata in line 1)."""
    text = "\n".join(",".join(str(c) for c in row) for row in [header, *rows]) + "\n"
    meta = {**META, **(meta or {})}
    if layout == "first line":
        text = MARK + json.dumps(meta) + "\n" + text
    else:
        with open(meta_path(path), "w") as f:
            json.dump({"format": FORMAT, **meta}, f)
    with open(path, "w") as f:
        f.write(text)
    return str(path)


def toy_pair(tmp_path, other_ndcg=None, base_layout="sidecar"):
    """Two per-user files over six users: ild@10 and cc@10 (values of their own: not
    of the rank, as ndcg@10 and recall@10 are)."""
    header = ["user", "rank", "ild@10", "cc@10"]
    base = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    other = other_ndcg or [0.2, 0.2, 0.5, 0.3, 0.9, 0.7]
    rows = lambda values: [  # noqa: E731
        [f"u{i}", 3, v, 1.0 if i % 2 else 0.0] for i, v in enumerate(values)
    ]
    a = write_table(tmp_path / "a.csv", header, rows(base), layout=base_layout)
    b = write_table(tmp_path / "b.csv", header, rows(other), {"model": "B"})
    return a, b


def test_equal_differences_and_none_at_all_through_the_command(tmp_path, capsys):
    """The issue's case through compare: ild@10 of every user 0.1 better (p = 1
    before), cc@10 identical (no test scipy can compute: undefined, null in the
    JSON, left out of the correction's family)."""
    a, b = toy_pair(tmp_path, [v + 0.1 for v in [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]])
    output = tmp_path / "cmp.json"
    code, stdout, err = main(["compare", a, b, f"--output={output}"], capsys)
    assert code == 0, err
    text = output.read_text()

    def refuse(constant):
        raise AssertionError(f"not strict JSON: {constant}")

    result = json.loads(text, parse_constant=refuse)
    ndcg, recall = result["rows"]
    base = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    assert ndcg["p_t"] == pytest.approx(stats.ttest_rel(base + 0.1, base).pvalue)
    assert ndcg["p_wilcoxon"] == pytest.approx(stats.wilcoxon([0.1] * 6).pvalue)
    assert ndcg["p_wilcoxon"] == pytest.approx(2 / 2**6) and ndcg["significant"]
    assert recall["p_t"] is None and recall["p_t_holm"] is None
    assert recall["p_wilcoxon"] == 1.0 and not recall["significant"]
    # the family is the one defined test: Holm leaves its p as it is
    assert ndcg["p_t_holm"] == pytest.approx(ndcg["p_t"])
    assert "nan" in stdout  # the table says the t-test is undefined
    # CSV: an undefined number is an empty cell
    code, _, err = main(["compare", a, b, f"--output={tmp_path / 'cmp.csv'}"], capsys)
    frame = pd.read_csv(tmp_path / "cmp.csv")
    assert code == 0 and frame["p_t"].isna().tolist() == [False, True], err


HEADER = ["user", "rank", "ndcg@10", "recall@10"]
GOOD = [["u1", 3, 0.5, 1.0], ["u2", 12, 0.0, 0.0], ["u3", 1, 1.0, 1.0]]

#: hand-edited files: (header, rows, the error's words); each was accepted before
#: (changing the means), or a traceback
EDITED = {
    "nan": (HEADER, [GOOD[0], ["u2", 12, "nan", 0.0]], "ndcg@10 'nan' is not a finite"),
    "inf": (HEADER, [GOOD[0], ["u2", 12, "inf", 0.0]], "ndcg@10 'inf' is not a finite"),
    "above its range": (HEADER, [GOOD[0], ["u2", 12, 1.5, 0.0]], "outside [0, 1]"),
    "below its range": (HEADER, [GOOD[0], ["u2", 12, 0.5, -0.1]], "outside [0, 1]"),
    "a user twice": (HEADER, GOOD + [["u1", 3, 0.5, 1.0]], "user u1 again (first on"),
    "a column twice": (
        HEADER + ["ndcg@10"],
        [r + [0.1] for r in GOOD],
        "the column ndcg@10 appears 2 times",
    ),
    "a short row": (HEADER, [GOOD[0], ["u2", 12, 0.5]], "line 3: 3 cells where"),
    "a word": (HEADER, [GOOD[0], ["u2", 12, "high", 0.0]], "'high' is not a finite"),
    "rank 0": (HEADER, [GOOD[0], ["u2", 0, 0.5, 0.0]], "rank '0' is not an integer"),
    # each row's top-K values follow from its rank: one edited value moved the mean
    "a value its rank does not give": (
        HEADER + ["ndcg@20"],
        [[*r, 1 / math.log2(r[1] + 1) if r[1] <= 20 else 0] for r in GOOD[:1]]
        + [["u2", 172, 0.5, 0.0, 0.0]],
        "line 3: ndcg@10 0.5 disagrees with the row's rank 172, which gives 0;",
    ),
    "a hit its rank does not give": (
        HEADER,
        [GOOD[0], ["u2", 12, 0.0, 1.0]],
        "recall@10 1.0 disagrees with the row's rank 12, which gives 0;",
    ),
    "no user": (HEADER, [], "holds 0 user(s); a paired test over users needs at"),
    "one user": (HEADER, GOOD[:1], "holds 1 user(s)"),
}


@pytest.mark.parametrize("case", list(EDITED))
def test_a_hand_edited_file_is_one_line(case, tmp_path, capsys):
    header, rows, words = EDITED[case]
    good = write_table(tmp_path / "good.csv", HEADER, GOOD)
    edited = write_table(tmp_path / "edited.csv", header, rows, {"model": "B"})
    code, stdout, err = main(["compare", good, edited], capsys)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    assert words in err and stdout == "", err


def test_metadata_that_is_not_an_object_or_missing_is_one_line(tmp_path, capsys):
    good = write_table(tmp_path / "good.csv", HEADER, GOOD)
    first = tmp_path / "first.csv"
    first.write_text(MARK + "[1, 2]\nuser,rank\nu1,3\n")
    broken = tmp_path / "broken.csv"
    broken.write_text(MARK + "{not json\nuser,rank\nu1,3\n")
    alone = write_table(tmp_path / "alone.csv", HEADER, GOOD)
    os.remove(meta_path(alone))
    foreign = write_table(tmp_path / "foreign.csv", HEADER, GOOD)
    with open(meta_path(foreign), "w") as f:
        json.dump([1, 2], f)
    cases = [
        (meta_path(good), "it is the metadata of"),
        (first, "its first line holds a JSON list, not an object"),
        (broken, "its first line is not JSON"),
        (alone, "no alone.csv.json beside it"),
        (foreign, "is not its metadata"),
    ]
    for path, words in cases:
        code, _, err = main(["compare", good, str(path)], capsys)
        assert code == 2 and err.count("\n") == 1 and words in err, err


def test_a_metric_named_twice_is_refused(tmp_path, capsys):
    a, b = toy_pair(tmp_path)
    code, _, err = main(["compare", a, b, "--metrics=ild@10,ILD@10"], capsys)
    assert code == 2 and "--metrics names ild@10 2 times" in err, err


def test_files_of_the_first_layout_are_still_read(tmp_path, capsys):
    """Per-user files written before the metadata moved beside them (their first line
    '# recbole-attn per-user results {...}') compare with new ones."""
    a, b = toy_pair(tmp_path, base_layout="first line")
    assert open(a).read().startswith(MARK) and not os.path.exists(meta_path(a))
    meta, header, rows = read_per_user(a)
    assert meta["model"] == "A" and header[:2] == ["user", "rank"] and len(rows) == 6
    code, stdout, err = main(["compare", a, b, "--metrics=ild@10"], capsys)
    assert code == 0 and "baseline: A (a)" in stdout, err


OUTPUTS = {
    "no extension": ("cmp", "written as JSON (.json) or CSV (.csv)"),
    "a spreadsheet": ("cmp.xlsx", "written as JSON (.json) or CSV (.csv)"),
    "a folder": ("folder.json", "folder.json is a folder; give a file name"),
    "under a file": ("file.txt/cmp.json", "file.txt is a file, not a folder"),
    "an existing file": ("old.json", "would replace"),
}


@pytest.mark.parametrize("case", list(OUTPUTS))
def test_an_output_that_cannot_be_written_is_refused_before_the_work(
    case, tmp_path, capsys
):
    """Checked first: the inputs here do not exist, so the output's error proves that
    nothing was read or evaluated (before: CSV under any other name, and 'is a
    folder' only after the work, with --overwrite)."""
    (tmp_path / "folder.json").mkdir()
    (tmp_path / "file.txt").write_text("x\n")
    (tmp_path / "old.json").write_text("{}\n")
    name, words = OUTPUTS[case]
    argv = ["compare", "none1.csv", "none2.csv", f"--output={tmp_path / name}"]
    for extra in ([], ["--overwrite"]) if case != "an existing file" else ([],):
        code, _, err = main(argv + extra, capsys)
        assert code == 2 and err.count("\n") == 1 and words in err, err
    assert (tmp_path / "old.json").read_text() == "{}\n"


def test_an_unwritable_output_folder_is_refused_before_the_work(
    tmp_path, monkeypatch, capsys
):
    import errno
    import tempfile

    def refused(*args, **kwargs):
        raise OSError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refused)
    argv = ["compare", "none1.csv", "none2.csv", f"--output={tmp_path / 'c.json'}"]
    code, _, err = main(argv, capsys)
    assert code == 2 and "cannot write into" in err and "Permission denied" in err


PER_USER = {
    "JSON": ("scores.json", "give a file name ending in .csv"),
    "no extension": ("scores", "give a file name ending in .csv"),
    "a folder": ("folder.csv", "folder.csv is a folder; give a file name"),
    "its metadata exists": ("taken.csv", "would replace"),
}


@pytest.mark.parametrize("case", list(PER_USER))
def test_a_per_user_output_is_checked_before_the_model_loads(case, tmp_path, capsys):
    (tmp_path / "folder.csv").mkdir()
    (tmp_path / "taken.csv.json").write_text("{}\n")
    name, words = PER_USER[case]
    code, _, err = main(
        [
            "evaluate",
            f"--model_file={tmp_path / 'none.pth'}",
            f"--per_user={tmp_path / name}",
        ],
        capsys,
    )
    assert code == 2 and err.count("\n") == 1 and words in err, err


def test_compare_of_files_imports_neither_torch_nor_recbole(tmp_path):
    a, b = toy_pair(tmp_path)
    code = (
        "import sys\n"
        "from recbole_attn.cli import main\n"
        f"status = main(['compare', {a!r}, {b!r}, '--output={tmp_path / 'c.json'}'])\n"
        "heavy = [m for m in ('torch', 'recbole') if m in sys.modules]\n"
        "print(status, heavy)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO
    )
    assert out.stdout.strip().splitlines()[-1] == "0 []", out.stdout + out.stderr


def test_the_values_a_rank_gives_are_recboles_own():
    """:data:`FROM_PLACE` against RecBole's metric objects on one target at each place
    of a list of 20; a tie with the target may put it lower than its rank (accepted),
    never higher (refused)."""
    from recbole.evaluator.metrics import MAP, MRR, NDCG, Hit, Precision, Recall

    from recbole_attn.per_user_file import FROM_PLACE, PerUserFileError, check_table

    config = {"topk": [20], "metric_decimal_place": 4}
    for place in range(1, 21):
        pos_index = np.zeros((1, 20), dtype=bool)
        pos_index[0, place - 1] = True
        pos_len = np.array([1])
        for metric in (Hit, Recall, NDCG, MRR, MAP, Precision):
            name = metric.__name__.lower()
            takes = metric.metric_info.__code__.co_argcount - 1
            values = metric(config).metric_info(*(pos_index, pos_len)[:takes])[0]
            for k in (5, 10, 20):
                expected = FROM_PLACE[name](place, k) if place <= k else 0.0
                assert values[k - 1] == pytest.approx(expected, rel=1e-12), (name, k)
    header = ["user", "rank", "ndcg@10", "hit@10"]
    tied = [["u1", "10", "0.0", "0.0"], ["u2", "9", repr(1 / math.log2(11)), "1.0"]]
    check_table("f.csv", header, tied)  # each target placed below a tied item
    with pytest.raises(PerUserFileError, match="line 2: ndcg@10 .* rank 10, which"):
        check_table("f.csv", header, [["u1", "10", repr(1 / math.log2(10)), "1.0"]])
