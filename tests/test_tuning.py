"""Hyperparameter search: the space, the algorithms (random, bayes, exhaustive) on Ray Tune
and in-process (RecBole's HyperTuning), a real local Ray head reached through
``ray_address``, the outputs, validation-based selection, and the errors before any trial.
"""

import csv
import glob
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

import pytest
import yaml

from recbole_attn.errors import RecboleAttnError
from recbole_attn.engine.config import make_config
from recbole_attn.commands.tuning import (
    check_ray_address,
    parse_params_file,
    read_params_file,
    tune_model,
)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_params_file_parsing(tmp_path):
    from ray.tune.search.sample import Categorical, Float

    path = tmp_path / "hyper.test"
    path.write_text(
        "learning_rate loguniform -8,0\n"
        "hidden_size choice [16,32]\n"
        "# a comment\n"
        "hidden_dropout_prob uniform 0.1,0.5\n"
        "refinement choice ['simp','value']\n"
    )
    space = parse_params_file(path)
    assert isinstance(space["hidden_size"], Categorical)
    assert space["hidden_size"].categories == [16, 32]
    assert space["refinement"].categories == ["simp", "value"]
    lr = space["learning_rate"]
    assert isinstance(lr, Float)
    assert lr.lower == pytest.approx(0.000335462627903) and lr.upper == 1.0


@pytest.mark.parametrize(
    "text, message",
    [
        ("learning_rate between 1,2\n", "line 1"),
        ("# only a comment\n\n", "defines no hyperparameter"),
        ("hidden_size choice []\n", "non-empty list"),
        ("hidden_size choice [16,\n", "line 1"),
        ("learning_rate uniform 0.1\n", "2 numbers"),
        ("learning_rate uniform 0.5,0.1\n", "low < high"),
        ("n_layers choice [1,2]\nn_layers choice [3]\n", "more than once"),
        ("hidden_size\n", "a name, a distribution"),
    ],
)
def test_malformed_params_files_are_clear_errors(tmp_path, text, message):
    path = tmp_path / "bad.hyper"
    path.write_text(text)
    with pytest.raises(RecboleAttnError, match=message):
        read_params_file(path)


