"""RecBole's own API beside the plugin (recbole_attn.host.install): RecBole's run_recbole, Config,
trainers, load_data_and_model and HyperTuning run RecBole's models on today's stack, and
answer to our model names with what recbole-attn gives."""

import contextlib
import logging
import os
import warnings

import numpy as np
import pytest
import recbole  # noqa: F401  (importing RecBole after recbole_attn installs the changes)
import torch
import yaml

import recbole_attn
from recbole_attn.host import compat
from recbole_attn.host import install as host
from recbole_attn.errors import CheckpointError

#: the evaluation protocol of recbole-attn (properties/overall.yaml), given to both
#: pipelines, so that "the same configuration" is the same in both
PROTOCOL = {
    "eval_args": {
        "split": {"LS": "valid_and_test"},
        "order": "TO",
        "mode": "full",
        "group_by": "user",
    },
    "metrics": ["Recall", "NDCG", "MRR"],
    "topk": [5, 10],
    "valid_metric": "NDCG@10",
    "rm_dup_inter": "first",
    "show_progress": False,
}


def _recbole_run(model, config_dict, dataset="tiny"):
    from recbole.quick_start import run_recbole

    try:
        return run_recbole(model=model, dataset=dataset, config_dict=config_dict)
    finally:
        logging.getLogger().handlers.clear()


def _close(a, b):
    assert a.keys() == b.keys()
    for key in a:
        assert float(a[key]) == pytest.approx(float(b[key]), abs=1e-9), key


def test_the_stack_fixes_are_installed_on_import():
    """What recbole_attn.host.install says it installs on this stack, it has installed."""
    import pandas as pd

    done = host.installed()
    assert "plugin models" in done and "category metrics" in done
    assert ("numpy aliases" in done) == (int(np.__version__.split(".")[0]) >= 2)
    assert ("pandas 3 dataset" in done) == (int(pd.__version__.split(".")[0]) >= 3)
    torch_release = tuple(
        int(n) for n in torch.__version__.split("+")[0].split(".")[:2]
    )
    assert ("checkpoints" in done) == (torch_release >= (2, 6))
    host.install()  # idempotent
    assert host.installed() == done


@pytest.mark.parametrize("model", ["BPR", "SASRec"])
def test_recboles_run_recbole_trains_and_tests_its_own_models(model, tiny_config):
    """RecBole's run_recbole for RecBole's own models: on numpy 2 its Config failed, on
    torch >= 2.6 its evaluate could not reload the checkpoint it had just written."""
    config = {**tiny_config, "epochs": 1}
    if model == "SASRec":  # RecBole's SASRec trains with CE, without its sampler
        config["train_neg_sample_args"] = None
    result = _recbole_run(model, config)
    assert 0 <= result["test_result"]["ndcg@10"] <= 1
    saved = os.listdir(tiny_config["checkpoint_dir"])
    assert len(saved) == 1 and saved[0].startswith(f"{model}-")


def test_recboles_config_and_trainer_compute_our_category_metrics(tiny_config):
    """RecBole's Config with CC/ILD/F1, RecBole's Trainer on RecBole's SASRec: the
    category metrics get the item->category table from RecBole's own Collector, and give
    what recbole-attn's pipeline gives for the same configuration."""
    from recbole.config import Config

    from recbole_attn.engine.quick_start import run

    config = {
        **tiny_config,
        **PROTOCOL,
        "epochs": 1,
        "metrics": ["Recall", "NDCG", "CC", "ILD", "F1"],
        "load_col": {
            "inter": ["user_id", "item_id", "timestamp"],
            "item": ["item_id", "categories"],
        },
        "category_field": "categories",
        "train_neg_sample_args": None,
        "training_mode": "last_position",
    }
    built = Config(model="SASRec", dataset="tiny", config_dict=config)
    logging.getLogger().handlers.clear()
    assert built["metrics"] == config["metrics"]
    theirs = _recbole_run("SASRec", config)["test_result"]
    assert {"cc@10", "ild@10", "f1@10"} <= set(theirs)
    ours = run("SASRec", "tiny", config_dict=config)["test_result"]
    logging.getLogger().handlers.clear()
    _close(dict(theirs), ours)


