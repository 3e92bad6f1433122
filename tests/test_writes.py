"""A write that fails (issue 65): the log file or a checkpoint that cannot be written (a
read-only folder, a file-size limit, a full disk) is one line naming the file and the
real cause, with no logging traceback and no torch-internal text as the reason."""

import errno
import os
import subprocess
import sys

import pytest

from conftest import REPO
from test_hostile import main
from test_safety import _one_line, _run_args

#: the command line in a process of its own, under a file-size limit (bytes; 0: none)
#: and with the log folder made unwritable by ``errno`` (0: writable)
LIMITED = """
import errno, os, resource, sys
limit, error = int(sys.argv.pop(1)), int(sys.argv.pop(1))
if limit:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
from recbole_attn.engine import logs
if error:
    def refuse(*args, **kwargs):
        raise OSError(error, os.strerror(error))
    logs.claim_file = refuse
from recbole_attn.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _limited(data_path, cwd, limit=0, error=0, *extra):
    argv = [sys.executable, "-c", LIMITED, str(limit), str(error)]
    argv += _run_args(data_path, "--state=INFO", *extra)
    env = {**os.environ, "PYTHONPATH": REPO}
    return subprocess.run(
        argv, cwd=cwd, capture_output=True, text=True, timeout=300, env=env
    )


def test_a_file_size_limit_is_one_line_for_the_log_and_the_checkpoint(
    tiny_data_path, tmp_path
):
    """Before: Python's "--- Logging error ---" traceback for every line after the
    limit, then torch's "unexpected pos 704 vs 598" as the checkpoint's reason and the
    advice to free space."""
    done = _limited(tiny_data_path, tmp_path, 4_000)
    err = done.stderr
    assert done.returncode == 2, err
    assert "Traceback" not in err and "Logging error" not in err, err
    warnings = [l for l in err.splitlines() if l.startswith("warning: cannot write")]
    assert len(warnings) == 1, err
    assert "the log file " in warnings[0]
    assert "(File too large: the file-size limit of this process was reached" in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: cannot write the checkpoint "), last
    assert "(File too large: the file-size limit of this process was reached " in last
    assert "raise the limit" in last and "inline_container" not in last


@pytest.mark.parametrize("error", [errno.EROFS, errno.EACCES])
def test_a_log_folder_that_cannot_be_written_is_one_line(
    error, tiny_data_path, tmp_path
):
    """Before: a PermissionError traceback."""
    done = _limited(tiny_data_path, tmp_path, 0, error)
    err = done.stderr
    assert done.returncode == 2, err
    assert (
        err.startswith("error: cannot write the log file under ")
        and err.count("\n") == 1
    ), err
    assert os.strerror(error) in err
    assert not (tmp_path / "saved").exists() or not os.listdir(tmp_path / "saved")


@pytest.mark.parametrize(
    "error, cause, advice",
    [
        (errno.EFBIG, "the file-size limit of this process was reached", "raise the"),
        (errno.ENOSPC, "the disk is full", "free space under"),
        (errno.EDQUOT, "the disk quota is used up", "free space in your quota"),
        (errno.EROFS, "a read-only file system", "choose a folder you can write to"),
    ],
)
def test_a_checkpoint_write_names_the_real_cause(
    error, cause, advice, tiny_data_path, tmp_path, monkeypatch, capsys
):
    """torch's zip writer turns the OSError into a RuntimeError of its own text; the
    cause is read from the exception's chain."""
    from recbole_attn.engine import checkpoint

    def save(state, f):
        try:
            raise OSError(error, os.strerror(error))
        except OSError:
            raise RuntimeError("[enforce fail at inline_container.cc:671] . unexpected")

    monkeypatch.setattr(checkpoint.torch, "save", save)
    monkeypatch.chdir(tmp_path)
    code, err = main(_run_args(tiny_data_path), capsys)
    _one_line(code, err, "cannot write the checkpoint ")
    assert f"({os.strerror(error)}: {cause}" in err and advice in err
    assert "inline_container" not in err
    assert not [p for p in tmp_path.rglob("*.tmp")], "no temporary file left"


def test_an_output_write_names_the_real_cause(tmp_path):
    from recbole_attn.errors import RecboleAttnError
    from recbole_attn.files import write_files

    def full(f):
        raise OSError(errno.EFBIG, os.strerror(errno.EFBIG))

    with pytest.raises(RecboleAttnError, match="file-size limit") as got:
        write_files({str(tmp_path / "a.csv"): full})
    assert "raise the limit" in str(got.value)
    assert list(tmp_path.iterdir()) == []


def test_a_search_output_that_cannot_be_written_is_one_line(tmp_path, monkeypatch):
    """Before: an OSError traceback from the trial table, best.yaml or result.json."""
    from recbole_attn.errors import RecboleAttnError
    from recbole_attn.commands.tuning import outputs
    from recbole_attn.commands.tuning.space import Param

    def full(path, write, binary=False):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(outputs, "write_replacing", full)
    trial = {
        "params": {"hidden_size": 8},
        "best_valid_score": 0.1,
        "epochs": 1,
        "stop_reason": "all epochs",
        "saved_model_file": "x.pth",
    }
    with pytest.raises(RecboleAttnError, match="trials.csv .No space left on device"):
        outputs.write_interrupted(
            str(tmp_path),
            [trial],
            [Param("hidden_size", "choice", values=[8])],
            2,
            "M",
            "d",
        )
