"""Multi-process training (RecBole's nproc/world_size/ip/port/offset) through our pipeline:
torch DDP over gloo on CPUs."""

import glob
import os
import socket

import pytest
import torch

from recbole_attn.engine.distributed import distributed_options, spawn
from recbole_attn.errors import ConfigError, DataError
from recbole_attn.engine.quick_start import evaluate, run


def test_distributed_options():
    assert distributed_options({"epochs": 2}) == ({}, {"epochs": 2})
    assert distributed_options({"nproc": 1, "epochs": 2}) == ({}, {"epochs": 2})
    options, rest = distributed_options({"nproc": 2, "port": 1234, "epochs": 2})
    assert rest == {"epochs": 2}
    assert options == {
        "nproc": 2,
        "world_size": 2,
        "ip": "localhost",
        "port": "1234",
        "offset": 0,
    }
    options, _ = distributed_options({"nproc": 2, "world_size": 4, "offset": 2})
    assert options["world_size"] == 4 and options["offset"] == 2
    # the command line's text, as numbers
    options, _ = distributed_options({"nproc": "2", "world_size": "4", "offset": "2"})
    assert (options["nproc"], options["world_size"], options["offset"]) == (2, 4, 2)
    # one rank in all is one process
    assert distributed_options({"nproc": 1, "world_size": 1}) == ({}, {})


@pytest.mark.parametrize(
    "given, fragment",
    [
        ({"nproc": "abc"}, "nproc must be an integer >= 1, got 'abc'"),
        ({"nproc": 0}, "nproc must be an integer >= 1, got 0"),
        ({"nproc": 2.5}, "nproc must be an integer >= 1"),
        ({"nproc": True}, "nproc must be an integer >= 1"),
        ({"nproc": 2, "world_size": 0}, "world_size must be an integer >= 1"),
        ({"nproc": 2, "offset": -1}, "offset must be an integer >= 0"),
        ({"nproc": 2, "port": "http"}, "port must be an integer from 1 to 65535"),
        ({"nproc": 2, "port": 70000}, "port must be an integer from 1 to 65535"),
        ({"nproc": 2, "world_size": 1}, "world_size 1 has ranks 0 to 0"),
        ({"nproc": 2, "world_size": 4, "offset": 3}, "--world_size=5"),
    ],
)
def test_bad_distributed_options_are_one_line(given, fragment):
    with pytest.raises(ConfigError) as err:
        distributed_options({**given, "epochs": 2})
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_more_processes_than_the_machine_runs_are_refused_before_any_starts(
    tiny_data_path, tmp_path, monkeypatch, capsys
):
    """``--nproc=1000`` on a 2-core machine started its processes (past 13 GB, 200 s
    of silence): one line now, before any process."""
    import torch.multiprocessing as mp

    from test_pipeline import _cli_main
    from test_safety import _run_args

    def started(*args, **kwargs):
        raise AssertionError("a process was started")

    monkeypatch.setattr(mp, "spawn", started)
    monkeypatch.chdir(tmp_path)
    code, err = _cli_main(["run", *_run_args(tiny_data_path, "--nproc=1000")], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(
        "error: --nproc=1000 starts 1000 training processes, one a "
    ), err
    assert "give --nproc=" in err


def test_the_capacity_of_the_machine_in_cores_gpus_and_memory():
    from recbole_attn.engine.distributed import check_capacity

    cpu = {"use_gpu": False, "gpu_id": ""}
    check_capacity(cpu, 2, cores=2, available=8 * 2**30, each=2**30)
    with pytest.raises(ConfigError, match="but this machine has 2; give --nproc=2 or"):
        check_capacity(cpu, 3, cores=2, available=8 * 2**30, each=2**30)
    with pytest.raises(
        ConfigError, match=r"of at least 1.0 GB each .* give --nproc=3 "
    ):
        check_capacity(cpu, 4, cores=64, available=3.5 * 2**30, each=2**30)
    if torch.cuda.is_available():
        gpu = {"use_gpu": True, "gpu_id": "0"}
        with pytest.raises(ConfigError, match="one a GPU, but gpu_id '0' gives 1"):
            check_capacity(gpu, 2, gpus=1, available=8 * 2**30, each=2**30)


def _refuse(model, dataset, config_dict=None, **kwargs):
    raise DataError(f"process {config_dict['local_rank']} refuses {dataset}")


@pytest.mark.slow
def test_the_error_of_a_process_is_raised_as_it_is():
    """A process's user error (one a run meets only after its data loads) reaches the
    command as that error, one line, not as torch's report of a failed process."""
    with pytest.raises(DataError, match=r"^process [01] refuses tiny$"):
        spawn(_refuse, "SASRecAP", "tiny", {"nproc": 2}, {})


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_cpu_processes_train_with_the_single_process_metrics(tiny_config):
    def logs():
        return len(glob.glob(os.path.join("log", "SASRecAP", "*.log")))

    single = run("SASRecAP", "tiny", config_dict={**tiny_config, "epochs": 1})
    before = logs()
    multi = run(
        "SASRecAP",
        "tiny",
        config_dict={
            **tiny_config,
            "epochs": 1,
            "nproc": 2,
            "ip": "127.0.0.1",
            "port": _free_port(),
        },
    )
    assert multi is not None, "process 0 returned no result"
    assert logs() - before == 2  # two processes ran the pipeline
    assert set(multi["test_result"]) == set(single["test_result"])
    assert set(multi["best_valid_result"]) == set(single["best_valid_result"])
    assert all(0.0 <= v <= 1.0 for v in multi["test_result"].values())
    # process 0 wrote one checkpoint that every process evaluated
    state = torch.load(multi["saved_model_file"], weights_only=True)
    assert state["epoch"] == 0 and os.path.isfile(multi["saved_model_file"])
    # the two processes' test metrics are the mean over all users: those of the same
    # model evaluated in one process (RecBole averaged rounded per-process values)
    alone = evaluate(multi["saved_model_file"], {"state": "ERROR"})
    assert multi["test_result"] == alone["test_result"]


def test_a_process_of_a_multi_process_run_is_checked_once_in_its_command(monkeypatch):
    """The command checks the run (its files read and decoded) before it starts the
    processes; each process then builds its configuration without checking it again.
    A run given local_rank and world_size by its caller is checked."""
    from recbole_attn.engine import distributed
    from recbole_attn.engine import pipeline

    checked = []
    monkeypatch.setattr(pipeline, "check_recbole_version", lambda: None)
    monkeypatch.setattr(pipeline, "make_config", lambda *args: "config")
    monkeypatch.setattr(
        pipeline,
        "check_before_loading",
        lambda config, writes, processes: checked.append((config, processes)),
    )
    options, rest = distributed_options({"nproc": 2, "epochs": 1})
    given = {**rest, **options, "local_rank": 0}
    pipeline.prepare("STOSA", "tiny", None, rest, processes=options["world_size"])
    assert checked == [("config", 2)]  # the command
    pipeline.prepare("STOSA", "tiny", None, given)  # not started by spawn
    assert checked == [("config", 2), ("config", 1)]
    monkeypatch.setattr(distributed, "SPAWNED", True)  # as _process sets it
    pipeline.prepare("STOSA", "tiny", None, given)
    assert checked == [("config", 2), ("config", 1)]
