"""Hostile files, parallel runs and dirty data (issue 28): nothing is unpickled, nothing a
user has is written over, no silent wrong result, and every failure is one ``error:``
line."""

import glob
import json
import logging
import os
import pickle
import subprocess
import sys

import pytest

from conftest import REPO, TINY_MODEL
from test_pipeline import _cli_main

TINY_ARGS = [f"--{k}={v}" for k, v in TINY_MODEL.items()] + [
    "--epochs=1",
    "--train_batch_size=16",
    "--state=ERROR",
    "--show_progress=False",
]


class Payload:
    """A pickle whose loading creates a marker file (any code would run there)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _plant(path, marker):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        pickle.dump(Payload(marker), f)


def _run_args(data_path, *extra, model="SASRecAP", dataset="tiny"):
    """Command-line arguments of a fast run; ``extra`` replaces what it names."""
    base = [f"--model={model}", f"--dataset={dataset}", f"--data_path={data_path}"]
    args = dict(a.split("=", 1) for a in base + TINY_ARGS + list(extra))
    return [f"{k}={v}" for k, v in args.items()]


# ---------------------------------------------------------------------- 1. no pickle


@pytest.mark.parametrize("model", ["SASRecAP", "SASRec", "BPR"])
def test_planted_pickles_never_run(
    model, tiny_data_path, tmp_path, monkeypatch, capsys
):
    """Every file name RecBole's create_dataset and data_preparation would unpickle, in
    the checkpoint folder of an ordinary run: the run trains, the payloads never run."""
    monkeypatch.chdir(tmp_path)
    marker = str(tmp_path / "PAYLOAD_RAN")
    saved = tmp_path / "saved"
    for name in (
        f"tiny-for-{model}-dataloader.pth",
        "tiny-SequentialDataset.pth",
        "tiny-AttnSequentialDataset.pth",
        "tiny-Dataset.pth",
    ):
        _plant(str(saved / name), marker)
    extra = [f"--checkpoint_dir={saved}"]
    if model != "SASRecAP":
        extra.append("--training_mode=last_position")
    if model == "BPR":
        extra.append(
            "--train_neg_sample_args={'distribution':'uniform','sample_num':1}"
        )
    code, err = _cli_main(_run_args(tiny_data_path, *extra, model=model), capsys)
    assert code == 0, err
    assert not os.path.exists(marker)


def test_options_that_save_or_load_pickles_are_refused(
    tiny_data_path, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    for option in (
        "--save_dataloaders=True",
        "--save_dataset=True",
        f"--dataloaders_save_path={tmp_path / 'x.pth'}",
    ):
        code, err = _cli_main(_run_args(tiny_data_path, option), capsys)
        assert code == 2 and err.startswith("error: ") and err.count("\n") == 1
        assert "never saves or loads RecBole's pickled" in err, err
    assert not os.path.exists(tmp_path / "saved"), "nothing ran"


# ---------------------------------------------------------------------- 2. run files


def _run_subprocess(data_path, checkpoint_dir, seed, cwd):
    argv = [sys.executable, os.path.join(REPO, "run_recbole_attn.py")]
    argv += _run_args(data_path, f"--checkpoint_dir={checkpoint_dir}", f"--seed={seed}")
    return subprocess.Popen(
        argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@pytest.mark.slow
def test_runs_started_together_keep_and_report_their_own_models(
    tiny_data_path, tmp_path
):
    """Two runs (other seeds) into one checkpoint folder at the same moment: two model
    files, two log files, and each run's reported test result is its own model's."""
    from recbole_attn.engine.quick_start import load_data_and_model

    saved = tmp_path / "saved"
    procs = [_run_subprocess(tiny_data_path, saved, s, tmp_path) for s in (1, 2)]
    outputs = [p.communicate(timeout=600) for p in procs]
    reported = {}
    for proc, (out, err) in zip(procs, outputs):
        assert proc.returncode == 0, err
        lines = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
        with open(lines["results"], encoding="utf-8") as f:  # the run's results file
            reported[lines["model"]] = json.load(f)["test_result"]
    assert len(reported) == 2, "the runs wrote one file"
    assert sorted(glob.glob(str(saved / "*-last.pth"))) == sorted(
        p[: -len(".pth")] + "-last.pth" for p in reported
    )
    assert len(glob.glob(str(tmp_path / "log" / "SASRecAP" / "*.log"))) == 2
    for model_file, test in reported.items():
        _, _, trainer, (_, _, test_data) = load_data_and_model(
            model_file, {"state": "ERROR"}
        )
        again = trainer.evaluate(test_data, model_file=model_file)
        assert {k: round(float(v), 4) for k, v in again.items()} == pytest.approx(test)


def test_run_files_are_claimed_exclusively(tmp_path):
    from recbole_attn.files import claim_file, claim_folder, run_stem

    stem = run_stem("M")
    first = claim_file(str(tmp_path), stem, ".pth")
    second = claim_file(str(tmp_path), stem, ".pth")  # same stem: another name
    assert first != second and os.path.isfile(first) and os.path.isfile(second)
    assert claim_folder(str(tmp_path / "out")) != claim_folder(str(tmp_path / "out"))


def test_a_run_that_saves_nothing_leaves_no_file(tiny_config):
    from recbole_attn.engine.quick_start import run

    run("SASRecAP", "tiny", config_dict={**tiny_config, "epochs": 1}, saved=False)
    assert os.listdir(tiny_config["checkpoint_dir"]) == []


def test_a_repeated_search_keeps_the_first_results(tiny_config, tmp_path):
    from recbole_attn.errors import RecboleAttnError
    from recbole_attn.commands.tuning import tune_model

    space = tmp_path / "s.hyper"
    space.write_text("hidden_size choice [8,16]\n")
    config = {**tiny_config, "epochs": 1}
    config.pop("checkpoint_dir")
    options = dict(
        config_dict=config, algo="exhaustive", tool="hyperopt", echo=lambda line: None
    )
    first = tune_model("SASRecAP", "tiny", str(space), output="out", **options)
    before = (tmp_path / "out" / "result.json").read_text()
    with pytest.raises(RecboleAttnError, match=r"would replace .*--overwrite"):
        tune_model("SASRecAP", "tiny", str(space), output="out", **options)
    assert (tmp_path / "out" / "result.json").read_text() == before
    again = tune_model(
        "SASRecAP", "tiny", str(space), output="out", overwrite=True, **options
    )
    assert again["output"] == first["output"]
    # default folders: a new one per search
    a = tune_model("SASRecAP", "tiny", str(space), **options)["output"]
    b = tune_model("SASRecAP", "tiny", str(space), **options)["output"]
    assert a != b and os.path.isfile(os.path.join(a, "best.yaml"))


def test_heatmaps_never_replace_files(tiny_config, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from recbole_attn.engine.quick_start import run
    from recbole_attn.cli import main as cli_main

    def main(argv):
        return cli_main(["viz", *argv])

    model_file = run("SASRecAP", "tiny", config_dict={**tiny_config, "epochs": 1})[
        "saved_model_file"
    ]
    argv = ["--model_file", model_file, "--user", "u3", "--output", "png"]
    assert main(argv) == 0
    drawn = sorted(os.listdir("png"))
    stem = os.path.basename(model_file)[: -len(".pth")]
    assert drawn and all(name.startswith(f"{stem}_useru3_layer") for name in drawn)
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: the heatmaps would replace") and "--overwrite" in err
    assert main(argv + ["--overwrite"]) == 0
    (tmp_path / "afile").write_text("x")
    assert main(["--model_file", model_file, "--user", "u3", "--output", "afile"]) == 2
    assert "is a file" in capsys.readouterr().err


# ---------------------------------------------------------------------- 4. dirty data


def _write_inter(
    root, name, rows, header="user_id:token\titem_id:token\ttimestamp:float"
):
    folder = os.path.join(root, name)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"{name}.inter"), "w") as f:
        f.write(header + "\n")
        f.writelines("\t".join(map(str, row)) + "\n" for row in rows)
    return root


def test_repeated_interactions_are_dropped_and_counted(
    tmp_path, monkeypatch, capsys, caplog
):
    """A user's test item that repeats an earlier interaction: dropped (keeping the first)
    and said; Recall on the deduplicated data, not a doubled one."""
    monkeypatch.chdir(tmp_path)
    caplog.set_level(logging.WARNING)
    rows = [(f"u{u}", f"i{(u + t) % 30}", t) for u in range(12) for t in range(6)]
    rows += [(f"u{u}", f"i{u % 30}", 10) for u in range(4)]  # repeats of the first item
    root = _write_inter(str(tmp_path / "data"), "dups", rows)
    argv = _run_args(root, "--topk=[5,10]", "--state=WARNING", dataset="dups")
    code, err = _cli_main(argv, capsys)
    assert code == 0, err
    # the console's warning (pytest's log capture stands in for the console here)
    assert "dups.inter: dropped 4 repeated (user, item) interaction(s)" in caplog.text
    from recbole_attn.engine.config import make_config
    from recbole_attn.engine.quick_start import create_dataset

    config = make_config("SASRecAP", "dups", config_dict={"data_path": root})
    data = create_dataset(config)
    assert len(data.inter_feat) == 12 * 6
    kept = make_config(
        "SASRecAP", "dups", config_dict={"data_path": root, "rm_dup_inter": None}
    )
    assert len(create_dataset(kept).inter_feat) == 12 * 6 + 4


def test_short_users_are_counted_and_no_evaluable_user_is_an_error(
    tmp_path, monkeypatch, capsys, caplog
):
    monkeypatch.chdir(tmp_path)
    caplog.set_level(logging.WARNING)
    rows = [(f"u{u}", f"i{t}", t) for u in range(10) for t in range(6)]
    rows += [("s1", "i1", 1), ("s2", "i1", 1), ("s2", "i2", 2)]  # 1 and 2 interactions
    rows += [("s3", "i1", 1), ("s3", "i2", 2), ("s3", "i3", 3)]  # test only
    root = _write_inter(str(tmp_path / "data"), "short", rows)
    small = ["--topk=[5]", "--valid_metric=NDCG@5", "--state=WARNING"]
    code, err = _cli_main(_run_args(root, *small, dataset="short"), capsys)
    assert code == 0, err
    assert (
        "of 13 users, 3 for a validation sample and 2 for a test sample" in caplog.text
    )
    before = sorted(os.listdir(tmp_path / "saved"))
    few = [(f"u{u}", f"i{t}", t) for u in range(5) for t in range(2)]
    root = _write_inter(str(tmp_path / "data2"), "few", few)
    code, err = _cli_main(_run_args(root, *small, dataset="few"), capsys)
    assert code == 2 and err.count("\n") == 1
    assert "no user of 'few' has enough interactions for a validation sample" in err
    assert sorted(os.listdir(tmp_path / "saved")) == before, "nothing trained"


# ---------------------------------------------------------------------- 5. one line


def _one_line(code, err, fragment):
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert fragment in err, err


@pytest.mark.parametrize(
    "rows, header, fragment",
    [
        (
            [("u1", "i1", "abc")],
            None,
            "bad.inter, line 2: timestamp 'abc' is not a number",
        ),
        ([("u1", 5)], "user_id:token\ttimestamp:float", "has no column 'item_id'"),
        ([], None, "has a header and no interactions"),
        ([("u1", "i1")], "user_id:token\titem_id:token", "has no column 'timestamp'"),
        (
            [("u1", "i1", 1)],
            "user_id:token\titem_id\ttimestamp:float",
            "not 'name:type'",
        ),
        # before: RecBole's traceback (the first: its KeyError on the doubled name)
        (
            [("u1", "i1", 1, "i2")],
            "user_id:token\titem_id:token\ttimestamp:float\titem_id:token",
            "bad.inter: the header names the column 'item_id' twice ('item_id:token' "
            "and 'item_id:token'); an atomic file has one column a field",
        ),
        (
            [("u1", "i" * 140_000, 1)],
            None,
            "(a field is longer than 131,072 characters, Python's csv limit, which",
        ),
        ([("u1", '"i1', 1)], None, "cannot be read as RecBole reads it ("),
    ],
)
def test_broken_interaction_files_are_one_line(
    rows, header, fragment, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    rows = rows + [(f"u{u}", f"i{t}", t) for u in range(5) for t in range(5)] * bool(
        rows and header is None
    )
    kwargs = {"header": header} if header else {}
    root = _write_inter(str(tmp_path / "data"), "bad", rows, **kwargs)
    code, err = _cli_main(_run_args(root, dataset="bad"), capsys)
    _one_line(code, err, fragment)


def test_a_tensorboard_folder_that_is_a_file_is_one_line(
    tiny_data_path, tmp_path, monkeypatch, capsys
):
    """RecBole's trainer writes ./log_tensorboard/: a file of that name was its
    traceback (FileExistsError); now one line before the data loads."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "log_tensorboard").write_text("mine\n")
    code, err = _cli_main(_run_args(tiny_data_path), capsys)
    _one_line(code, err, f"{tmp_path / 'log_tensorboard'} is a file; RecBole's trainer")
    assert (tmp_path / "log_tensorboard").read_text() == "mine\n"


