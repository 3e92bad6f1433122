"""The command line as a user meets it: one clear line (exit code 2, the key named, no
traceback) for every bad value, checkpoints that know their data, concise console output,
and every command of the README run as written (on fixtures, one epoch)."""

import logging
import os
import re
import shlex
import stat
import subprocess
import sys

import pytest
import torch

from conftest import REPO, TINY_MODEL, write_tiny_dataset
from recbole_attn.options import check as config_check
from recbole_attn.engine.checkpoint import load_checkpoint, save_checkpoint
from recbole_attn.errors import CheckpointError
from recbole_attn.errors import ConfigError
from recbole_attn.engine.config import config_files, make_config
from recbole_attn.engine.quick_start import load_data_and_model, run
from test_pipeline import _cli_main

TINY_ARGS = [f"--{k}={v}" for k, v in TINY_MODEL.items()]


def _bad_run(tiny_data_path, capsys, *args, model="SASRecAP"):
    argv = [f"--model={model}", "--dataset=tiny", f"--data_path={tiny_data_path}"]
    code, err = _cli_main(argv + list(args), capsys)
    return code, err


@pytest.mark.parametrize(
    "override, message",
    [
        ("--epochs=abc", "epochs must be an integer >= 1, got 'abc'"),
        ("--epochs=0", "epochs must be an integer >= 1, got 0"),
        ("--epochs=-1", "epochs must be an integer >= 1, got -1"),
        ("--learning_rate=abc", "learning_rate must be a number > 0"),
        ("--learning_rate=0", "learning_rate must be a number > 0"),
        ("--train_batch_size=0", "train_batch_size must be an integer >= 1"),
        ("--eval_batch_size=1.5", "eval_batch_size must be an integer >= 1"),
        ("--hidden_dropout_prob=1", "hidden_dropout_prob must be a probability"),
        ("--attn_dropout_prob=-0.1", "attn_dropout_prob must be a probability"),
        ("--MAX_ITEM_LIST_LENGTH=0", "MAX_ITEM_LIST_LENGTH must be an integer >= 1"),
        ("--topk=[0,5]", "topk must be a positive integer or a list"),
        ("--learner=adamx", "learner must be one of"),
        ("--hidden_size=30", "hidden_size (30) must be a multiple of n_heads (4)"),
        ("--metrics=['Recal']", "There is no metric named 'Recal'"),
        (
            "--eval_args={'split': {'RS': [0.8, -0.1, 0.3]}}",
            "eval_args must be a dict whose split is",
        ),
        # RecBole's data keys (tracebacks from its dataset before)
        ("--load_col=abc", "load_col must be a dict from a file to the names"),
        ("--load_col={'inter': 'user_id'}", "load_col must be a dict from a file"),
        ("--unload_col={'inter': '*'}", "unload_col must be a dict from a file"),
        ("--threshold=abc", "threshold must be a dict of one field and a number"),
        ("--threshold={'a': 1, 'b': 2}", "threshold must be a dict of one field"),
        ("--field_separator=5", "field_separator must be a non-empty string"),
        ("--benchmark_filename=abc", "benchmark_filename must be a non-empty list"),
        ("--metric_decimal_place=abc", "metric_decimal_place must be an integer >= 0"),
        ("--use_gpu=abc", "use_gpu must be True or False, got 'abc'"),
        # a top-K metric without its cutoff: RecBole's KeyError after the first epoch
        ("--valid_metric=Recall", "valid_metric 'Recall' needs a cutoff of topk"),
    ],
)
def test_bad_values_are_one_line_before_anything_runs(
    tiny_data_path, tmp_path, monkeypatch, capsys, override, message
):
    monkeypatch.chdir(tmp_path)
    code, err = _bad_run(tiny_data_path, capsys, override, "--n_heads=4")
    assert code == 2
    assert message in err and "Traceback" not in err
    assert err.count("\n") == 1, err  # one line
    # checked before the log file, the dataset or any checkpoint
    assert not os.path.exists(tmp_path / "saved")
    assert not os.path.exists(tmp_path / "log")


