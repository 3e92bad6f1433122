"""
recbole_attn.tuning
###################

Hyperparameter search on Ray Tune (docs/models.md, "Hyperparameter search"), for our models and RecBole's.

RecBole's own Ray objective trains a trial, evaluates it on the TEST split and reports the
test metrics once, so that Tune selects hyperparameters on test scores. Here instead

* every trial reports its validation score after every evaluation (``valid_score``, plus all
  validation metrics), so that schedulers such as ASHA can stop bad trials early;
* the best trial is the one with the best validation score (over its epochs: the epoch whose
  model the trial saved);
* only the selected configuration is evaluated on the test split, from its saved checkpoint.

The search space is written in RecBole's hyper-parameter file format
(``learning_rate loguniform -8,0``, ``hidden_size choice [32,64]``, ``dropout uniform
0.1,0.5``, ``n_layers quniform 1,3,1``), so RecBole users keep their files.
"""

import math
import os
import tempfile

import yaml

from recbole_attn.errors import RecboleAttnError

#: per-trial keys that must be absolute because Ray runs each trial in its own directory
PATH_KEYS = ("data_path", "checkpoint_dir")


def parse_params_file(path):
    """Read a RecBole hyper-parameter file into a Ray Tune search space.

    ``loguniform a,b`` samples exp(U(a, b)) as in RecBole/hyperopt.
    """
    from ray import tune

    space = {}
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            try:
                name, kind, spec = line.split(" ", 2)
                if kind == "choice":
                    space[name] = tune.choice(list(yaml.safe_load(spec)))
                elif kind == "uniform":
                    low, high = (float(v) for v in spec.split(","))
                    space[name] = tune.uniform(low, high)
                elif kind == "loguniform":
                    low, high = (float(v) for v in spec.split(","))
                    space[name] = tune.loguniform(math.exp(low), math.exp(high))
                elif kind == "quniform":
                    low, high, q = (float(v) for v in spec.split(","))
                    space[name] = tune.quniform(low, high, q)
                else:
                    raise ValueError(f"unknown distribution {kind!r}")
            except (ValueError, TypeError, yaml.YAMLError) as err:
                raise RecboleAttnError(
                    f"{path}, line {number}: cannot read {line!r} ({err}). Expected "
                    "'<name> choice [a,b,...]', '<name> uniform low,high', "
                    "'<name> loguniform low,high' (natural-log bounds) or "
                    "'<name> quniform low,high,q'."
                ) from None
    if not space:
        raise RecboleAttnError(f"{path} defines no hyperparameter to search")
    return space


def _absolute(config_dict):
    config_dict = dict(config_dict or {})
    for key in PATH_KEYS:
        if config_dict.get(key):
            config_dict[key] = os.path.abspath(config_dict[key])
    return config_dict


def trial(params, model, dataset, config_file_list=None, config_dict=None):
    """One Ray Tune trial: train with ``params`` and report after every evaluation."""
    from ray.air import session

    from recbole_attn.quick_start import build

    config_dict = {**(config_dict or {}), **params}
    # one checkpoint folder per trial: RecBole names files by model and second, so
    # concurrent trials would overwrite each other's best model
    base = config_dict.get("checkpoint_dir") or os.path.join(os.getcwd(), "saved")
    config_dict["checkpoint_dir"] = os.path.join(base, session.get_trial_id())
    config, _, trainer, (train_data, valid_data, _) = build(
        model, dataset, config_file_list, config_dict
    )

    def report(epoch_idx, valid_score):
        metrics = {f"valid/{k}": float(v) for k, v in trainer.last_valid_result.items()}
        session.report(
            {
                "valid_score": float(valid_score),
                "epoch": epoch_idx,
                "saved_model_file": trainer.saved_model_file,
                **metrics,
            }
        )

    trainer.fit(train_data, valid_data, verbose=False, callback_fn=report)


def tune_model(
    model,
    dataset,
    params_file,
    config_file_list=None,
    config_dict=None,
    num_samples=4,
    scheduler="fifo",
    storage_path=None,
    num_cpus=None,
):
    """Search hyperparameters of ``model`` on ``dataset`` with Ray Tune.

    Returns:
        dict: ``best_params``, ``best_valid_score``, ``valid_score_bigger``,
        ``best_valid_result`` (the selected trial's validation metrics), ``test_result``
        (the selected configuration on the test split; the only test evaluation) and
        ``trials`` (one dict per trial: params, best valid score, epochs reported).
    """
    import ray
    from ray import air, tune
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler

    from recbole_attn.quick_start import load_data_and_model, make_config

    space = parse_params_file(params_file)
    config_dict = _absolute(config_dict)
    config_file_list = [os.path.abspath(p) for p in config_file_list or []]
    # validates model, dataset and metric names before any trial starts
    probe = make_config(model, dataset, config_file_list, config_dict)
    mode = "max" if probe["valid_metric_bigger"] else "min"
    epochs = probe["epochs"]
    if scheduler == "asha":
        sched = ASHAScheduler(
            time_attr="training_iteration", max_t=epochs, grace_period=1
        )
    elif scheduler == "fifo":
        sched = FIFOScheduler()
    else:
        raise RecboleAttnError(f"scheduler must be 'fifo' or 'asha', got {scheduler!r}")

    if not ray.is_initialized():
        ray.init(
            num_cpus=num_cpus,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
    storage_path = storage_path or tempfile.mkdtemp(prefix="recbole_attn_tune_")
    tuner = tune.Tuner(
        tune.with_parameters(
            trial,
            model=model,
            dataset=dataset,
            config_file_list=config_file_list,
            config_dict=config_dict,
        ),
        param_space=space,
        tune_config=tune.TuneConfig(
            metric="valid_score", mode=mode, num_samples=num_samples, scheduler=sched
        ),
        run_config=air.RunConfig(
            storage_path=storage_path, name="recbole_attn", verbose=0
        ),
    )
    results = tuner.fit()
    trials = []
    for result in results:
        if result.error is not None:
            raise RecboleAttnError(f"a trial failed: {result.error}")
        history = result.metrics_dataframe
        trials.append(
            {
                "params": {k: result.config[k] for k in space},
                "best_valid_score": float(
                    history["valid_score"].max()
                    if mode == "max"
                    else history["valid_score"].min()
                ),
                "epochs_reported": int(len(history)),
                "saved_model_file": result.metrics["saved_model_file"],
            }
        )
    pick = max if mode == "max" else min
    best = pick(trials, key=lambda t: t["best_valid_score"])
    _, _, trainer, (_, valid_data, test_data) = load_data_and_model(
        best["saved_model_file"]
    )
    model_file = best["saved_model_file"]
    valid_result = trainer.evaluate(valid_data, model_file=model_file)
    test_result = trainer.evaluate(test_data, model_file=model_file)
    return {
        "best_params": best["params"],
        "best_valid_score": best["best_valid_score"],
        "valid_score_bigger": mode == "max",
        "best_valid_result": dict(valid_result),
        "test_result": dict(test_result),
        "trials": trials,
    }
