"""A run that is stopped (issue 65): Ctrl-C or SIGTERM at any moment says, in one line
with the console's own epoch numbers, what is saved and the command that continues or
evaluates it, and that command works."""

import logging
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO
from test_pipeline import _cli_main
from test_safety import _run_args


def _interrupt_in_epoch(monkeypatch, epoch_idx, how="ctrl-c"):
    """Stop the training when it starts ``epoch_idx`` (0-based; the console's epoch
    ``epoch_idx + 1``): a KeyboardInterrupt, or a real SIGTERM sent to this process."""
    from recbole_attn.engine.trainer import AttnTrainer

    real = AttnTrainer._train_epoch

    def stop(self, train_data, idx, *args, **kwargs):
        if idx == epoch_idx:
            self.epoch = idx
            if how == "sigterm":
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)  # the handler raises before this ends
            raise KeyboardInterrupt
        return real(self, train_data, idx, *args, **kwargs)

    monkeypatch.setattr(AttnTrainer, "_train_epoch", stop)
    return real


def test_ctrl_c_counts_epochs_as_the_console_and_the_resume_continues_there(
    tiny_data_path, tmp_path, monkeypatch, capsys, caplog
):
    """After the console's ``epoch 3/4`` the run is stopped in epoch 4: the state after
    epoch 3 is saved, and the resumed run says it continues with epoch 4/4 and prints
    ``epoch 4/4`` (before: "the state after epoch 2", then "from epoch 3")."""
    from recbole_attn.engine.trainer import AttnTrainer

    real = _interrupt_in_epoch(monkeypatch, 3)
    monkeypatch.chdir(tmp_path)
    caplog.set_level(logging.INFO)  # the console's lines (pytest holds the root logger)
    code, err = _cli_main(
        _run_args(tiny_data_path, "--epochs=4", "--state=INFO"), capsys
    )
    assert code == 130, err
    assert "epoch 3/4: loss" in caplog.text
    best_before = _best(caplog.text, 3)
    caplog.clear()
    last = err.strip().splitlines()[-1]
    assert last.startswith(
        "error: interrupted in epoch 4/4; the state after epoch 3/4 is saved: continue "
        "with the same command and --resume_checkpoint="
    ), last
    assert "Traceback" not in err
    resume = last.split("--resume_checkpoint=")[1]
    assert os.path.isfile(resume)
    monkeypatch.setattr(AttnTrainer, "_train_epoch", real)
    real_valid = AttnTrainer._valid_epoch

    def worse(self, valid_data, show_progress=False):  # epoch 4 is not the best
        score, result = real_valid(self, valid_data, show_progress)
        return 0.0, {k: 0.0 for k in result}

    monkeypatch.setattr(AttnTrainer, "_valid_epoch", worse)
    code, err = _cli_main(
        _run_args(
            tiny_data_path,
            "--epochs=4",
            "--state=INFO",
            f"--resume_checkpoint={resume}",
        ),
        capsys,
    )
    assert code == 0, err
    console = caplog.text
    assert "training continues with epoch 4/4" in console
    assert "(from epoch 4)" in console
    assert "epoch 4/4: loss" in console and "epoch 3/4: loss" not in console
    # the best is the interrupted run's, with its epoch (was: the resumed epoch's number)
    assert _scores(console, 4) == (0.0, *best_before), console
    assert f"best ndcg@10 {best_before[0]:.4f} in epoch {best_before[1]}" in console


def _scores(console, epoch):
    """The console line of ``epoch``: its score, the best score and the best's epoch."""
    line = next(l for l in console.splitlines() if f"epoch {epoch}/4: loss" in l)
    found = re.search(r"\w+@\d+ ([0-9.]+) \(best ([0-9.]+), epoch (\d+)\)", line)
    assert found, line
    return float(found[1]), float(found[2]), int(found[3])


def _best(console, epoch):
    return _scores(console, epoch)[1:]


