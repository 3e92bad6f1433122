"""Values that are not data (issue 65): a non-finite number in a column RecBole orders,
splits, labels or computes on is one line naming the file, the column and the line
(NaN was refused; infinity made those rows each user's latest item, silently)."""

import os
import shutil

import pytest

from test_hostile import main
from test_safety import _one_line, _run_args


def _copy(tiny_data_path, tmp_path):
    target = tmp_path / "data" / "tiny"
    shutil.copytree(os.path.join(tiny_data_path, "tiny"), target)
    return target


@pytest.mark.parametrize("value", ["inf", "-inf", "Infinity", "1e999", "nan"])
def test_a_timestamp_that_is_not_finite_is_refused(
    value, tiny_data_path, tmp_path, monkeypatch, capsys
):
    target = _copy(tiny_data_path, tmp_path)
    inter = target / "tiny.inter"
    lines = inter.read_text().splitlines()
    user, item, _ = lines[4].split("\t")
    lines[4] = "\t".join((user, item, value))  # line 5 of the file
    inter.write_text("\n".join(lines) + "\n")
    monkeypatch.chdir(tmp_path)
    code, err = main(_run_args(str(tmp_path / "data")), capsys)
    what = "is not a number" if value == "nan" else "is not finite"
    _one_line(code, err, f"tiny.inter, line 5: timestamp {value!r} {what}")
    assert "1 such row(s)" in err
    assert not (tmp_path / "saved").exists(), "refused before the data loads"


def test_every_loaded_number_column_is_checked(
    tiny_data_path, tmp_path, monkeypatch, capsys
):
    """A rating a threshold labels by, and a float_seq item feature."""
    target = _copy(tiny_data_path, tmp_path)
    inter = target / "tiny.inter"
    lines = inter.read_text().splitlines()
    lines[0] += "\trating:float"
    lines[1:] = [f"{l}\t{'-inf' if i == 2 else 4}" for i, l in enumerate(lines[1:])]
    inter.write_text("\n".join(lines) + "\n")
    monkeypatch.chdir(tmp_path)
    load = "--load_col={'inter': ['user_id', 'item_id', 'timestamp', 'rating']}"
    code, err = main(_run_args(str(tmp_path / "data"), load), capsys)
    _one_line(code, err, "tiny.inter, line 4: rating '-inf' is not finite")
    # a float_seq column of the items
    lines = inter.read_text().splitlines()
    inter.write_text("\n".join(l.rsplit("\t", 1)[0] for l in lines) + "\n")
    item = target / "tiny.item"
    lines = item.read_text().splitlines()
    lines[0] += "\tprices:float_seq"
    lines[1:] = [f"{l}\t1.5 {'inf' if i == 3 else 2}" for i, l in enumerate(lines[1:])]
    item.write_text("\n".join(lines) + "\n")
    load = (
        "--load_col={'inter': ['user_id', 'item_id', 'timestamp'], "
        "'item': ['item_id', 'categories', 'prices']}"
    )
    code, err = main(_run_args(str(tmp_path / "data"), load), capsys)
    _one_line(code, err, "tiny.item, line 5: prices 'inf' is not finite")