def test_a_refusal_of_recbole_evaluation_is_its_words(
    tiny_data_path, tmp_path, monkeypatch, capsys
):
    """RecBole refuses value metrics in a full ranking: its words, not a list of the
    known metrics (the metric is known)."""
    monkeypatch.chdir(tmp_path)
    code, err = _bad_run(
        tiny_data_path, capsys, "--metrics=['AUC']", "--valid_metric=AUC"
    )
    assert code == 2 and err.count("\n") == 1, err
    assert "do not match value-based metrics! (RecBole's words)" in err
    assert "Known metrics" not in err


def test_malformed_yaml_names_file_and_line(
    tiny_data_path, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    bad = tmp_path / "bad.yaml"
    bad.write_text("epochs: 2\nload_col:\n  inter: [user_id, item_id\n")
    code, err = _bad_run(tiny_data_path, capsys, f"--config_files={bad}")
    assert code == 2 and f"{bad}, line " in err and "Traceback" not in err
    listing = tmp_path / "list.yaml"
    listing.write_text("- epochs\n- 2\n")
    code, err = _bad_run(tiny_data_path, capsys, f"--config_files={listing}")
    assert code == 2 and "'key: value' lines" in err


def test_num_samples_must_be_positive(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, err = _cli_main(["--params_file=x.hyper", "--num_samples=0"], capsys)
    assert code == 2 and "--num_samples: must be an integer >= 1" in err


def test_help_text(capsys):
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "run_recbole_attn", os.path.join(REPO, "run_recbole_attn.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(SystemExit):
        module.main(["--help"])
    text = capsys.readouterr().out
    for expected in ("STOSA", "RKSA", "SASRec", "GRU4Rec", "--epochs=N", "examples:"):
        assert expected in text
    assert "--verbose" in text and "log/<model>/" in text


# ---------------------------------------------------------------------- unknown keys


def _warnings(model, dataset, tiny_data_path, **overrides):
    config = make_config(
        model, dataset, config_dict={"data_path": tiny_data_path, **overrides}
    )
    return config.warnings


def test_many_unknown_keys_are_ten_lines_and_one_for_the_rest(tiny_data_path):
    """A file of 40,000 unknown keys gave 40,000 warning lines (and a minute)."""
    keys = {f"nokey_{n:05d}": n for n in range(2000)}
    messages = _warnings("SASRecAP", "tiny", tiny_data_path, **keys)
    assert len(messages) == 11, messages[:12]
    assert all("'nokey_0000" in m for m in messages[:10])
    assert messages[-1].startswith(
        "1990 more keys ('nokey_00010', 'nokey_00011', 'nokey_00012', ...) are not "
        "read by SASRecAP and have no effect"
    ), messages[-1]


def test_misspelled_key_warns_with_the_closest_key(tiny_data_path):
    (message,) = _warnings("SASRecAP", "tiny", tiny_data_path, hiden_size=32)
    assert "'hiden_size'" in message and "did you mean 'hidden_size'?" in message
    (message,) = _warnings("STOSA", "tiny", tiny_data_path, dpp_k=3)
    assert "not read by STOSA" in message and "PAtt" in message
    # keys of RecBole, of the plugin, of the model (AWRSR: of its backbone too)
    assert not _warnings(
        "AWRSR",
        "tiny",
        tiny_data_path,
        epochs=1,
        eval_mask_history=True,
        ild_distance="jaccard",
        pvn_weight=0.1,
        refinement="add",
        backbone="STOSA",
    )
    assert not _warnings("GRU4Rec", "tiny", tiny_data_path, num_layers=2)


def test_every_key_the_package_reads_is_known():
    """A key read as config["..."] anywhere in recbole_attn is a key of some yaml we ship
    (or RecBole's, or a documented optional one): else it would warn as unknown."""
    from recbole_attn.plugin import MODELS
    from recbole_attn.engine.config import properties_dir

    pattern = re.compile(r"config\[\"([A-Za-z_0-9]+)\"\]")
    read = set()
    for folder, _, files in os.walk(os.path.join(REPO, "recbole_attn")):
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(folder, name)) as f:
                    read |= set(pattern.findall(f.read()))
    files = [os.path.join(properties_dir(), "overall.yaml")]
    for cls in MODELS.values():
        files += config_files(cls, "none")
    known = config_check.known_keys([], files)
    assert read - known == set()


# ---------------------------------------------------------------------- eval_args


def test_eval_args_override_updates_entries(tiny_data_path):
    config = make_config(
        "SASRecAP",
        "tiny",
        config_dict={"data_path": tiny_data_path, "eval_args": "{'mode': 'uni100'}"},
    )
    assert config["eval_args"]["split"] == {"LS": "valid_and_test"}
    assert config["eval_args"]["order"] == "TO"
    assert config["eval_args"]["mode"] == {"valid": "uni100", "test": "uni100"}


def test_every_field_of_a_file_loads_with_a_star(tiny_data_path, tmp_path, monkeypatch):
    """RecBole's ``load_col: {inter: '*'}`` (every field of the file) passes the checks
    before loading, labels included (it was refused: "load_col does not load
    'user_id'")."""
    from recbole_attn.data.checks import has_label
    from recbole_attn.engine.pipeline import check_before_loading

    monkeypatch.chdir(tmp_path)
    config = make_config(
        "SASRecAP",
        "tiny",
        config_dict={"data_path": tiny_data_path, "load_col": {"inter": "*"}},
    )
    check_before_loading(config, writes=False)
    assert has_label(config)
    config = make_config(
        "SASRecAP",
        "tiny",
        config_dict={"data_path": tiny_data_path, "load_col": {"inter": ["user_id"]}},
    )
    assert not has_label(config)


def test_a_threshold_on_a_column_not_loaded_is_one_line_before_loading(
    tiny_data_path, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    code, err = _bad_run(tiny_data_path, capsys, "--threshold={'rating': 4}")
    assert code == 2 and err.count("\n") == 1, err
    assert "threshold labels the interactions by 'rating', which is not a loaded" in err
    assert not os.path.exists(tmp_path / "log")


@pytest.mark.parametrize(
    "split, ok",
    [
        ({"LS": "valid_and_test"}, True),
        ({"RS": [0.8, 0.1, 0.1]}, True),
        ({"RS": [8, 1, 1]}, True),
        ({"RS": [0.8, -0.1, 0.3]}, False),
        ({"RS": [0.8, "a", 0.1]}, False),
        ({"RS": [0.8, True, 0.1]}, False),
        ({"LS": "valid_and_test", "RS": [0.8, 0.1, 0.1]}, False),
        ({"XS": [0.8, 0.1, 0.1]}, False),
    ],
)
def test_eval_args_split_rule(split, ok):
    """RecBole's split: leave-one-out ({LS: ...}) or ratios ({RS: [...]}, non-negative
    numbers)."""
    from recbole_attn.options.values import EvalArgs

    problem = EvalArgs().problem({"split": split})
    assert (problem is None) == ok, problem


# ---------------------------------------------------------------------- checkpoints


def _one_epoch(tiny_config, **extra):
    return run("SASRecAP", "tiny", config_dict={**tiny_config, "epochs": 1, **extra})


@pytest.mark.parametrize(
    "kind", ["missing", "truncated", "garbage", "pickled", "bit-flipped"]
)
def test_unreadable_resume_checkpoint_is_one_line(tiny_config, tmp_path, capsys, kind):
    path = tmp_path / f"{kind}.pth"
    if kind == "truncated":
        good = tmp_path / "good.pth"
        save_checkpoint({"state_dict": {"w": torch.ones(1000)}}, good)
        path.write_bytes(good.read_bytes()[:2000])
    elif kind == "garbage":
        path.write_bytes(os.urandom(3000))
    elif kind == "pickled":
        from argparse import Namespace

        torch.save({"config": Namespace(), "state_dict": {}}, path)
    elif kind == "bit-flipped":  # a byte of a global's name: it was "pickled objects"
        save_checkpoint({"state_dict": {"w": torch.ones(1000)}}, path)
        data = bytearray(path.read_bytes())
        data[data.index(b"collections")] ^= 0x10
        path.write_bytes(bytes(data))
    argv = [f"--{k}={v}" for k, v in tiny_config.items() if k != "load_col"]
    code, err = _cli_main(
        ["--model=SASRecAP", "--dataset=tiny", f"--resume_checkpoint={path}", *argv],
        capsys,
    )
    assert code == 2 and str(path) in err and "Traceback" not in err
    assert "weights_only=False" not in err  # never advise unsafe loading
    expected = {
        "missing": "not found",
        "truncated": "not a readable checkpoint",
        "garbage": "not a readable checkpoint",
        "pickled": "pickled Python objects",
        "bit-flipped": "data.pkl fails the checksum torch.save wrote (a changed byte",
    }[kind]
    assert expected in err
    assert not os.path.exists(tiny_config["checkpoint_dir"])


def test_checkpoint_on_other_data_is_a_clear_error(tiny_config, tmp_path):
    first = _one_epoch(tiny_config)
    last = first["saved_model_file"][: -len(".pth")] + "-last.pth"
    data = torch.load(last, weights_only=True)["data"]
    assert {k: data[k] for k in ("dataset", "n_users", "n_items")} == {
        "dataset": "tiny",
        "n_users": 61,
        "n_items": 41,
    }
    assert data["n_interactions"] > 61 and len(data["fingerprint"]) == 16
    other = tmp_path / "other"
    write_tiny_dataset(str(other), name="tiny", n_users=30, n_items=25, seed=1)
    with pytest.raises(
        CheckpointError, match=r"trained on 'tiny' \(61 users, 41 items"
    ):
        run(
            "SASRecAP",
            "tiny",
            config_dict={**tiny_config, "epochs": 2, "data_path": str(other)},
            resume_checkpoint=last,
        )
    with pytest.raises(CheckpointError, match="31 users, 26 items"):
        load_data_and_model(first["saved_model_file"], {"data_path": str(other)})


def test_finished_run_is_not_resumed_over_its_best_model(tiny_config, caplog):
    """... and says nothing before it refuses (it said "training continues with epoch
    2/1", then refused)."""
    first = _one_epoch(tiny_config)
    best = first["saved_model_file"]
    before = open(best, "rb").read()
    last = best[: -len(".pth")] + "-last.pth"
    caplog.set_level(logging.INFO)
    caplog.clear()
    with pytest.raises(ConfigError, match="nothing to train. Raise --epochs"):
        _one_epoch(tiny_config, resume_checkpoint=last)
    assert open(best, "rb").read() == before
    assert "training continues with epoch" not in caplog.text


def test_load_data_and_model_trainer_evaluates_the_loaded_model(tiny_config):
    result = _one_epoch(tiny_config)
    _, _, trainer, (_, _, test_data) = load_data_and_model(result["saved_model_file"])
    assert dict(trainer.evaluate(test_data)) == dict(result["test_result"])


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_checkpoint_files_follow_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        save_checkpoint({"state_dict": {}}, tmp_path / "c.pth")
    finally:
        os.umask(old)
    mode = stat.S_IMODE(os.stat(tmp_path / "c.pth").st_mode)
    assert mode == 0o666 & ~umask
    assert load_checkpoint(tmp_path / "c.pth")["state_dict"] == {}


def test_failed_trial_is_one_line():
    from recbole_attn.commands.tuning import trial_error_line

    class RayTaskError(Exception):
        cause = ConfigError("hidden_size must be an integer >= 1, got 0")

    error = RayTaskError("\x1b[36mray::trial()\x1b[39m\nTraceback (most recent...)\n")
    line = trial_error_line(error, "/tmp/run")
    assert line == (
        "a trial failed: ConfigError: hidden_size must be an integer >= 1, got 0 "
        "(full trace: /tmp/run/error.txt)"
    )
    plain = trial_error_line(RuntimeError("\x1b[31mboom\x1b[0m"))
    assert "\x1b" not in plain and plain.endswith("RuntimeError: boom")


HEADER = ["metric", "valid", "test"]


def test_a_run_prints_its_results_as_a_table_and_writes_them_beside_its_model(
    tiny_data_path, tmp_path, monkeypatch, capsys
):
    """One line a metric (validation and test, the selected metric first and marked);
    the full dicts in ``<checkpoint stem>.json``, strict JSON, the run's own numbers."""
    import json

    from recbole_attn.cli import main

    monkeypatch.chdir(tmp_path)
    argv = ["--model=SASRecAP", "--dataset=tiny", f"--data_path={tiny_data_path}"]
    argv += ["--epochs=1", "--state=ERROR", "--topk=[5,10]", *TINY_ARGS]
    assert main(argv + ["--checkpoint_dir=saved"]) == 0
    out = capsys.readouterr().out.splitlines()
    (model,) = [line.split(": ", 1)[1] for line in out if line.startswith("model: ")]
    (path,) = [line.split(": ", 1)[1] for line in out if line.startswith("results: ")]
    assert path == os.path.splitext(model)[0] + ".json"
    with open(path) as f:
        record = json.load(f)
    assert record["model"] == "SASRecAP" and record["saved_model_file"] == model
    assert record["valid_metric"] == "ndcg@10"
    test, valid = record["test_result"], record["best_valid_result"]
    assert set(test) == {f"{m}@{k}" for m in ("recall", "ndcg", "mrr") for k in (5, 10)}
    (header,) = [n for n, line in enumerate(out) if line.split() == HEADER]
    rows = out[header + 1 : header + 1 + len(test)]
    assert rows[0].endswith("(selected on)") and rows[0].startswith("ndcg@10 ")
    for row in rows:
        name, v, t = row.split()[:3]
        assert float(v) == pytest.approx(valid[name], abs=5e-5)
        assert float(t) == pytest.approx(test[name], abs=5e-5)
    assert record["best_valid_score"] == pytest.approx(valid["ndcg@10"])


# ---------------------------------------------------------------------- the console


@pytest.mark.slow
def test_console_is_concise_and_the_log_has_everything(tiny_data_path, tmp_path):
    """The real command: progress and results on the console, a warning for a misspelled
    key, the configuration and model summary only in the log file (and with --verbose).
    """
    env = {**os.environ, "PYTHONPATH": REPO}
    args = ["--model=SASRecAP", "--dataset=tiny", f"--data_path={tiny_data_path}"]
    args += ["--epochs=1", "--hiden_size=8", *TINY_ARGS]
    script = os.path.join(REPO, "run_recbole_attn.py")

    def cli(*extra):
        return subprocess.run(
            [sys.executable, script, *args, *extra],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )

    proc = cli()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert re.search(r"(?m)^recall@5 +\d\.\d{4} +\d\.\d{4}$", proc.stdout)
    console = proc.stderr
    assert "did you mean 'hidden_size'?" in console
    # the budget, then one line per epoch with the losses by name, no colour codes
    assert "training SASRecAP for up to 1 epochs" in console
    (epoch_line,) = [line for line in console.splitlines() if " epoch 1/1: " in line]
    assert "loss CE " in epoch_line and "ndcg@10 " in epoch_line
    assert "epoch 0 training" not in console and "valid result" not in console
    assert "\x1b[" not in console
    assert "General Hyper Parameters" not in console and "Embedding(" not in console
    assert "FutureWarning" not in console and "Traceback" not in console
    (log_line,) = [line for line in console.splitlines() if " log: " in line]
    log_file = tmp_path / log_line.split(" log: ")[1].split(" ")[0]
    log = log_file.read_text()
    assert "General Hyper Parameters" in log and "Embedding(" in log
    assert "epoch 0 training" in log  # RecBole's lines of every epoch
    verbose = cli("--verbose")
    assert verbose.returncode == 0
    assert "General Hyper Parameters" in verbose.stderr


# ---------------------------------------------------------------------- README


#: the README lines the test runs: the package's command, and the checkout's entry points
README_PREFIXES = (
    "recbole-attn ",
    "python run_recbole_attn.py",
    "python dataset_scripts/",
)


def _readme_commands():
    """Every ``recbole-attn ...``, ``python run_recbole_attn.py ...`` and ``python
    dataset_scripts/...`` line of README.md's code blocks (continuation lines joined), in
    order."""
    with open(os.path.join(REPO, "README.md")) as f:
        blocks = f.read().split("```")[1::2]
    commands = []
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if line.startswith(README_PREFIXES):
                commands.append(shlex.split(line))
    return commands


def _cli_argv(command):
    """A README command as the arguments of ``recbole_attn.cli.main``."""
    if command[0] == "recbole-attn":
        return command[1:]
    if command[1] == "run_recbole_attn.py":
        return command[2:]
    name = os.path.basename(command[1])[: -len(".py")]  # dataset_scripts/<name>.py
    return ["convert", name] + command[2:]


def _sequences_fixture(path):
    """An S3Rec-style 'uid i1 i2 ...' file (what README's seqfile line reads)."""
    with open(path, "w") as f:
        for u in range(1, 41):
            items = [(u * 7 + t * 3) % 30 + 1 for t in range(6 + u % 7)]
            f.write(f"{u} {' '.join(str(i) for i in dict.fromkeys(items))}\n")
    return path


@pytest.mark.slow
def test_readme_commands_run_as_written(tmp_path, monkeypatch, capsys):
    """Each README command, as written, on fixtures: converters on a small raw file in
    place of the downloaded one, models for one epoch on tiny data in place of the real
    ones."""
    from recbole_attn.cli import main

    commands = _readme_commands()
    assert any(c[0] == "recbole-attn" and "--model=STOSA" in c for c in commands)
    assert any(_cli_argv(c)[0] == "convert" for c in commands)
    monkeypatch.chdir(tmp_path)
    fixtures = tmp_path / "fixtures"
    # the bundled ml-100k's fields: its genres are the token_seq field `class`
    write_tiny_dataset(str(fixtures), name="ml-100k", category_field="class")
    for command in commands:
        argv = _cli_argv(command)
        if argv[0] == "serve":  # a service that runs until stopped: test_serving.py
            assert "--model_file=model.onnx" in argv  # the file the export writes
            continue
        if argv[0] in ("recommend", "evaluate", "compare", "export-onnx"):
            code = main(argv)  # from saved models
        elif argv[0] == "convert":
            assert argv[1] == "seqfile", f"no fixture for {command}"
            at = argv.index("--sequences") + 1
            argv[at] = _sequences_fixture(str(tmp_path / os.path.basename(argv[at])))
            code = main(argv + ["--k_core=2"])
        else:
            overrides = dict(a[2:].split("=", 1) for a in argv)
            overrides.update(dict(a[2:].split("=", 1) for a in TINY_ARGS))
            overrides.update(epochs="1", train_batch_size="16", state="ERROR")
            if overrides.get("dataset", "ml-100k") == "ml-100k":
                overrides["data_path"] = str(fixtures)
            code = main([f"--{k}={v}" for k, v in overrides.items()])
        err = capsys.readouterr().err
        assert code == 0, f"{' '.join(command)}\n{err[-2000:]}"


@pytest.mark.parametrize(
    "value, tty, expected",
    [
        (None, True, True),
        (None, False, False),
        (False, True, False),
        (True, False, True),
    ],
)
def test_progress_bar_on_a_terminal_unless_set(monkeypatch, value, tty, expected):
    from recbole_attn.engine.logs import show_progress

    monkeypatch.setattr("sys.stderr.isatty", lambda: tty)
    assert show_progress({"show_progress": value}) is expected


def test_repeated_runs_do_not_nest_the_console_streams(tiny_data_path):
    """RecBole's init_logger wraps sys.stdout/sys.stderr (colorama) on every call; an
    in-process search builds hundreds of runs."""
    from recbole_attn.engine.logs import init_logging

    config = make_config("SASRecAP", "tiny", config_dict={"data_path": tiny_data_path})
    before = (sys.stdout, sys.stderr)
    for _ in range(3):
        init_logging(config)
    assert (sys.stdout, sys.stderr) == before


def test_value_conversion_is_silent(recwarn):
    from recbole_attn.options.values import convert_value

    assert convert_value("2in") == "2in" and convert_value("[5, 10]") == [5, 10]
    assert not [w for w in recwarn if issubclass(w.category, SyntaxWarning)]


def _changed_stosa_defaults(monkeypatch, tmp_path, changes):
    """Make the shipped STOSA.yaml read as if its defaults had changed."""
    from recbole_attn.engine import config

    shipped = os.path.join(config.properties_dir(), "model", "STOSA.yaml")
    changed = tmp_path / "STOSA.yaml"
    text = open(shipped).read()
    for key, value in changes.items():
        text = re.sub(rf"(?m)^{key}:.*$", f"{key}: {value}", text)
    changed.write_text(text)
    original = config.config_files

    def config_files(*args, **kwargs):
        return [str(changed) if p == shipped else p for p in original(*args, **kwargs)]

    monkeypatch.setattr(config, "config_files", config_files)


PAPER_STOSA = {"stosa_preset": "paper"}


def test_checkpoint_rebuilds_the_model_it_was_trained_with(
    tiny_config, tmp_path, monkeypatch
):
    """A checkpoint records the resolved configuration, shipped defaults included: after
    a default changes, loading it rebuilds the model as trained (same test result)."""
    config = {**tiny_config, "epochs": 1}
    result = run("STOSA", "tiny", config_dict=config)
    _changed_stosa_defaults(monkeypatch, tmp_path, PAPER_STOSA)
    from recbole_attn.engine.config import make_config

    changed = make_config("STOSA", "tiny", config_dict=tiny_config)
    assert changed["stosa_preset"] == "paper"  # a new run reads the changed default
    config, net, trainer, (_, _, test_data) = load_data_and_model(
        result["saved_model_file"]
    )
    assert config["stosa_preset"] == "official" and hasattr(net, "input_layer_norm")
    assert dict(trainer.evaluate(test_data)) == dict(result["test_result"])


def test_a_trial_ray_lost_is_one_line_with_the_reason():
    """Ray's memory monitor killed a trial: ~150 lines of trace and object-store dump
    before; now the reason and the path of the trace, and Tune's own log of the trace is
    not printed."""
    import logging

    import ray.exceptions

    from recbole_attn.commands.tuning import trial_error_line
    from recbole_attn.commands.tuning.ray_search import _quiet_ray

    oom = ray.exceptions.OutOfMemoryError(
        "Task was killed due to the node running low on memory.\nMemory on the node "
        "(IP: 10.0.0.1, ID: abc) where the task (actor ID: x, name=ImplicitFunc.__init__, "
        "pid=123, memory used=0.5GB) was running was 15.70GB / 16.00GB (0.98), which "
        "exceeds the memory usage threshold of 0.95. Ray killed this worker.\nTop 10 "
        "memory users:\nPID\tMEM(GB)\tCOMMAND\n123\t0.5\tray::ImplicitFunc\nRefer to "
        "the documentation on how to address the out of memory issue: https://docs.ray.io"
    )
    line = trial_error_line(oom, "/tmp/run")
    assert line == (
        "a trial failed: Ray stopped it: the machine ran low on memory (15.70GB / "
        "16.00GB used, Ray's threshold 0.95); free memory, run fewer trials at once "
        "(--max_concurrent) or a smaller model (full trace: /tmp/run/error.txt)"
    )
    died = ray.exceptions.WorkerCrashedError()
    assert "its worker process died" in trial_error_line(died)
    _quiet_ray()
    controller = logging.getLogger("ray.tune.execution.tune_controller")
    trace = logging.LogRecord(
        controller.name, logging.ERROR, "", 0, "Trial task failed for trial x", (), None
    )
    other = logging.LogRecord(
        controller.name, logging.ERROR, "", 0, "something else", (), None
    )
    assert not controller.filter(trace) and controller.filter(other)


def test_the_epoch_line_says_what_is_left_and_when_it_stops(tiny_config):
    """RecBole stops once cur_step exceeds stopping_step: with cur_step = stopping_step
    one more epoch without gain stops it, beyond that it stops now (the line said "-2 s
    if it does not improve" at the stopping epoch)."""
    from recbole_attn.engine.quick_start import build

    _, _, trainer, _ = build(
        "SASRecAP",
        "tiny",
        config_dict={**tiny_config, "epochs": 100, "stopping_step": 5},
    )
    from recbole_attn.engine.logs import EpochLines

    trainer.last_epoch_seconds = {"train": 1.0, "valid": 0.0}
    trainer.last_losses = 0.5
    trainer.best_valid_score = 0.1
    lines = {}
    for step in (0, 5, 6):
        trainer.cur_step = step
        epochs = EpochLines(trainer)
        epochs.evaluated(9)
        lines[step] = epochs.epoch_line(9, 0.05)
    assert lines[0].endswith("left: at most 1 min 30 s (6 s if it does not improve)")
    assert lines[5].endswith("left: at most 1 min 30 s (1 s if it does not improve)")
    assert lines[6].endswith("stops here: no better ndcg@10 in 5 evaluations")


@pytest.mark.parametrize(
    "seconds, written",
    [
        (0.4, "0 s"),
        (59.4, "59 s"),
        (59.6, "1 min"),
        (60, "1 min"),
        (61, "1 min 1 s"),
        (299.6, "5 min"),
        (3599.4, "59 min 59 s"),
        (3600, "1 h"),
        (3629, "1 h"),
        (3630, "1 h 1 min"),
        (7170, "2 h"),
        (9000, "2 h 30 min"),
    ],
)
def test_durations_read_as_people_write_them(seconds, written):
    """Seconds never count past 59 (the console said "4 min, 60 s", "4 min, 61 s")."""
    from recbole_attn.engine.logs import duration

    assert duration(seconds) == written


def test_the_console_counts_epochs_from_one_everywhere(
    tiny_data_path, tmp_path, monkeypatch, capsys
):
    """The epoch lines count from 1 ("best ..., epoch 2"); RecBole's closing line counts
    from 0 ("best eval result in epoch 1") and was on the console too (issue 53): the
    console now closes with the trainer's line, RecBole's stays in the log file."""
    import glob

    from recbole.trainer import Trainer

    scores = iter([0.3, 0.5, 0.4, 0.2, 0.1, 0.05])

    def valid_epoch(self, valid_data, show_progress=False):
        score = next(scores)
        return score, {"ndcg@10": score}

    monkeypatch.setattr(Trainer, "_valid_epoch", valid_epoch)
    monkeypatch.chdir(tmp_path)
    args = [
        "--model=SASRecAP",
        "--dataset=tiny",
        f"--data_path={tiny_data_path}",
        "--epochs=20",
        "--stopping_step=2",
        "--show_progress=False",
        "--train_batch_size=16",
    ] + TINY_ARGS
    from recbole_attn.cli import main

    logging.getLogger().handlers.clear()  # the run's own console, not pytest's capture
    assert main(args) == 0
    logging.getLogger().handlers.clear()
    console = capsys.readouterr().err
    assert "Finished training" not in console
    best = re.findall(r"\(best 0\.5000, epoch (\d+)\)", console)
    assert best and set(best) == {"2"}, console
    assert re.search(r"epoch 5/20: .*stops here", console), console
    assert (
        "training stopped early after epoch 5 of 20; best ndcg@10 0.5000 in epoch 2"
        in console
    )
    (log,) = glob.glob("log/SASRecAP/*.log")
    assert "Finished training, best eval result in epoch 1" in open(log).read()