def _write(tmp_path, text, name="space.hyper"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _tiny(tiny_config, **extra):
    config = {**tiny_config, "epochs": 2, "valid_metric": "NDCG@10", **extra}
    config.pop("hidden_size")
    return config


@pytest.mark.parametrize(
    "text, options, message",
    [
        ("hiden_size choice [8,16]\n", {}, "did you mean 'hidden_size'"),
        ("dpp_k choice [2,3]\n", {}, "not a config key of SASRecAP"),
        ("learning_rate uniform 0.001,0.01\n", {"algo": "exhaustive"}, "continuous"),
        ("hidden_size choice [8,16]\n", {"algo": "grid"}, "algo must be one of"),
        ("hidden_size choice [8,16]\n", {"scheduler": "pbt"}, "scheduler must be"),
        ("hidden_size choice [8,16]\n", {"tool": "optuna"}, "tool must be one of"),
        ("hidden_size choice [8,16]\n", {"num_samples": 0}, "num_samples must be"),
        (
            "hidden_size choice [8,16]\n",
            {"tool": "hyperopt", "scheduler": "asha"},
            "no --scheduler=asha",
        ),
        ("hidden_size choice [8,16]\n", {"ray_address": "nohost"}, "HOST:PORT"),
        ("hidden_size choice [8,16]\n", {"grace_period": 2}, "add --scheduler=asha"),
        (
            "hidden_size choice [8,16]\n",
            {"scheduler": "asha", "grace_period": 0},
            "grace_period must be a whole number",
        ),
        (
            "hidden_size choice [8,16]\n",
            {"scheduler": "asha", "grace_period": 500},
            "lower --grace_period or raise --epochs",
        ),
    ],
)
def test_bad_searches_fail_before_any_trial(
    tiny_config, tmp_path, text, options, message
):
    with pytest.raises(RecboleAttnError, match=message):
        tune_model(
            "SASRecAP",
            "tiny",
            _write(tmp_path, text),
            config_dict=_tiny(tiny_config),
            output=str(tmp_path / "out"),
            **options,
        )
    assert not glob.glob(str(tmp_path / "out" / "saved" / "*"))


def _closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_ray_address_is_a_clear_error():
    started = time.time()
    with pytest.raises(RecboleAttnError, match="cannot reach a Ray cluster"):
        check_ray_address(f"127.0.0.1:{_closed_port()}")
    assert time.time() - started < 10
    check_ray_address("auto")  # left to Ray


def _check_outputs(result, space_names, n_trials):
    out = result["output"]
    with open(os.path.join(out, "trials.csv")) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(result["trials"]) == n_trials
    assert set(space_names) <= set(rows[0])
    assert {"best_valid_score", "epochs", "stop_reason"} <= set(rows[0])
    # each trial's own wall time: what a search cost, also over several sittings
    assert all(float(row["seconds"]) > 0 for row in rows), rows
    assert [float(r["seconds"]) for r in rows] == [
        t["seconds"] for t in result["trials"]
    ]
    table = open(os.path.join(out, "trials.md")).read().splitlines()
    body = [line for line in table if line.startswith("| ") and "---" not in line]
    assert len(body) == n_trials + 1  # header + one row per trial
    assert sum("**yes**" in line for line in body) >= 1
    with open(os.path.join(out, "best.yaml")) as f:
        best = yaml.safe_load(f)
    assert {k: best[k] for k in space_names} == result["best_params"]
    assert json.load(open(os.path.join(out, "result.json")))["test_result"]
    # the best trial is the one with the best validation score
    top = max(result["trials"], key=lambda t: t["best_valid_score"])
    assert result["best_params"] == top["params"]
    assert result["best_valid_score"] == top["best_valid_score"]
    return best


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["random", "bayes", "exhaustive"])
def test_ray_search_selects_on_validation(tiny_config, tmp_path, algo):
    space = _write(tmp_path, "hidden_size choice [8,16]\nlearning_rate choice [0.01]\n")
    lines = []
    result = tune_model(
        "SASRecAP",
        "tiny",
        space,
        # strings, as the command line gives them
        config_dict=_tiny(tiny_config, epochs="2", MAX_ITEM_LIST_LENGTH="12"),
        scheduler="asha" if algo == "bayes" else "fifo",
        # ASHA may stop no trial before its second evaluation
        grace_period=2 if algo == "bayes" else None,
        num_samples=2,
        algo=algo,
        seed=0,
        output=str(tmp_path / "out"),
        num_cpus=2,
        echo=lines.append,
    )
    assert len(lines) == 2 and all("best valid" in line for line in lines)
    trials = result["trials"]
    if algo == "exhaustive":  # every combination exactly once
        assert sorted(t["params"]["hidden_size"] for t in trials) == [8, 16]
    # every trial reported after every epoch (schedulers can stop it early)
    for t in trials:  # ASHA (bayes here) may stop a trial after its first epoch
        assert (t["epochs"], t["stop_reason"]) in (
            (2, "all epochs"),
            (1, "stopped by ASHA"),
        )
    assert any(t["epochs"] == 2 for t in trials)
    if algo == "bayes":  # the grace period of 2 evaluations let every trial finish
        assert all(t["epochs"] == 2 for t in trials) and result["grace_period"] == 2
    # the reported validation score is the one of the selected, reloaded model
    assert result["best_valid_result"]["ndcg@10"] == pytest.approx(
        result["best_valid_score"], abs=1e-4
    )
    best = _check_outputs(result, ["hidden_size", "learning_rate"], 2)
    # best.yaml is a config file the pipeline accepts
    config = make_config(
        "SASRecAP", "tiny", [os.path.join(result["output"], "best.yaml")]
    )
    assert config["hidden_size"] == best["hidden_size"]
    assert best["epochs"] == 2 and best["MAX_ITEM_LIST_LENGTH"] == 12  # typed


@pytest.mark.slow
def test_hyperopt_tool_tests_only_the_selected_configuration(
    tiny_config, tmp_path, monkeypatch
):
    """RecBole's HyperTuning in-process (no Ray); the test split is evaluated once, with the
    selected trial's checkpoint, and never during the trials."""
    from recbole_attn.engine.trainer import AttnTrainer

    explicit = []
    original = AttnTrainer.evaluate

    def spy(self, eval_data, load_best_model=True, model_file=None, **kwargs):
        if model_file is not None:
            explicit.append(model_file)
        return original(self, eval_data, load_best_model, model_file, **kwargs)

    monkeypatch.setattr(AttnTrainer, "evaluate", spy)
    space = _write(tmp_path, "hidden_size choice [8,16]\n")
    lines = []
    result = tune_model(
        "SASRecAP",
        "tiny",
        space,
        config_dict=_tiny(tiny_config, stopping_step=1),
        tool="hyperopt",
        algo="exhaustive",
        output=str(tmp_path / "out"),
        echo=lines.append,
    )
    assert len(lines) == 2
    assert sorted(t["params"]["hidden_size"] for t in result["trials"]) == [8, 16]
    _check_outputs(result, ["hidden_size"], 2)
    best_file = max(result["trials"], key=lambda t: t["best_valid_score"])
    # validation and test of the selected checkpoint: the only explicit evaluations
    assert explicit == [best_file["saved_model_file"]] * 2