def test_recboles_trainer_without_the_category_field_says_what_to_change(tiny_config):
    """RecBole's own run of CC on an item field it does not load: the one-line error
    names the field and what to change in the dataset's files, as recbole-attn's does.
    """
    from recbole_attn.errors import CategoryFieldError

    config = {
        **tiny_config,
        **PROTOCOL,
        "epochs": 1,
        "metrics": ["Recall", "CC"],
        "load_col": {"inter": ["user_id", "item_id", "timestamp"]},
        "train_neg_sample_args": None,
        "training_mode": "last_position",
    }
    from recbole.config import Config
    from recbole.data import create_dataset, data_preparation
    from recbole.model.sequential_recommender import SASRec
    from recbole.trainer import Trainer

    built = Config(model="SASRec", dataset="tiny", config_dict=config)
    dataset = create_dataset(built)
    train, valid, _ = data_preparation(built, dataset)
    trainer = Trainer(built, SASRec(built, train.dataset))
    try:
        with pytest.raises(CategoryFieldError) as raised:
            trainer.fit(train, valid, saved=False)
    finally:  # its TensorBoard writer would write after the test left the folder
        trainer.tensorboard.close()
        logging.getLogger().handlers.clear()
    assert "'categories'" in str(raised.value) and "To fix: " in str(raised.value)
    assert "load_col" in str(raised.value).split("To fix: ")[1]
    assert "the field was not loaded" not in str(raised.value)


def test_recboles_trainer_writes_its_checkpoint_whole_or_not_at_all(
    tiny_config, tmp_path, monkeypatch
):
    """RecBole's own Trainer beside the plugin: a save that fails midway (a full disk, a
    kill) leaves the best model saved before, and no temporary file."""
    from recbole.config import Config
    from recbole.data import create_dataset
    from recbole.model.sequential_recommender import SASRec
    from recbole.trainer import Trainer

    from recbole_attn.host import compat

    config = {**tiny_config, "checkpoint_dir": str(tmp_path / "saved")}
    config.update(train_neg_sample_args=None, training_mode="last_position")
    built = Config(model="SASRec", dataset="tiny", config_dict=config)
    trainer = Trainer(built, SASRec(built, create_dataset(built)))
    trainer.tensorboard.close()
    trainer._save_checkpoint(0, verbose=False)
    before = open(trainer.saved_model_file, "rb").read()

    def half_then_full_disk(obj, f, **kwargs):
        with contextlib.ExitStack() as stack:
            if isinstance(f, (str, os.PathLike)):  # a path: torch opens it in place
                f = stack.enter_context(open(f, "wb"))
            f.write(before[:10])
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(compat.torch, "save", half_then_full_disk)
    with pytest.raises(OSError, match="No space left"):
        trainer._save_checkpoint(1, verbose=False)
    assert open(trainer.saved_model_file, "rb").read() == before
    assert os.listdir(tmp_path / "saved") == [
        os.path.basename(trainer.saved_model_file)
    ]
    logging.getLogger().handlers.clear()


@pytest.mark.parametrize("model", ["STOSA", "PAtt", "AWRSR"])
def test_our_models_by_name_in_run_recbole_give_what_recbole_attn_gives(
    model, tiny_config
):
    """run_recbole(model='STOSA') finds our model, its yaml defaults (STOSA's preset
    applied, AWRSR's backbone's yaml read) and our trainer: the same test metrics as
    recbole-attn's run for the same configuration and seed."""
    from recbole_attn.engine.quick_start import run

    config = {**tiny_config, **PROTOCOL, "epochs": 1}
    theirs = _recbole_run(model, config)
    ours = run(model, "tiny", config_dict=config)
    logging.getLogger().handlers.clear()
    _close(dict(theirs["test_result"]), ours["test_result"])
    assert theirs["best_valid_score"] == pytest.approx(ours["best_valid_score"])


def _api_run_warnings(model, config_dict, monkeypatch, dataset="tiny"):
    """run_recbole's result and the messages of the warnings it gave."""
    monkeypatch.setattr(host, "_WARNED", set())  # each said once a process
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = _recbole_run(model, config_dict, dataset)
    return result, [str(w.message) for w in caught if "RecBole's API" in str(w.message)]


def test_recboles_config_trains_our_model_with_the_commands_settings(tiny_config):
    """Through RecBole's API our model's training settings are recbole-attn's (RecBole's
    train_batch_size is 2048, the plugin's 256: one batch an epoch on ml-100k, and another
    training); only the evaluation and data settings stay RecBole's."""
    from recbole.config import Config

    from recbole_attn.engine.config import make_config, properties_dir

    given = {k: v for k, v in tiny_config.items() if "batch_size" not in k}
    theirs = Config(model="STOSA", dataset="tiny", config_dict=dict(given))
    logging.getLogger().handlers.clear()
    ours = make_config("STOSA", "tiny", config_dict=dict(given))
    assert theirs["train_batch_size"] == ours["train_batch_size"] == 256
    with open(os.path.join(properties_dir(), "overall.yaml")) as f:
        shipped = yaml.safe_load(f)
    for key in set(shipped) - set(host.KEPT_KEYS):
        assert theirs[key] == ours[key], key