def test_ctrl_c_in_the_final_test_advises_an_evaluate_that_works(
    tiny_data_path, tmp_path, monkeypatch, capsys
):
    """Before: "--resume_checkpoint=...-last.pth", which the next command refused
    ("nothing to train"), pointing to a Python function."""
    from recbole_attn.engine.trainer import AttnTrainer

    real = AttnTrainer.evaluate

    def stop_the_test(self, eval_data, load_best_model=True, **kwargs):
        if load_best_model:  # the test of the best model (validation: False)
            raise KeyboardInterrupt
        return real(self, eval_data, load_best_model, **kwargs)

    monkeypatch.setattr(AttnTrainer, "evaluate", stop_the_test)
    monkeypatch.chdir(tmp_path)
    code, err = _cli_main(_run_args(tiny_data_path, "--epochs=2"), capsys)
    assert code == 130 and err.count("\n") == 1, err
    assert err.startswith(
        "error: interrupted during the test; the training is complete and its best "
        "model is saved: evaluate it with recbole-attn evaluate --model_file="
    ), err
    model_file = err.split("--model_file=")[1].strip()
    assert os.path.getsize(model_file) > 0
    monkeypatch.setattr(AttnTrainer, "evaluate", real)
    code, err = _cli_main(["evaluate", f"--model_file={model_file}"], capsys)
    assert code == 0, err
    # the finished run's -last.pth: the refusal names the command, and it works
    last = model_file[: -len(".pth")] + "-last.pth"
    code, err = _cli_main(
        _run_args(tiny_data_path, "--epochs=2", f"--resume_checkpoint={last}"), capsys
    )
    assert code == 2 and err.count("\n") == 1, err
    assert "nothing to train" in err and "recbole_attn.engine.quick_start" not in err
    assert err.strip().endswith(
        f"evaluate its best model with recbole-attn evaluate --model_file={model_file}"
    ), err


def test_sigterm_is_handled_as_ctrl_c(tiny_data_path, tmp_path, monkeypatch, capsys):
    """SIGTERM (what schedulers and ``timeout`` send) ended the run without a word; now
    the Ctrl-C line, exit status 143, and the handler is put back afterwards."""
    _interrupt_in_epoch(monkeypatch, 1, how="sigterm")
    monkeypatch.chdir(tmp_path)
    before = signal.getsignal(signal.SIGTERM)
    code, err = _cli_main(_run_args(tiny_data_path, "--epochs=3"), capsys)
    assert code == 143 and err.count("\n") == 1, err
    assert err.startswith(
        "error: interrupted in epoch 2/3; the state after epoch 1/3 is saved: "
    ), err
    assert os.path.isfile(err.split("--resume_checkpoint=")[1].strip())
    assert signal.getsignal(signal.SIGTERM) == before


