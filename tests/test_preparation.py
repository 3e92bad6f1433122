"""One preparation step (``recbole_attn.engine.pipeline.prepare``): every check of a run once,
in one ordered place, and every yaml file read from disk once."""

import builtins
import logging

from recbole_attn import files
from recbole_attn.engine import pipeline
from recbole_attn.engine import quick_start
from recbole_attn.data import checks as data_checks


def test_a_run_reads_each_yaml_file_once_and_checks_once(
    tiny_config, tmp_path, monkeypatch
):
    user = tmp_path / "mine.yaml"
    user.write_text("hidden_size: 16\nn_heads: 2\n")
    reads, checks = {}, {"dataset": 0, "training mode": 0}
    real_open = builtins.open

    def counting_open(path, *args, **kwargs):
        if str(path).endswith(".yaml"):
            reads[str(path)] = reads.get(str(path), 0) + 1
        return real_open(path, *args, **kwargs)

    exists, mode = data_checks.check_dataset_exists, pipeline.check_sequential_model

    def counting_exists(config):
        checks["dataset"] += 1
        return exists(config)

    def counting_mode(*args):
        checks["training mode"] += 1
        return mode(*args)

    monkeypatch.setattr(builtins, "open", counting_open)
    monkeypatch.setattr(data_checks, "check_dataset_exists", counting_exists)
    monkeypatch.setattr(pipeline, "check_dataset_exists", counting_exists)
    monkeypatch.setattr(pipeline, "check_sequential_model", counting_mode)
    monkeypatch.chdir(tmp_path)
    config, net, _, _ = quick_start.build(
        "PAtt", "tiny", config_file_list=[str(user)], config_dict=tiny_config
    )
    logging.getLogger().handlers.clear()
    assert config["hidden_size"] == 16 and net.hidden_size == 16
    # the checks, the user's options, RecBole's Config and the warnings: one read
    assert reads[str(user)] == 1
    assert all(count == 1 for count in reads.values()), reads  # shipped files too
    assert checks == {"dataset": 1, "training mode": 1}


def test_an_edited_file_is_read_again(tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text("epochs: 1\n")
    assert files.read_once(str(path)) == "epochs: 1\n"
    path.write_text("epochs: 20\n")  # another size: another version of the file
    assert files.read_once(str(path)) == "epochs: 20\n"


def test_a_failed_replacing_write_leaves_the_old_file_and_no_temporary(tmp_path):
    import os

    import pytest

    path = tmp_path / "c.pth"
    files.write_replacing(str(path), lambda f: f.write(b"old"), binary=True)

    def broken(f):
        f.write(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        files.write_replacing(str(path), broken, binary=True)
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["c.pth"]
    files.write_replacing(str(path), lambda f: f.write("new"))
    assert path.read_text() == "new"
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~umask