def test_run_recbole_gives_the_commands_test_metrics_or_names_the_difference(
    tiny_config, monkeypatch
):
    """run_recbole(model='STOSA', config_dict={'epochs': 2, 'seed': 2020}) and
    recbole-attn for the same options: the warning names each evaluation or data
    setting in which they differ, and given those, the test metrics are the command's.
    """
    from recbole_attn.engine.config import make_config
    from recbole_attn.engine.quick_start import run

    given = {
        k: v
        for k, v in tiny_config.items()
        if k not in ("train_batch_size", "eval_batch_size")
    }
    ours = run("STOSA", "tiny", config_dict=dict(given))
    logging.getLogger().handlers.clear()
    theirs, said = _api_run_warnings("STOSA", dict(given), monkeypatch)
    (note,) = said
    command = make_config("STOSA", "tiny", config_dict=dict(given))
    named = [k for k in host.KEPT_KEYS if f" {k} " in note]
    assert {"valid_metric", "topk", "metrics"} <= set(named)
    for key in named:
        assert f"(recbole-attn: {command[key]!r})" in note
    assert theirs["test_result"].keys() != ours["test_result"].keys()
    # as the warning says: the named settings given, recbole-attn's results
    again, said = _api_run_warnings(
        "STOSA", {**given, **{k: command[k] for k in named}}, monkeypatch
    )
    assert not said
    _close(dict(again["test_result"]), ours["test_result"])
    assert again["best_valid_score"] == pytest.approx(ours["best_valid_score"])


@pytest.mark.slow
def test_run_recbole_on_ml100k_gives_the_commands_metrics_given_what_it_names(
    tmp_path, monkeypatch
):
    """Issue 75's case as written: run_recbole(model='STOSA', dataset='ml-100k',
    config_dict={'epochs': 2, 'seed': 2020}) beside `recbole-attn --model=STOSA
    --dataset=ml-100k --epochs=2 --seed=2020`."""
    from recbole_attn.cli import main
    from recbole_attn.engine.config import make_config
    from recbole_attn.engine.quick_start import run

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.argv", ["pytest"])
    given = {"epochs": 2, "seed": 2020}
    theirs, (note,) = _api_run_warnings("STOSA", dict(given), monkeypatch, "ml-100k")
    command = make_config("STOSA", "ml-100k", config_dict=dict(given))
    named = {k: command[k] for k in host.KEPT_KEYS if f" {k} " in note}
    assert {"valid_metric", "topk", "metrics", "load_col"} <= set(named)
    assert (
        main(["--model=STOSA", "--dataset=ml-100k", "--epochs=2", "--seed=2020"]) == 0
    )
    logging.getLogger().handlers.clear()
    ours = run("STOSA", "ml-100k", config_dict=dict(given))
    logging.getLogger().handlers.clear()
    again, said = _api_run_warnings("STOSA", {**given, **named}, monkeypatch, "ml-100k")
    assert not said
    _close(dict(again["test_result"]), ours["test_result"])


def test_recboles_config_reads_our_model_yaml(tiny_config):
    """Our model's own defaults in RecBole's Config (STOSA's T 100 over RecBole's
    dataset default 50, its preset written out), evaluation settings left RecBole's, and
    an invalid model option refused in our words."""
    from recbole.config import Config

    from recbole_attn.errors import ConfigError

    config = Config(model="STOSA", dataset="tiny", config_dict=dict(tiny_config))
    logging.getLogger().handlers.clear()
    assert config["MAX_ITEM_LIST_LENGTH"] == tiny_config["MAX_ITEM_LIST_LENGTH"]
    config = Config(
        model="STOSA",
        dataset="tiny",
        config_dict={
            k: v for k, v in tiny_config.items() if k != "MAX_ITEM_LIST_LENGTH"
        },
    )
    logging.getLogger().handlers.clear()
    assert config["MAX_ITEM_LIST_LENGTH"] == 100  # STOSA.yaml, not RecBole's 50
    assert config["stosa_preset"] == "official"  # STOSA.yaml
    assert config["train_neg_sample_args"]["distribution"] == "none"
    assert config["valid_metric"] == "MRR@10"  # RecBole's, not STOSA.yaml's MRR@20
    with pytest.raises(ConfigError, match="stosa_preset"):
        Config(
            model="STOSA",
            dataset="tiny",
            config_dict={**tiny_config, "stosa_preset": "bogus"},
        )
    logging.getLogger().handlers.clear()