@pytest.mark.parametrize("name", ["log", "log/SASRecAP"])
def test_a_log_folder_that_is_a_file_is_one_line(name, tmp_path, monkeypatch):
    """RecBole's runs log into ./log/<model>/: a file of that name said "Not a
    directory" and to check the disk; now it says which file and what to do."""
    from recbole_attn.engine.logs import init_logging
    from recbole_attn.errors import RecboleAttnError

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(logging.getLogger(), "handlers", [])  # pytest holds its own
    (tmp_path / "log").mkdir()
    if name == "log":
        (tmp_path / "log").rmdir()
    (tmp_path / name).write_text("mine\n")
    config = {"model": "SASRecAP", "dataset": "tiny", "state": "ERROR"}
    with pytest.raises(RecboleAttnError) as caught:
        init_logging(config)
    assert str(caught.value) == (
        f"cannot write the log file: {tmp_path / name} is a file; runs log into a "
        f"folder '{name}' where they start: move the file, or start the run in another "
        "folder"
    )
    assert (tmp_path / name).read_text() == "mine\n"


@pytest.mark.slow
def test_a_log_that_is_a_file_stops_a_run_in_one_line(tiny_data_path, tmp_path):
    """The command, as a process (in pytest's process the root logger has handlers,
    so a run there makes no log file): one line before the data loads."""
    (tmp_path / "log").write_text("mine\n")
    argv = [sys.executable, os.path.join(REPO, "run_recbole_attn.py")]
    done = subprocess.run(
        argv + _run_args(tiny_data_path), cwd=tmp_path, capture_output=True, text=True
    )
    _one_line(
        done.returncode,
        done.stderr,
        f"error: cannot write the log file: {tmp_path / 'log'} is a file; runs log "
        "into a folder 'log' where they start: move the file",
    )
    assert not list(tmp_path.glob("saved/*")), "it stopped before training"