def _own_part(part, temp, port):
    """A command-line part of the fixture's head: its temp dir, or (the Ray client
    server, which gets the head's address on whatever interface Ray picked) the address
    of its port."""
    return temp in part or (part.startswith("--address=") and part.endswith(f":{port}"))


@pytest.fixture
def ray_head():
    """A real Ray head on 127.0.0.1 (``ray start --head``), stopped at the end: only its
    own processes (:func:`_own_part`), so that other Ray instances keep running."""
    import psutil
    import ray

    if ray.is_initialized():
        ray.shutdown()
    port = _closed_port()
    temp = tempfile.mkdtemp(prefix="rh", dir="/tmp")  # short: unix socket paths
    ray_bin = os.path.join(os.path.dirname(sys.executable), "ray")
    proc = subprocess.run(
        [
            ray_bin,
            "start",
            "--head",
            "--node-ip-address=127.0.0.1",
            f"--port={port}",
            "--num-cpus=2",
            "--include-dashboard=false",
            "--disable-usage-stats",
            f"--temp-dir={temp}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        ray.shutdown()
        for p in psutil.process_iter(["cmdline"]):
            try:
                if any(_own_part(part, temp, port) for part in p.info["cmdline"] or []):
                    p.kill()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass


@pytest.mark.slow
def test_search_on_an_existing_ray_cluster(tiny_config, tmp_path, ray_head):
    import ray

    space = _write(tmp_path, "hidden_size choice [8,16]\n")
    result = tune_model(
        "SASRecAP",
        "tiny",
        space,
        config_dict=_tiny(tiny_config),
        num_samples=2,
        algo="exhaustive",
        ray_address=ray_head,
        output=str(tmp_path / "out"),
        echo=lambda line: None,
    )
    # the trials ran on that cluster (the driver is connected to it, not a local one)
    port = ray_head.rsplit(":", 1)[1]
    assert ray.get_runtime_context().gcs_address.endswith(f":{port}")
    _check_outputs(result, ["hidden_size"], 2)


def test_shipped_hyper_files_search_keys_their_model_reads(tmp_path):
    """properties/hyper/<Model>.hyper: parses, and every parameter is a key of the model
    (the check tune_model runs before any trial)."""
    from recbole_attn.plugin import MODELS
    from recbole_attn.options.check import known_run_keys

    folder = os.path.join(REPO, "properties", "hyper")
    for name in MODELS:
        path = os.path.join(folder, f"{name}.hyper")
        assert os.path.isfile(path), f"no {path}"
        params = read_params_file(path)
        known = known_run_keys(make_config(name, "ml-100k"))
        assert {p.name for p in params} <= known, name


def test_a_shipped_search_space_is_found_by_its_model_name(tmp_path, monkeypatch):
    """From any folder: the model's name, its file name, or the checkout path."""
    from recbole_attn.commands.tuning import resolve_params_file, shipped_spaces

    monkeypatch.chdir(tmp_path)
    shipped = shipped_spaces()["STOSA"]
    assert os.path.isfile(shipped)
    for value in ("STOSA", "STOSA.hyper", "properties/hyper/STOSA.hyper"):
        assert resolve_params_file(value) == shipped
    assert [p.name for p in read_params_file("STOSA")] == [
        p.name for p in read_params_file(shipped)
    ]
    # a file of the user's comes first; other folders are not guessed
    (tmp_path / "STOSA.hyper").write_text("hidden_size choice [8]\n")
    assert resolve_params_file("STOSA.hyper") == "STOSA.hyper"
    with pytest.raises(RecboleAttnError, match="shipped search space: .*STOSA"):
        resolve_params_file("elsewhere/STOSA.hyper")
    with pytest.raises(RecboleAttnError, match="params file not found: NoModel"):
        resolve_params_file("NoModel")


def test_no_cluster_wording_when_no_cluster_was_asked_for():
    """Ray's notice about the token authentication of the local cluster it starts is
    dropped; its warning that authentication is disabled is kept."""
    import logging

    from recbole_attn.commands.tuning.ray_search import _quiet_ray

    _quiet_ray()
    name = "ray._private.authentication.authentication_token_setup"
    logger = logging.getLogger(name)

    def record(message):
        return logging.LogRecord(name, logging.WARNING, __file__, 1, message, (), None)

    enabled = "Token authentication is enabled for this Ray cluster. Set ..."
    disabled = "Token authentication is disabled for this Ray cluster. Anyone ..."
    assert not logger.filter(record(enabled))
    assert logger.filter(record(disabled))


def test_a_trials_status_file_is_written_whole_or_not_at_all(tiny_config, monkeypatch):
    """The search reads it for the trial's stop reason: a trial killed while writing it
    left half a JSON document there."""
    from recbole_attn.commands.tuning import trial

    summary = trial.train_trial(
        {}, "SASRecAP", "tiny", None, {**tiny_config, "epochs": 1}
    )
    status = os.path.join(tiny_config["checkpoint_dir"], trial.STATUS_FILE)
    with open(status) as f:
        assert json.load(f) == summary
    real_dump = json.dump

    def killed_midway(obj, f):
        f.write('{"best_valid_sc')
        raise KeyboardInterrupt

    monkeypatch.setattr(trial.json, "dump", killed_midway)
    with pytest.raises(KeyboardInterrupt):
        trial.train_trial({}, "SASRecAP", "tiny", None, {**tiny_config, "epochs": 1})
    monkeypatch.setattr(trial.json, "dump", real_dump)
    with open(status) as f:
        assert json.load(f) == summary  # the earlier trial's, whole
    assert not [n for n in os.listdir(os.path.dirname(status)) if n.startswith(".")]


def _search_of(algo, num_samples=4, seed=7):
    from recbole_attn.commands.tuning.space import Param

    return {
        "params": [Param("hidden_size", "choice", values=[8, 16, 32])],
        "algo": algo,
        "num_samples": num_samples,
        "max_concurrent": None,
        "seed": seed,
        "mode": "max",
    }


def test_a_ray_continuation_is_planned_from_the_finished_trials_records():
    """A stopped Ray search continues from its own rows (interrupted.json), not from
    Ray's pickled experiment: the grid's combinations not yet tried, the samples left
    on a seed of their own, TPE told the finished trials' scores."""
    from recbole_attn.commands.tuning.ray_search import _plan

    before = [{"params": {"hidden_size": 16}, "best_valid_score": 0.25}]
    searcher, num_samples, space = _plan(_search_of("exhaustive"), before)
    assert num_samples == 2
    assert searcher._points_to_evaluate == [{"hidden_size": 8}, {"hidden_size": 32}]
    assert sorted(space["hidden_size"].categories) == [8, 16, 32]
    searcher, num_samples, _ = _plan(_search_of("exhaustive"), [])
    assert num_samples == 1 and not searcher._points_to_evaluate  # the whole grid
    searcher, num_samples, _ = _plan(_search_of("random"), before)
    assert num_samples == 3
    searcher, num_samples, space = _plan(_search_of("bayes", num_samples=8), before)
    assert num_samples == 7
    searcher.set_search_properties("valid_score", "max", space)
    (told,) = searcher._hpopt_trials.trials  # TPE's history: the finished trial
    assert told["result"] == {"loss": -0.25, "status": "ok"}
    assert told["misc"]["vals"]["hidden_size"] == [1]  # the index of 16
    suggested = [searcher.suggest(f"t{n}")["hidden_size"] for n in range(6)]
    assert set(suggested) <= {8, 16, 32} and len(searcher._hpopt_trials.trials) == 7


def test_a_ray_continuation_never_restores_rays_experiment(tmp_path, monkeypatch):
    """``Tuner.restore`` unpickles the folder's ``tuner.pkl``: a continuation builds a
    new experiment of the trials left beside the old one, and one whose trials had all
    finished starts none."""
    from ray import tune

    from recbole_attn.commands.tuning import ray_search

    made = []

    class Tuner:
        def __init__(self, trainable, **kwargs):
            made.append(kwargs)

        def fit(self):
            return []

        @classmethod
        def restore(cls, *args, **kwargs):
            raise AssertionError("Tuner.restore unpickles tuner.pkl")

    monkeypatch.setattr(tune, "Tuner", Tuner)
    (tmp_path / "recbole_attn").mkdir()
    search = {
        **_search_of("exhaustive"),
        "model": "SASRecAP",
        "dataset": "tiny",
        "files": [],
        "overrides": {},
        "cpus_per_trial": 1,
        "gpus_per_trial": 0,
        "scheduler": "fifo",
        "epochs": 2,
        "storage_path": str(tmp_path),
        "echo": print,
    }
    before = [{"params": {"hidden_size": 8}, "best_valid_score": 0.5}]
    with pytest.raises(KeyboardInterrupt):  # the fake made no trial: "stopped"
        ray_search._search_ray(search, list(before))
    assert made[0]["run_config"].name == "recbole_attn.1"
    assert made[0]["tune_config"].num_samples == 2
    every = [
        {"params": {"hidden_size": v}, "best_valid_score": 0.1} for v in (8, 16, 32)
    ]
    assert ray_search._search_ray(search, list(every)) == every
    assert len(made) == 1