def test_recboles_load_data_and_model_loads_both_kinds_of_checkpoint(tiny_config):
    """RecBole's load_data_and_model: a recbole_attn checkpoint (recbole-attn's run) and
    a RecBole one (RecBole's trainer, weights-only with RecBole's classes allowed)."""
    from recbole.quick_start import load_data_and_model

    from recbole_attn.engine.quick_start import run

    config = {**tiny_config, "epochs": 1}
    ours = run("PAtt", "tiny", config_dict=config)
    logging.getLogger().handlers.clear()
    loaded = load_data_and_model(ours["saved_model_file"])
    logging.getLogger().handlers.clear()
    assert len(loaded) == 6 and type(loaded[1]).__name__ == "PAtt"
    state = torch.load(ours["saved_model_file"], weights_only=True)["state_dict"]
    for key, value in loaded[1].state_dict().items():
        assert torch.equal(value.cpu(), state[key].cpu()), key

    _recbole_run("BPR", config)
    (path,) = [
        os.path.join(tiny_config["checkpoint_dir"], f)
        for f in os.listdir(tiny_config["checkpoint_dir"])
        if f.startswith("BPR-")
    ]
    config_, model, dataset, train, valid, test = load_data_and_model(path)
    logging.getLogger().handlers.clear()
    assert type(model).__name__ == "BPR" and config_["model"] == "BPR"
    assert len(dataset.inter_feat) >= len(train.dataset.inter_feat)


def test_a_checkpoint_with_foreign_globals_is_refused(tmp_path):
    """Only the classes a RecBole checkpoint holds are allowed: a file that pickles any
    other global is refused (weights-only loading is never switched off)."""
    path = tmp_path / "planted.pth"
    torch.save({"state_dict": {}, "config": os.system}, path, pickle_protocol=2)
    with pytest.raises(CheckpointError, match="system"):
        compat.recbole_checkpoint_globals(path)
    old = tmp_path / "protocol4.pth"
    torch.save({"x": np.float64(1.0)}, old, pickle_protocol=4)
    with pytest.raises(CheckpointError, match="protocol"):
        compat.recbole_checkpoint_globals(old)
    with pytest.raises(CheckpointError, match="not found"):
        compat.recbole_checkpoint_globals(tmp_path / "missing.pth")


def test_a_recbole_model_of_the_same_name_runs_and_is_said(monkeypatch):
    """Once RecBole's tree holds a model of one of our names, RecBole's API runs
    RecBole's and warns once; never a silent shadow."""
    import recbole.config.configurator as configurator
    import recbole.utils
    import recbole.utils.utils as utils
    from recbole.model.sequential_recommender import SASRec

    ours = host._ours("PAtt")
    assert recbole.utils.get_model("PAtt") is ours  # RecBole has none today
    recbole_get_model = recbole.utils.get_model.__wrapped__

    def recbole_with_patt(name):
        return SASRec if name == "PAtt" else recbole_get_model(name)

    for module in (utils, recbole.utils, configurator):  # restored by undo()
        monkeypatch.setattr(module, "get_model", module.get_model)
        if hasattr(module, "get_trainer"):
            monkeypatch.setattr(module, "get_trainer", module.get_trainer)
    monkeypatch.setattr(utils, "get_model", recbole_with_patt)
    monkeypatch.setattr(host, "_WARNED", set())
    get_model, _ = host._patch_get_model()
    with pytest.warns(UserWarning, match="runs RecBole's"):
        assert get_model("PAtt") is SASRec
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert get_model("PAtt") is SASRec  # said once
    monkeypatch.undo()
    assert recbole.utils.get_model("PAtt") is ours


def test_recboles_hyper_tuning_searches_our_model(tiny_config, tmp_path):
    """RecBole's HyperTuning with its objective_function (run_hyper's), the exhaustive
    search (hyperopt >= 0.2.7 draws with a Generator) over a grid of our model."""
    from recbole.quick_start import objective_function
    from recbole.trainer import HyperTuning

    params = tmp_path / "space.hyper"
    params.write_text("hidden_dropout_prob choice [0.1,0.3]\n")
    fixed = tmp_path / "fixed.yaml"
    import yaml

    fixed.write_text(
        yaml.safe_dump(
            {
                **tiny_config,
                **PROTOCOL,
                "model": "PAtt",
                "dataset": "tiny",
                "epochs": 1,
            }
        )
    )
    tuning = HyperTuning(
        objective_function,
        algo="exhaustive",
        early_stop=10,
        max_evals=10,
        params_file=str(params),
        fixed_config_file_list=[str(fixed)],
    )
    try:
        tuning.run()
    finally:
        logging.getLogger().handlers.clear()
    tried = sorted(tuning.params2result)
    assert tried == ["hidden_dropout_prob:0.1", "hidden_dropout_prob:0.3"]
    assert all(r["model"] == "PAtt" for r in tuning.params2result.values())