def test_a_read_only_tensorboard_folder_is_one_line(
    tiny_data_path, tmp_path, monkeypatch, capsys
):
    """./log_tensorboard/ that cannot be written (tests run as root, where permissions
    are not enforced: every creation of a file or folder in it is refused here): one
    line before the data loads, not the trainer's traceback."""
    import builtins
    import errno

    monkeypatch.chdir(tmp_path)
    board = tmp_path / "log_tensorboard"
    board.mkdir()

    def refused(path):
        inside = os.path.abspath(os.fsdecode(path)).startswith(str(board) + os.sep)
        if inside:
            raise PermissionError(errno.EACCES, "Permission denied", os.fsdecode(path))

    real_open, real_os_open, real_mkdir = builtins.open, os.open, os.mkdir

    def guarded_open(file, mode="r", *args, **kwargs):
        if isinstance(file, (str, bytes, os.PathLike)) and set(mode) & set("wax+"):
            refused(file)
        return real_open(file, mode, *args, **kwargs)

    def guarded_os_open(path, flags, *args, **kwargs):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            refused(path)
        return real_os_open(path, flags, *args, **kwargs)

    def guarded_mkdir(path, *args, **kwargs):
        refused(path)
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", guarded_open)
    monkeypatch.setattr(os, "open", guarded_os_open)
    monkeypatch.setattr(os, "mkdir", guarded_mkdir)
    code, err = _cli_main(_run_args(tiny_data_path), capsys)
    _one_line(
        code,
        err,
        f"error: cannot write into {board}, where RecBole's trainer writes its "
        "TensorBoard logs: make it writable, or start the run in another folder",
    )
    assert list(board.iterdir()) == []