@pytest.mark.slow
def test_sigterm_to_a_training_process(tiny_data_path, tmp_path):
    """A real process, stopped by ``kill -TERM`` after its first epoch line."""
    argv = [sys.executable, os.path.join(REPO, "run_recbole_attn.py")]
    argv += _run_args(tiny_data_path, "--epochs=200", "--state=INFO")
    argv += ["--stopping_step=200"]
    proc = subprocess.Popen(
        argv, cwd=tmp_path, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if "epoch 1/200: loss" in line:
            proc.send_signal(signal.SIGTERM)
            break
    rest = proc.communicate(timeout=120)[1]
    err = "".join(lines) + rest
    assert proc.returncode == 143, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: interrupted in epoch "), last
    assert "is saved: continue with the same command and --resume_checkpoint=" in last
    assert os.path.isfile(os.path.join(tmp_path, last.split("=", 1)[1]))


# ---------------------------------------------------------------------- a search


def _search_argv(tiny_data_path, tmp_path, *extra):
    space = tmp_path / "space.hyper"
    space.write_text("hidden_size choice [8,16,32]\n")
    return [
        "tune",
        *_run_args(tiny_data_path, "--epochs=2"),
        f"--params_file={space}",
        f"--output={tmp_path / 'out'}",
        *extra,
    ]


def _raise_in_the_second_trial(monkeypatch, error):
    """Make the trainer raise ``error`` in the first epoch of a search's second trial
    (2 epochs a trial: the third epoch trained); returns the real epoch."""
    from recbole_attn.engine.trainer import AttnTrainer

    real = AttnTrainer._train_epoch
    calls = []

    def raising(self, train_data, idx, *args, **kwargs):
        calls.append(idx)
        if len(calls) == 3:
            raise error
        return real(self, train_data, idx, *args, **kwargs)

    monkeypatch.setattr(AttnTrainer, "_train_epoch", raising)
    return real


def test_a_stopped_search_keeps_its_trials_and_the_same_command_continues_it(
    tiny_data_path, tmp_path, monkeypatch, capsys
):
    """hyperopt (in this process): before, Ctrl-C in a trial was the trial's resume
    advice, no output kept the finished trials, and the same command then refused the
    search's own folder."""
    import csv
    import json

    from recbole_attn.engine.trainer import AttnTrainer

    real = _raise_in_the_second_trial(monkeypatch, KeyboardInterrupt)
    monkeypatch.chdir(tmp_path)
    argv = _search_argv(
        tiny_data_path, tmp_path, "--tool=hyperopt", "--algo=exhaustive"
    )
    code, err = _cli_main(argv, capsys)
    out = tmp_path / "out"
    assert code == 130 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(
        f"error: search interrupted: 1 of 3 trials finished, kept in {out}/trials.csv; "
        "continue with the same command (it runs the trials left, then selects and "
        "tests)"
    ), err
    with open(out / "trials.csv") as f:
        (first,) = list(csv.DictReader(f))
    assert first["hidden_size"] == "8" and os.path.isfile(first["saved_model_file"])
    assert not (out / "result.json").exists()
    assert "interrupted after 1 of 3 trials" in (out / "trials.md").read_text()
    empty = [p for p in out.rglob("*.pth") if p.stat().st_size == 0]
    assert not empty, "the stopped trial's claimed checkpoint is released"
    # the same command continues: the finished trial is kept, the two others run
    monkeypatch.setattr(AttnTrainer, "_train_epoch", real)
    code, err = _cli_main(argv, capsys)
    assert code == 0, err
    result = json.loads((out / "result.json").read_text())
    assert [t["params"]["hidden_size"] for t in result["trials"]] == [8, 16, 32]
    assert result["trials"][0]["saved_model_file"] == first["saved_model_file"]
    assert not (out / "interrupted.json").exists()
    # a finished search is an earlier search's results again
    code, err = _cli_main(argv, capsys)
    assert code == 2 and "would replace" in err, err


class _Killed(BaseException):
    """The process ends here: no ``except`` of the package runs (as on SIGKILL)."""


def test_a_search_killed_after_a_trial_keeps_it_and_the_same_command_runs_the_rest(
    tiny_data_path, tmp_path, monkeypatch, capsys
):
    """hyperopt (in this process), ended in its second trial where no handler of the
    package runs (SIGKILL): before, the finished trial was in no record (the stop's
    record is written by the handler), so the same command refused the folder's
    ``saved`` ("would replace"), and ``--overwrite`` started over."""
    import json

    from recbole_attn.engine.trainer import AttnTrainer

    real = _raise_in_the_second_trial(monkeypatch, _Killed)
    monkeypatch.chdir(tmp_path)
    argv = _search_argv(
        tiny_data_path, tmp_path, "--tool=hyperopt", "--algo=exhaustive"
    )
    with pytest.raises(_Killed):
        _cli_main(argv, capsys)
    out = tmp_path / "out"
    (first,) = json.loads((out / "interrupted.json").read_text())["trials"]
    assert first["params"] == {"hidden_size": 8}
    monkeypatch.setattr(AttnTrainer, "_train_epoch", real)
    code, err = _cli_main(argv, capsys)
    assert code == 0, err
    result = json.loads((out / "result.json").read_text())
    assert [t["params"]["hidden_size"] for t in result["trials"]] == [8, 16, 32]
    assert result["trials"][0]["saved_model_file"] == first["saved_model_file"]
    assert not (out / "interrupted.json").exists()


#: the environment of a search run as a command: each progress line as it comes
UNBUFFERED = {**os.environ, "PYTHONUNBUFFERED": "1"}


def _ray_search_argv(tiny_data_path, tmp_path, epochs=2):
    """The command line of a Ray Tune search of :func:`_search_argv`'s, one trial at a
    time, ``epochs`` a trial."""
    argv = [sys.executable, os.path.join(REPO, "run_recbole_attn.py")]
    argv += _search_argv(
        tiny_data_path, tmp_path, "--max_concurrent=1", "--algo=exhaustive"
    )[1:]
    return [a.replace("--epochs=2", f"--epochs={epochs}") for a in argv]


def _stop_after_the_first_trial(argv, cwd, stop, **popen):
    """Start the search ``argv``; call ``stop(proc)`` when its first finished trial's
    line comes; returns the process and the lines it printed until then."""
    proc = subprocess.Popen(
        argv, cwd=cwd, stdout=subprocess.PIPE, text=True, env=UNBUFFERED, **popen
    )
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("[1/"):
            stop(proc)
            break
    return proc, lines


@pytest.mark.slow
def test_a_ray_search_killed_after_a_trial_runs_only_the_trials_left(
    tiny_data_path, tmp_path
):
    """SIGKILL to a Ray search (its whole process group) after its first finished
    trial: before, that trial was only in Ray's files, which are not read (they are
    pickles), and the same command ran every trial again. Now the search's own record
    is written after each trial: the same command runs only the trial left."""
    import json

    argv = _ray_search_argv(tiny_data_path, tmp_path)
    space = tmp_path / "space.hyper"
    space.write_text("hidden_size choice [8,16]\n")
    proc, _ = _stop_after_the_first_trial(
        argv,
        tmp_path,
        lambda proc: os.killpg(proc.pid, signal.SIGKILL),
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    out = tmp_path / "out"
    (first,) = json.loads((out / "interrupted.json").read_text())["trials"]
    done = subprocess.run(
        argv, cwd=tmp_path, capture_output=True, text=True, env=UNBUFFERED
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("] trial ") == 1, done.stdout
    assert "[2/2] trial " in done.stdout, done.stdout
    result = json.loads((out / "result.json").read_text())
    assert sorted(t["params"]["hidden_size"] for t in result["trials"]) == [8, 16]
    assert first in result["trials"] or first["saved_model_file"] in [
        t["saved_model_file"] for t in result["trials"]
    ]


class _Planted:
    """A pickle whose loading runs code: it writes its marker file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.mark.slow
def test_ctrl_c_stops_a_ray_search_that_the_same_command_continues(
    tiny_data_path, tmp_path
):
    """Ray Tune: SIGINT after the first finished trial; then the same command runs the
    trials left from the search's own records and finishes the search. Before, it
    restored Ray's experiment (``Tuner.restore``), which unpickles the folder's
    ``tuner.pkl`` and the trials' ``params.pkl``: one planted there ran its code."""
    import json
    import pickle

    argv = _ray_search_argv(tiny_data_path, tmp_path, epochs=3)
    proc, lines = _stop_after_the_first_trial(
        argv,
        tmp_path,
        lambda proc: proc.send_signal(signal.SIGINT),
        stderr=subprocess.PIPE,
    )
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, "".join(lines) + out + err
    assert "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: search interrupted: "), err
    assert "(it runs the trials left, then selects and tests)" in last, last
    with open(tmp_path / "out" / "trials.csv") as f:
        kept = len(f.read().splitlines()) - 1
    assert kept >= 1, "the finished trial is kept"
    # a search folder from elsewhere: every pickle of Ray's experiment is planted
    experiment = tmp_path / "out" / "ray" / "recbole_attn"
    planted = [experiment / "tuner.pkl", *experiment.glob("*/params.pkl")]
    assert len(planted) >= 2, sorted(experiment.rglob("*"))
    for n, path in enumerate(planted):
        path.write_bytes(pickle.dumps(_Planted(tmp_path / f"ran-{n}")))
    done = subprocess.run(
        argv, cwd=tmp_path, capture_output=True, text=True, env=UNBUFFERED
    )
    assert done.returncode == 0, done.stderr
    assert not list(tmp_path.glob("ran-*")), "a planted pickle ran"
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    assert sorted(t["params"]["hidden_size"] for t in result["trials"]) == [8, 16, 32]
    # the continuation ran only the trials left, in an experiment of its own
    assert done.stdout.count("] trial ") == 3 - kept, done.stdout
    assert (tmp_path / "out" / "ray" / "recbole_attn.1").is_dir()


def test_the_same_command_takes_over_the_folder_of_a_killed_search(
    tiny_data_path, tmp_path, monkeypatch, capsys
):
    """A search killed (SIGKILL, the machine's memory killer) left its claim, an empty
    result.json, and its trials' folders: before, the same command refused ("remove
    the file"). A claim whose owner lives is still another search's."""
    import json

    from recbole_attn.files import owner_tag

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    out = tmp_path / "out"
    (out / "saved" / "trial_0").mkdir(parents=True)
    (out / "result.json").write_text("")
    host = owner_tag().rpartition("-")[0]
    (out / ".search.owner").write_text(f"{host}-{dead.pid}\n")
    monkeypatch.chdir(tmp_path)
    argv = _search_argv(
        tiny_data_path, tmp_path, "--tool=hyperopt", "--algo=exhaustive"
    )
    code, err = _cli_main(argv, capsys)
    assert code == 0, err
    assert len(json.loads((out / "result.json").read_text())["trials"]) == 3
    assert not (out / ".search.owner").exists()
    # alive: another search's
    other = tmp_path / "other"
    other.mkdir()
    (other / "result.json").write_text("")
    (other / ".search.owner").write_text(owner_tag() + "\n")
    code, err = _cli_main([a.replace(str(out), str(other)) for a in argv], capsys)
    assert code == 2 and "being written by another search" in err, err


def test_a_search_takes_sigint_also_where_it_started_ignored():
    """A shell's background job (``cmd &``) starts with SIGINT ignored; Ray Tune takes
    it as a stop once trials run, so the search's start-up (before) does too."""
    from recbole_attn.options.arguments import sigint_as_interrupt

    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with pytest.raises(KeyboardInterrupt):
            with sigint_as_interrupt():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(5)  # the handler raises before this ends
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)


def test_a_sigint_held_comes_after_the_block_to_the_handler_before():
    """``sigint_held``: a SIGINT inside the block does not stop it; it comes when the
    block ends, to the handler there before, which is put back."""
    from recbole_attn.options.arguments import sigint_as_interrupt, sigint_held

    done = []
    with sigint_as_interrupt():
        ours = signal.getsignal(signal.SIGINT)
        with pytest.raises(KeyboardInterrupt):
            with sigint_held():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.2)  # a handler would have run by now
                done.append("the block's end")
        assert done == ["the block's end"]
        assert signal.getsignal(signal.SIGINT) is ours
        with sigint_held():  # no SIGINT: nothing comes
            done.append("again")
    assert done == ["the block's end", "again"]