def test_import_recbole_attn_is_light_and_changes_recbole_when_it_is_imported():
    """``import recbole_attn`` imports neither torch nor RecBole (the CLI answers at
    once); importing RecBole afterwards applies the changes, and recbole.quick_start
    (Ray Tune, seconds) is patched when it is first imported, never imported by us."""
    import subprocess
    import sys

    code = (
        "import sys, recbole_attn; "
        "print('torch' in sys.modules, 'recbole' in sys.modules); "
        "import recbole; import recbole_attn.host.install as h; print(bool(h.installed())); "
        "print('recbole.quick_start.quick_start' in sys.modules); "
        "from recbole.quick_start import run_recbole, load_data_and_model; "
        "print(load_data_and_model is h.load_data_and_model)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["False", "False", "True", "False", "True"]
    assert recbole_attn.__version__


def test_recboles_graph_models_build_their_adjacency_matrix():
    """RecBole's LightGCN (and its other graph models) fill a dok_matrix with
    ``_update``, which scipy >= 1.12 removed; with the fix it is the matrix a loop of
    assignments builds."""
    import scipy.sparse as sp

    entries = {(0, 1): 1.0, (1, 0): 1.0, (2, 3): 1.0, (3, 2): 1.0}
    bulk = sp.dok_matrix((4, 4), dtype=np.float32)
    bulk._update(entries)
    loop = sp.dok_matrix((4, 4), dtype=np.float32)
    for (row, col), value in entries.items():
        loop[row, col] = value
    assert (bulk.toarray() == loop.toarray()).all() and bulk.nnz == 4


def test_recboles_lightgcn_trains_through_run_recbole(tiny_config):
    result = _recbole_run(
        "LightGCN",
        {
            **tiny_config,
            "epochs": 1,
            "train_neg_sample_args": {"distribution": "uniform", "sample_num": 1},
        },
    )
    assert 0 <= result["test_result"]["ndcg@10"] <= 1


def _private_overrides():
    """``{recbole class path: {method}}`` of every private RecBole method that a class of
    recbole_attn overrides (found by walking the package's classes)."""
    import importlib
    import inspect
    import pkgutil

    import recbole_attn

    found = {}
    for info in pkgutil.walk_packages(recbole_attn.__path__, "recbole_attn."):
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if not inspect.isclass(obj):
                continue
            theirs = [b for b in obj.__mro__ if b.__module__.startswith("recbole.")]
            ours = [b for b in obj.__mro__ if b.__module__.startswith("recbole_attn")]
            for cls in ours:  # a mixin of ours counts where it meets RecBole's class
                for attr in vars(cls):
                    if not attr.startswith("_") or attr.startswith("__"):
                        continue
                    owners = [b for b in theirs if attr in vars(b)]
                    if owners:  # the nearest RecBole class that defines it
                        path = f"{owners[0].__module__}.{owners[0].__name__}"
                        found.setdefault(path, set()).add(attr)
    return found


def test_the_private_overrides_are_declared_and_exist_in_recbole():
    """Every private RecBole method a recbole_attn class overrides is in
    engine.PRIVATE_OVERRIDES, and RecBole has each of them."""
    import importlib

    from recbole_attn.engine import PRIVATE_OVERRIDES

    declared = {k: set(v) for k, v in PRIVATE_OVERRIDES.items()}
    assert _private_overrides() == declared
    for path, methods in declared.items():
        module, name = path.rsplit(".", 1)
        cls = getattr(importlib.import_module(module), name)
        for method in methods:
            assert callable(vars(cls).get(method)), (path, method)


def test_the_pipeline_refuses_another_recbole_release(monkeypatch, tiny_config):
    import recbole

    from recbole_attn.errors import RecboleAttnError
    from recbole_attn.engine.quick_start import build

    monkeypatch.setattr(recbole, "__version__", "1.3.0")
    with pytest.raises(
        RecboleAttnError, match=r"RecBole 1\.2\.1 .* 1\.3\.0 is installed"
    ):
        build("SASRecAP", "tiny", config_dict=tiny_config)