def test_a_header_only_item_file_is_one_line(tmp_path, monkeypatch, capsys):
    """An item file with its category column and no rows was a traceback (pandas3's
    ``max()`` of nothing)."""
    from conftest import write_tiny_dataset

    monkeypatch.chdir(tmp_path)
    folder = write_tiny_dataset(str(tmp_path / "data"), name="hdr")
    item = os.path.join(folder, "hdr.item")
    with open(item) as f:
        header = f.readline()
    with open(item, "w") as f:
        f.write(header)
    load_col = "{'inter': ['user_id', 'item_id', 'timestamp'], 'item': ['item_id', 'categories']}"
    argv = _run_args(str(tmp_path / "data"), dataset="hdr")
    code, err = _cli_main(
        [*argv, "--metrics=['NDCG','CC']", f"--load_col={load_col}"], capsys
    )
    _one_line(code, err, f"{item} has a header and no items; write its rows")


def test_an_empty_file_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "data" / "empty"
    folder.mkdir(parents=True)
    (folder / "empty.inter").write_text("")
    code, err = _cli_main(_run_args(str(tmp_path / "data"), dataset="empty"), capsys)
    _one_line(code, err, "empty.inter is empty")


@pytest.mark.parametrize(
    "extra, fragment",
    [
        (
            ["--eval_args={'mode': 'uni-100'}"],
            "mode is full, labeled, uni<N> or pop<N>",
        ),
        (["--eval_args={'order': 'TIME'}"], "order is RO or TO"),
        (["--topk=[0]"], "topk must be a positive integer or a list of them"),
        (["--topk=[10,100]"], "topk [10, 100] ranks more items than the 40 of"),
        (["--learning_rate=1e6", "--epochs=3"], "the training loss became"),
    ],
)
def test_bad_values_are_one_line_before_or_during_training(
    extra, fragment, tiny_data_path, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    code, err = _cli_main(_run_args(tiny_data_path, *extra), capsys)
    _one_line(code, err, fragment)


def test_a_nan_loss_says_what_to_change(tiny_data_path, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, err = _cli_main(
        _run_args(tiny_data_path, "--learning_rate=1e6", "--epochs=5"), capsys
    )
    _one_line(code, err, "lower --learning_rate")


def test_unusable_checkpoint_folders_are_one_line_before_loading(
    tiny_data_path, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x")
    code, err = _cli_main(_run_args(tiny_data_path, "--checkpoint_dir=afile"), capsys)
    _one_line(code, err, "checkpoint_dir afile is a file, not a folder")
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        code, err = _cli_main(
            _run_args(tiny_data_path, f"--checkpoint_dir={locked}"), capsys
        )
        _one_line(code, err, "cannot write into checkpoint_dir")


def test_resuming_with_other_model_options_is_one_line(
    tiny_data_path, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    code, out = _cli_main(_run_args(tiny_data_path), capsys)
    assert code == 0
    (last,) = glob.glob(str(tmp_path / "saved" / "*-last.pth"))
    code, err = _cli_main(
        _run_args(
            tiny_data_path,
            f"--resume_checkpoint={last}",
            "--hidden_size=8",
            "--epochs=2",
        ),
        capsys,
    )
    _one_line(code, err, "does not fit this model")
    assert "is [" in err and "hidden_size=16" in err


def test_model_options_are_checked_before_the_dataset_loads(
    tiny_data_path, tmp_path, monkeypatch, capsys
):
    from recbole_attn.data import dataset as dataset_module

    def refuse(*args, **kwargs):
        raise AssertionError("the dataset was loaded")

    monkeypatch.setattr(dataset_module.AttnSequentialDataset, "__init__", refuse)
    monkeypatch.chdir(tmp_path)
    for model, option, fragment in (
        ("PAtt", "--dpp_k=5", "dpp_k must be one of [2, 3]"),
        ("RKSA", "--kernels=['nope']", "kernels must be"),
        ("STOSA", "--stosa_preset=other", "stosa_preset must be one of"),
        ("STOSA", "--stosa_input=paper", "stosa_input is a research-only option"),
        ("DPAtt", "--dataset=tiny_nocat", "DPAtt needs the item category field"),
        ("SASRecAP", "--metrics=['Recall','NDCG','CC']", "metric CC needs"),
        ("SASRecAP", "--metrics=['NDCG','ILD'] --ild_distance=l2", "ild_distance must"),
        (
            "SASRecAP",
            "--metrics=['NDCG','F1'] --f1_diversity_metrics=['Nope']",
            "F1 component 'Nope' is not a usable metric",
        ),
    ):
        argv = _run_args(tiny_data_path, *option.split(" "), model=model)
        if option.startswith("--dataset"):
            argv = [a for a in argv if a != "--dataset=tiny"]
        code, err = _cli_main(argv, capsys)
        _one_line(code, err, fragment)


def test_ctrl_c_says_what_was_saved_and_exits_130(
    tiny_data_path, tmp_path, monkeypatch, capsys
):
    from recbole_attn.engine.trainer import AttnTrainer

    real = AttnTrainer._train_epoch

    def interrupt_in_epoch_1(self, train_data, epoch_idx, *args, **kwargs):
        if epoch_idx == 1:
            self.epoch = epoch_idx
            raise KeyboardInterrupt
        return real(self, train_data, epoch_idx, *args, **kwargs)

    monkeypatch.setattr(AttnTrainer, "_train_epoch", interrupt_in_epoch_1)
    monkeypatch.chdir(tmp_path)
    code, err = _cli_main(_run_args(tiny_data_path, "--epochs=3"), capsys)
    assert code == 130 and err.count("\n") == 1
    # epochs as the console counts them (issue 65)
    assert err.startswith(
        "error: interrupted in epoch 2/3; the state after epoch 1/3 is"
    )
    resume = err.split("--resume_checkpoint=")[1].strip()
    assert os.path.isfile(resume)
    monkeypatch.setattr(AttnTrainer, "_train_epoch", real)
    code, err = _cli_main(
        _run_args(tiny_data_path, "--epochs=3", f"--resume_checkpoint={resume}"), capsys
    )
    assert code == 0, err


# ---------------------------------------------------------------------- 6. clear words


def test_recboles_sampled_models_say_how_to_switch_the_sampler_on(
    tiny_data_path, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    for model, extra in (("BPR", []), ("SASRec", ["--loss_type=BPR"])):
        argv = _run_args(
            tiny_data_path, "--training_mode=last_position", *extra, model=model
        )
        code, err = _cli_main(argv, capsys)
        _one_line(code, err, "set --train_neg_sample_args=")


def test_argparse_errors_are_one_line(capsys):
    code, err = _cli_main(["--model=STOSA", "--num_samples=0"], capsys)
    _one_line(code, err, "--num_samples: must be an integer >= 1")
    assert "usage:" not in err


def test_a_missing_dataset_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, err = _cli_main(["--model=STOSA", "--dataset=Yelp"], capsys)
    _one_line(code, err, "dataset 'Yelp' not found: no Yelp.inter")
    assert "recbole-attn convert {amazon,seqfile,pairs,movielens,anime}" in err


def test_a_test_only_split_evaluates_the_test_users(
    tiny_data_path, tmp_path, monkeypatch, capsys
):
    """``LS: test_only`` leaves RecBole's validation split empty: the check of the
    splits read it as the test split and said no user had enough interactions for a
    test sample (every tiny user has more than 3)."""
    monkeypatch.chdir(tmp_path)
    split = "--eval_args={'split': {'LS': 'test_only'}, 'order': 'TO', 'mode': 'full'}"
    code, err = _cli_main(_run_args(tiny_data_path, "--epochs=1", split), capsys)
    assert code == 0 and "enough interactions" not in err, err