def test_ctrl_c_while_ray_is_imported_leaves_ray_whole(tmp_path):
    """The Ray start-up's Ctrl-C that CI met: it came inside ``import ray``, the
    half-imported ``ray`` stayed, and Ray's exit handler (``ray.shutdown``) printed a
    traceback. A stand-in ``ray`` whose import takes the SIGINT half way: the search's
    start-up stops (KeyboardInterrupt) with the import finished."""
    fake = tmp_path / "ray"
    (fake / "tune").mkdir(parents=True)
    (fake / "__init__.py").write_text(
        "import os, signal, time\n"
        "os.kill(os.getpid(), signal.SIGINT)\n"
        "time.sleep(0.3)\n"
        "whole = True\n"
        "def is_initialized():\n"
        "    return True\n"
    )
    (fake / "tune" / "__init__.py").write_text("")
    driver = (
        "import sys\n"
        "from recbole_attn.options.arguments import sigint_as_interrupt\n"
        "from recbole_attn.commands.tuning.ray_search import _init_ray\n"
        "try:\n"
        "    with sigint_as_interrupt():\n"
        "        _init_ray(None, 1)\n"
        "    print('not stopped')\n"
        "except KeyboardInterrupt:\n"
        "    ray = sys.modules.get('ray')\n"
        "    print('stopped', getattr(ray, 'whole', False))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), REPO]))
    done = subprocess.run(
        [sys.executable, "-c", driver],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "stopped True", done.stdout + done.stderr


@pytest.mark.slow
def test_ctrl_c_during_a_ray_searchs_start_up_stops_it(tiny_data_path, tmp_path):
    """SIGINT while Ray starts (the output claimed, no trial yet), to a search started
    as a shell's background job (SIGINT ignored, as ``cmd &`` starts it): before, it was
    ignored until Ray Tune's own handler came, and both trials ran to the end (rc 0).
    Now the search stops as on SIGTERM: its record kept, the one line, 130."""
    import json

    argv = [sys.executable, os.path.join(REPO, "run_recbole_attn.py")]
    argv += _search_argv(
        tiny_data_path, tmp_path, "--max_concurrent=1", "--algo=exhaustive"
    )[1:]
    out = tmp_path / "out"
    proc = subprocess.Popen(
        argv,
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    deadline = time.monotonic() + 120
    while not (out / ".search.owner").exists() and proc.poll() is None:
        assert time.monotonic() < deadline, "the search never claimed its output"
        time.sleep(0.1)
    time.sleep(0.5)  # in ray.init, which takes seconds
    proc.send_signal(signal.SIGINT)
    stdout, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, stdout + err
    assert "Traceback" not in err, err
    assert err.count("\n") == 1, err
    assert err.startswith(
        f"error: search interrupted: 0 of 3 trials finished, kept in {out}/trials.csv; "
        "continue with the same command (it runs the trials left, then selects and "
        "tests)"
    ), err
    assert "] trial " not in stdout, stdout
    assert json.loads((out / "interrupted.json").read_text())["trials"] == []
    assert not (out / "result.json").exists()


@pytest.mark.slow
def test_starting_ray_keeps_sigterm_as_ctrl_c():
    """``ray.init`` replaces the driver's SIGTERM handler by ``sys.exit``: a search
    stopped by SIGTERM ended without a word and kept no trial."""
    import ray

    from recbole_attn.options.arguments import sigterm_as_interrupt
    from recbole_attn.commands.tuning.ray_search import _init_ray

    try:
        with sigterm_as_interrupt():
            ours = signal.getsignal(signal.SIGTERM)
            _init_ray(None, 1)
            assert signal.getsignal(signal.SIGTERM) is ours
    finally:
        ray.shutdown()


@pytest.mark.slow
def test_ray_worker_niceness_gives_the_trials_an_equal_share(monkeypatch):
    """docs/tuning.md: Ray runs its workers (the trials) at nice 15, and
    ``RAY_worker_niceness=0`` before the search starts its local Ray runs them at 0."""
    import ray

    from recbole_attn.commands.tuning.ray_search import _init_ray

    monkeypatch.setenv("RAY_worker_niceness", "0")
    if ray.is_initialized():
        ray.shutdown()
    try:
        _init_ray(None, 1)
        niceness = ray.get(ray.remote(lambda: os.nice(0)).remote())
    finally:
        ray.shutdown()
    assert niceness == os.nice(0), niceness


# ---------------------------------------------------------------------- several processes


@pytest.mark.slow
@pytest.mark.parametrize("how", ["sigterm", "ctrl-c"])
def test_a_multi_process_run_stops_its_processes_and_says_what_is_saved(
    how, tiny_data_path, tmp_path
):
    """``--nproc=2``: SIGTERM to the command said "nothing was saved" at once while the
    processes trained on to the end; Ctrl-C (the terminal's SIGINT to all of them) said
    the same beside the checkpoints they had saved. Now each process stops, and the
    line is process 0's: what is saved and the command that continues it."""
    from test_distributed import _free_port

    argv = [sys.executable, os.path.join(REPO, "run_recbole_attn.py")]
    argv += _run_args(tiny_data_path, "--epochs=200", "--state=INFO")
    argv += ["--stopping_step=200", "--nproc=2", "--ip=127.0.0.1"]
    argv += [f"--port={_free_port()}"]
    proc = subprocess.Popen(
        argv,
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's job
    )
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if "epoch 2/200: loss" in line:
            if how == "sigterm":
                proc.send_signal(signal.SIGTERM)
            else:
                os.killpg(proc.pid, signal.SIGINT)
            stopped = time.monotonic()
            break
    rest = proc.communicate(timeout=120)[1]
    seconds = time.monotonic() - stopped
    err = "".join(lines) + rest
    assert proc.returncode == (143 if how == "sigterm" else 130), err
    assert "Traceback" not in rest, rest
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: interrupted in epoch "), last
    assert "is saved: continue with the same command and --resume_checkpoint=" in last
    assert os.path.isfile(os.path.join(tmp_path, last.split("=", 1)[1]))
    assert seconds < 60, f"{seconds:.0f} s to stop"
    assert not _left_in_group(proc.pid), "a process of the run is left"


def _left_in_group(pgid, seconds=15):
    """The processes left in the process group ``pgid`` after ``seconds`` (those
    ending as their parent ended, such as multiprocessing's resource tracker, end)."""
    deadline = time.monotonic() + seconds
    while True:
        ps = subprocess.run(
            ["ps", "-eo", "pid=,pgid=,stat=,args="], capture_output=True, text=True
        )
        left = [
            line
            for line in ps.stdout.splitlines()
            if line.split()[1] == str(pgid) and "Z" not in line.split()[2]
        ]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)
