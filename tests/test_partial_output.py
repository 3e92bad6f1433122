"""Files that belong together appear together or not at all (issue 65): a converter
killed while it writes leaves no dataset a run would take, its rerun needs no
``--overwrite`` where only its own partial output is in the way, and no temporary file
outlives its command."""

import os
import subprocess
import sys

import pytest

from conftest import REPO
from test_dataset_scripts import read, run, seq_fixture
from test_pipeline import _cli_main
from test_safety import _one_line, _run_args
from recbole_attn.data.convert import seqfile

#: a converter that dies (os._exit: no clean-up runs, as with SIGKILL) at a chosen point
KILLED = """
import os, sys
from recbole_attn import files
from recbole_attn.data.convert import cli, seqfile, write
where = sys.argv.pop(1)
if where == "between files":  # after the first file is published
    real = files._publish_new
    def publish(*args):
        real(*args)
        os._exit(9)
    files._publish_new = publish
else:  # while the first file is written
    def inter_text(df):
        os._exit(9)
    write.inter_text = inter_text
sys.exit(cli.run_main(seqfile.main, sys.argv[1:]))
"""


@pytest.mark.parametrize("where", ["between files", "while writing"])
def test_a_converter_killed_midway_leaves_no_dataset_and_its_rerun_works(
    where, tmp_path, monkeypatch, capsys
):
    """Before: ``S.inter`` and ``S.yaml`` without ``S.item`` (a run trained without
    categories), hidden temporary files, and a rerun refused without --overwrite."""
    seqs, attrs = seq_fixture(tmp_path)
    out = tmp_path / "out"
    argv = ["--sequences", seqs, "--attributes", attrs, "--name", "S"]
    argv += ["--output_dir", out, "--k_core", 2]
    killed = subprocess.run(
        [sys.executable, "-c", KILLED, where, *map(str, argv)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert killed.returncode == 9, killed.stderr
    left = sorted(os.listdir(out / "S"))
    assert ".S.converting" in left and "S.yaml" not in left, left
    if where == "between files":
        assert "S.inter" in left and "S.item" not in left
    else:
        assert any(n.endswith(".tmp") for n in left), left
    # a run refuses the unfinished dataset
    monkeypatch.chdir(tmp_path)
    code, err = _cli_main(_run_args(str(out), dataset="S"), capsys)
    _one_line(code, err, "dataset 'S' in ")
    assert "is an unfinished conversion" in err
    # the same command again: no --overwrite needed, every file, nothing else
    assert run(seqfile, *argv) == 0, capsys.readouterr().err
    assert sorted(os.listdir(out / "S")) == ["S.inter", "S.item", "S.yaml"]
    assert read(out / "S" / "S.item").startswith("item_id:token")
    # and now the dataset is the user's: a third run needs --overwrite
    capsys.readouterr()
    assert run(seqfile, *argv) == 2
    assert "--overwrite" in capsys.readouterr().err


def test_a_conversion_in_progress_is_not_taken_for_a_killed_one(tmp_path, capsys):
    from recbole_attn.files import owner_tag

    seqs, attrs = seq_fixture(tmp_path)
    out = tmp_path / "out"
    (out / "S").mkdir(parents=True)
    (out / "S" / ".S.converting").write_text(owner_tag() + "\n")  # alive: this one
    (out / "S" / "S.inter").write_text("theirs\n")
    argv = ["--sequences", seqs, "--attributes", attrs, "--name", "S"]
    assert run(seqfile, *argv, "--output_dir", out) == 2
    assert "being written by another conversion" in capsys.readouterr().err
    assert read(out / "S" / "S.inter") == "theirs\n"


def test_a_failed_conversion_removes_its_claim_and_temporaries(tmp_path, monkeypatch):
    from recbole_attn.data.convert import write

    seqs, attrs = seq_fixture(tmp_path)
    out = tmp_path / "out"

    def fail(df):
        raise KeyboardInterrupt  # Ctrl-C or SIGTERM while writing

    monkeypatch.setattr(write, "inter_text", fail)
    argv = ["--sequences", seqs, "--attributes", attrs, "--name", "S"]
    assert run(seqfile, *argv, "--output_dir", out, "--k_core", 2) == 130
    assert not (out / "S").exists()  # its folder, which it made, is gone too


def test_temporaries_of_killed_writers_are_removed_by_the_next_write(tmp_path):
    """A writer killed before its clean-up leaves ``.<name>.<host>-<pid>-<token>.tmp``;
    the next write of that file removes it (a live writer's stays)."""
    from recbole_attn.files import owner_tag, write_files

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = owner_tag().rpartition("-")[0]
    stale = tmp_path / f".a.csv.{host}-{dead.pid}-0123abcd.tmp"
    alive = tmp_path / f".a.csv.{owner_tag()}-89abcdef.tmp"
    stale.write_text("half")
    alive.write_text("being written")
    write_files({str(tmp_path / "a.csv"): "x\n"})
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["a.csv", alive.name])


def test_an_overwrite_stopped_before_it_publishes_keeps_the_old_files_and_no_temporary(
    tmp_path, monkeypatch
):
    """``write_files(..., overwrite=True)`` (the export, the docs generator) stopped at its
    first replace: the old files stay as they were and its temporaries go."""
    from recbole_attn.files import write_files

    old = {str(tmp_path / name): f"old {name}\n" for name in ("a.md", "b.md")}
    for path, text in old.items():
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)

    def stopped(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", stopped)
    with pytest.raises(KeyboardInterrupt):
        write_files({path: "new\n" for path in old}, overwrite=True)
    assert sorted(os.listdir(tmp_path)) == ["a.md", "b.md"]
    for path, text in old.items():
        with open(path, encoding="utf-8") as f:
            assert f.read() == text


def test_a_run_removes_the_temporaries_killed_runs_left_in_its_checkpoint_folder(
    tiny_data_path, tmp_path, monkeypatch, capsys
):
    """A run killed while writing its checkpoint left ``.<name>-last.pth.<...>.tmp``
    there; no later run writes that name, so none removed it."""
    from recbole_attn.files import owner_tag

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = owner_tag().rpartition("-")[0]
    saved = tmp_path / "saved"
    saved.mkdir()
    stale = saved / f".SASRecAP-x-last.pth.{host}-{dead.pid}-0123abcd.tmp"
    alive = saved / f".SASRecAP-y-last.pth.{owner_tag()}-89abcdef.tmp"
    stale.write_bytes(b"half")
    alive.write_bytes(b"being written")
    monkeypatch.chdir(tmp_path)
    code, err = _cli_main(
        _run_args(tiny_data_path, f"--checkpoint_dir={saved}"), capsys
    )
    assert code == 0, err
    assert not stale.exists() and alive.exists()
