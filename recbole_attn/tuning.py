"""
recbole_attn.tuning
###################

Hyperparameter search for our models and RecBole's (docs/tuning.md), on Ray Tune (one
machine or an existing Ray cluster) or in-process with RecBole's own ``HyperTuning``
(hyperopt, no Ray).

RecBole's own objective trains a trial, evaluates it on the TEST split and reports the test
metrics, so that its search selects hyperparameters on test scores. Here instead

* every trial reports its validation score after every evaluation (``valid_score``, its best
  so far, all validation metrics), so that schedulers such as ASHA can stop bad trials early;
* the best trial is the one with the best validation score (over its epochs: the epoch whose
  model the trial saved);
* only the selected configuration is evaluated on the test split, from its saved checkpoint.

The search space is written in RecBole's hyper-parameter file format
(``learning_rate loguniform -8,0``, ``hidden_size choice [32,64]``, ``dropout uniform
0.1,0.5``, ``n_layers quniform 1,3,1``), so RecBole users keep their files; the shipped
spaces of our models are ``properties/hyper/<Model>.hyper``. Algorithms as in RecBole's
``run_hyper.py``: ``random``, ``bayes`` (TPE) and ``exhaustive`` (every combination of
``choice`` parameters).

Everything a user can get wrong (a malformed line, a parameter the model does not read, an
empty space, ``exhaustive`` over a continuous range, an unknown algorithm or scheduler, an
unreachable cluster) is a :class:`~recbole_attn.errors.RecboleAttnError` before any trial
starts.
"""

import csv
import itertools
import json
import math
import os
import re
import socket
import sys
import time
from dataclasses import dataclass, field

import yaml

from recbole_attn.errors import RecboleAttnError
from recbole_attn.files import claim_folder, refuse_existing, run_stem

#: per-trial keys that must be absolute because Ray runs each trial in its own directory
PATH_KEYS = ("data_path", "checkpoint_dir")
ALGOS = ("random", "bayes", "exhaustive")
SCHEDULERS = ("fifo", "asha")
TOOLS = ("ray", "hyperopt")
#: what a search writes into its output folder (an earlier search's are never replaced
#: without ``overwrite``)
OUTPUTS = ("trials.csv", "trials.md", "best.yaml", "result.json", "saved", "ray")
#: written by a trial that ran to its end (all epochs or early stopping); a Ray trial
#: without it was stopped by the scheduler
STATUS_FILE = "trial_status.json"


# ---------------------------------------------------------------------- the space


@dataclass
class Param:
    """One line of a hyper-parameter file."""

    name: str
    kind: str  # choice | uniform | loguniform | quniform
    values: list = field(default_factory=list)  # choice
    bounds: tuple = ()  # (low, high[, q]); loguniform: natural-log bounds

    @property
    def continuous(self):
        return self.kind != "choice"


def shipped_spaces():
    """Model name -> path of the search space the package ships
    (``properties/hyper/<Model>.hyper``)."""
    from recbole_attn.quick_start import properties_dir

    folder = os.path.join(properties_dir(), "hyper")
    return {
        name[: -len(".hyper")]: os.path.join(folder, name)
        for name in sorted(os.listdir(folder))
        if name.endswith(".hyper")
    }


def resolve_params_file(value):
    """The search-space file ``value`` names: a file that exists, else a shipped space
    named by its model (``STOSA``, ``STOSA.hyper``, or the checkout path
    ``properties/hyper/STOSA.hyper`` run from another folder)."""
    if os.path.isfile(value):
        return value
    name = os.path.basename(value)
    name = name[: -len(".hyper")] if name.endswith(".hyper") else name
    parent = os.path.dirname(os.path.normpath(value))
    shipped = shipped_spaces()
    if name in shipped and parent in ("", os.path.join("properties", "hyper")):
        return shipped[name]
    raise RecboleAttnError(
        f"params file not found: {value}; give a RecBole hyper-parameter file, or the "
        f"name of a shipped search space: {', '.join(shipped)}"
    )


def read_params_file(path):
    """The :class:`Param` lines of a RecBole hyper-parameter file (comments and blank lines
    skipped), or of a shipped space named by its model (:func:`resolve_params_file`); a
    missing file, a malformed line or an empty file is a :class:`RecboleAttnError`."""
    path = resolve_params_file(path)
    params = []
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            try:
                params.append(_parse_line(line))
            except (ValueError, TypeError, yaml.YAMLError) as err:
                raise RecboleAttnError(
                    f"{path}, line {number}: cannot read {line!r} ({err}). Expected "
                    "'<name> choice [a,b,...]', '<name> uniform low,high', "
                    "'<name> loguniform low,high' (natural-log bounds) or "
                    "'<name> quniform low,high,q'."
                ) from None
    if not params:
        raise RecboleAttnError(f"{path} defines no hyperparameter to search")
    names = [p.name for p in params]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise RecboleAttnError(f"{path}: {', '.join(repeated)} given more than once")
    return params


def _parse_line(line):
    parts = line.split(None, 2)
    if len(parts) < 3:
        raise ValueError("a name, a distribution and its arguments are needed")
    name, kind, spec = parts
    if kind == "choice":
        values = yaml.safe_load(spec)
        if not isinstance(values, list) or not values:
            raise ValueError("choice needs a non-empty list")
        return Param(name, kind, values=values)
    numbers = tuple(float(v) for v in spec.replace(" ", "").split(","))
    expected = {"uniform": 2, "loguniform": 2, "quniform": 3}
    if kind not in expected:
        raise ValueError(f"unknown distribution {kind!r}")
    if len(numbers) != expected[kind] or not numbers[0] < numbers[1]:
        raise ValueError(f"{kind} needs {expected[kind]} numbers with low < high")
    return Param(name, kind, bounds=numbers)


def check_space(params, known, model_name, algo):
    """Every parameter is a key the run reads (``known``); ``exhaustive`` has only
    ``choice`` parameters."""
    unknown = [p.name for p in params if p.name not in known]
    if unknown:
        import difflib

        hints = []
        for name in unknown:
            close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
            hints.append(
                f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
            )
        raise RecboleAttnError(
            f"not a config key of {model_name} or of the pipeline: {', '.join(hints)}; "
            "a searched parameter must be one the run reads"
        )
    if algo == "exhaustive":
        continuous = [p.name for p in params if p.continuous]
        if continuous:
            raise RecboleAttnError(
                f"--algo=exhaustive tries every combination of 'choice' values, but "
                f"{', '.join(continuous)} are continuous; write them as choice [...] or "
                "use --algo=random or --algo=bayes"
            )


def grid_size(params):
    return math.prod(len(p.values) for p in params)


def ray_space(params, algo):
    """The Ray Tune search space (``grid_search`` for exhaustive)."""
    from ray import tune

    space = {}
    for p in params:
        if p.kind == "choice":
            maker = tune.grid_search if algo == "exhaustive" else tune.choice
            space[p.name] = maker(list(p.values))
        elif p.kind == "uniform":
            space[p.name] = tune.uniform(*p.bounds)
        elif p.kind == "loguniform":  # exp(U(a, b)), as RecBole/hyperopt
            space[p.name] = tune.loguniform(
                math.exp(p.bounds[0]), math.exp(p.bounds[1])
            )
        else:
            space[p.name] = tune.quniform(*p.bounds)
    return space


def hyperopt_space(params):
    """The hyperopt space RecBole's ``HyperTuning`` samples (built here: RecBole's own
    reader ``eval``\\ s the choice lists)."""
    from hyperopt import hp

    space = {}
    for p in params:
        if p.kind == "choice":
            space[p.name] = hp.choice(p.name, list(p.values))
        else:
            space[p.name] = getattr(hp, p.kind)(p.name, *p.bounds)
    return space


def parse_params_file(path):
    """A RecBole hyper-parameter file as a Ray Tune search space (random sampling)."""
    return ray_space(read_params_file(path), "random")


# ---------------------------------------------------------------------- one trial


def _absolute(config_dict):
    config_dict = dict(config_dict or {})
    for key in PATH_KEYS:
        if config_dict.get(key):
            config_dict[key] = os.path.abspath(str(config_dict[key]))
    return config_dict


def _plain(params):
    """Parameter values as plain Python (numpy scalars from samplers; quniform floats
    that are whole numbers stay floats, as RecBole passes them)."""
    return {k: (v.item() if hasattr(v, "item") else v) for k, v in params.items()}


def train_trial(params, model, dataset, config_file_list, config_dict, report=None):
    """Train one configuration, validating after every evaluation; never touches the test
    split. ``report(epoch, valid_score, best_valid_score, metrics, saved_model_file)`` is
    called after every evaluation. Returns the trial's summary."""
    from recbole_attn.quick_start import build, train_and_evaluate

    config_dict = {**(config_dict or {}), **_plain(params)}
    config, _, trainer, (train_data, valid_data, _) = build(
        model, dataset, config_file_list, config_dict
    )

    def on_evaluated(epoch_idx, valid_score):
        if report is not None:
            metrics = {k: float(v) for k, v in trainer.last_valid_result.items()}
            report(
                epoch_idx,
                float(valid_score),
                float(trainer.best_valid_score),
                metrics,
                trainer.saved_model_file,
            )

    result = train_and_evaluate(
        config, trainer, train_data, valid_data, callback=on_evaluated, verbose=False
    )
    summary = {
        "best_valid_score": float(result["best_valid_score"]),
        "epochs": result["epochs"],
        "stop_reason": result["stop_reason"],
        "saved_model_file": result["saved_model_file"],
    }
    with open(os.path.join(config["checkpoint_dir"], STATUS_FILE), "w") as f:
        json.dump(summary, f)
    return summary


def ray_trial(
    params, model, dataset, config_file_list=None, config_dict=None, threads=1
):
    """One Ray Tune trial: its own checkpoint folder, a report after every evaluation."""
    import torch
    from ray import tune

    torch.set_num_threads(max(1, int(threads)))
    config_dict = dict(config_dict or {})
    # one checkpoint folder per trial: RecBole names files by model and second, so
    # concurrent trials would overwrite each other's best model
    base = config_dict.get("checkpoint_dir") or os.path.join(os.getcwd(), "saved")
    config_dict["checkpoint_dir"] = os.path.join(
        base, tune.get_context().get_trial_id()
    )

    def report(epoch, valid_score, best_valid_score, metrics, saved_model_file):
        tune.report(
            {
                "valid_score": valid_score,
                "best_valid_score": best_valid_score,
                "epoch": epoch,
                "saved_model_file": saved_model_file,
                **{f"valid/{k}": v for k, v in metrics.items()},
            }
        )

    train_trial(params, model, dataset, config_file_list, config_dict, report)


# ---------------------------------------------------------------------- errors


def trial_error_line(error, path=None):
    """One line for a failed trial: the exception that ended it (no Ray trace, no ANSI
    colour codes) and where Ray keeps the full trace."""
    cause = getattr(error, "cause", None) or error
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(cause)).strip()
    lines = [line for line in text.splitlines() if line.strip()]
    last = lines[-1].strip() if lines else type(cause).__name__
    if cause is not error or ":" not in last:
        last = f"{type(cause).__name__}: {last}"
    where = f" (full trace: {os.path.join(path, 'error.txt')})" if path else ""
    return f"a trial failed: {last}{where}"


def check_ray_address(address, timeout=3.0):
    """``HOST:PORT`` must accept connections (Ray's own client retries for a minute before
    failing); ``auto`` is checked by Ray itself."""
    if address in (None, "", "auto", "local"):
        return
    host, _, port = address.rpartition(":")
    if address.startswith("ray://") or not host or not port.isdigit():
        raise RecboleAttnError(
            f"--ray_address must be auto or HOST:PORT of a running Ray head (the "
            f"address `ray start --head` prints), got {address!r}"
        )
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
    except OSError as err:
        raise RecboleAttnError(
            f"cannot reach a Ray cluster at {address} ({err.strerror or err}); start one "
            "with `ray start --head` on that machine, or check the address and firewall"
        ) from None


def _quiet_ray():
    """Ray's console output that says nothing a tuning user needs: the experiment box and
    result-folder lines of its output engine (``verbose=0`` does not reach them)."""
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")


def _init_ray(address, num_cpus):
    _quiet_ray()
    import ray

    if address:
        if ray.is_initialized():
            ray.shutdown()
        try:
            ray.init(
                address=address,
                log_to_driver=False,
                configure_logging=False,
            )
        except (ConnectionError, RuntimeError, ValueError) as err:
            raise RecboleAttnError(
                f"cannot connect to the Ray cluster at {address!r}: "
                f"{str(err).splitlines()[0]}; start one with `ray start --head`"
            ) from None
    elif not ray.is_initialized():
        ray.init(
            num_cpus=num_cpus,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )


# ---------------------------------------------------------------------- the search


def _progress_callback(total, params_names, echo):
    from ray.tune import Callback

    class Progress(Callback):
        done = 0

        def _line(self, trial, what):
            Progress.done += 1
            params = {k: trial.config.get(k) for k in params_names}
            result = trial.last_result or {}
            score = result.get("best_valid_score")
            score = "-" if score is None else f"{score:.4f}"
            epochs = result.get("training_iteration", 0)
            echo(
                f"[{Progress.done}/{total}] trial {trial.trial_id} {params}: best valid "
                f"{score} after {epochs} evaluation(s) ({what})"
            )

        def on_trial_complete(self, iteration, trials, trial, **info):
            self._line(trial, "finished")

        def on_trial_error(self, iteration, trials, trial, **info):
            self._line(trial, "failed")

    return Progress()


def _search_ray(
    params, algo, model, dataset, files, overrides, mode, epochs, options, echo
):
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler
    from ray.tune.search import BasicVariantGenerator, ConcurrencyLimiter

    num_samples, max_concurrent, seed = (
        options["num_samples"],
        options["max_concurrent"],
        options["seed"],
    )
    if algo == "bayes":
        from ray.tune.search.hyperopt import HyperOptSearch

        searcher = HyperOptSearch(
            metric="valid_score",
            mode=mode,
            # TPE's random start-up trials: 20 by default, half the budget when smaller
            n_initial_points=min(20, max(1, num_samples // 2)),
            random_state_seed=seed,
        )
        if max_concurrent:
            searcher = ConcurrencyLimiter(searcher, max_concurrent=max_concurrent)
    else:
        searcher = BasicVariantGenerator(
            max_concurrent=max_concurrent or 0, random_state=seed
        )
        if algo == "exhaustive":
            num_samples = 1  # grid_search: every combination once
    if options["scheduler"] == "asha":
        scheduler = ASHAScheduler(
            time_attr="training_iteration", max_t=epochs, grace_period=1
        )
    else:
        scheduler = FIFOScheduler()
    total = grid_size(params) if algo == "exhaustive" else num_samples
    trainable = tune.with_parameters(
        ray_trial,
        model=model,
        dataset=dataset,
        config_file_list=files,
        config_dict=overrides,
        threads=options["cpus_per_trial"],
    )
    resources = {"cpu": options["cpus_per_trial"], "gpu": options["gpus_per_trial"]}
    tuner = tune.Tuner(
        tune.with_resources(trainable, resources),
        param_space=ray_space(params, algo),
        tune_config=tune.TuneConfig(
            metric="valid_score",
            mode=mode,
            num_samples=num_samples,
            scheduler=scheduler,
            search_alg=searcher,
        ),
        run_config=tune.RunConfig(
            storage_path=options["storage_path"],
            name="recbole_attn",
            verbose=0,
            callbacks=[_progress_callback(total, [p.name for p in params], echo)],
        ),
    )
    trials = []
    for result in tuner.fit():
        names = [p.name for p in params]
        row = {"params": _plain({k: result.config[k] for k in names})}
        if result.error is not None:
            raise RecboleAttnError(trial_error_line(result.error, result.path))
        history = result.metrics_dataframe
        best = (
            history["valid_score"].max()
            if mode == "max"
            else history["valid_score"].min()
        )
        ran = int(history["epoch"].max()) + 1
        folder = os.path.dirname(result.metrics["saved_model_file"])
        status_path = os.path.join(folder, STATUS_FILE)
        if os.path.isfile(status_path):  # the trial returned: all epochs or early stop
            with open(status_path) as f:
                reason = json.load(f)["stop_reason"]
        elif ran + options["eval_step"] > epochs:
            reason = "all epochs"  # ASHA ends a trial at its last epoch (max_t)
        else:
            reason = "stopped by ASHA"
        row.update(
            best_valid_score=float(best),
            epochs=ran,
            stop_reason=reason,
            saved_model_file=result.metrics["saved_model_file"],
        )
        trials.append(row)
    return trials


def _search_hyperopt(params, algo, model, dataset, files, overrides, options, echo):
    """In-process search with RecBole's ``HyperTuning`` (hyperopt; no Ray)."""
    from recbole.trainer import HyperTuning

    trials = []
    total = grid_size(params) if algo == "exhaustive" else options["num_samples"]
    base = overrides.get("checkpoint_dir") or os.path.join(os.getcwd(), "saved")
    stream = sys.stdout  # RecBole's prints are silenced below, not the progress lines
    if echo is print:
        echo = lambda line: print(line, file=stream, flush=True)  # noqa: E731

    def objective(sampled, _fixed_files):
        trial_overrides = dict(overrides)
        trial_overrides["checkpoint_dir"] = os.path.join(base, f"trial_{len(trials)}")
        summary = train_trial(sampled, model, dataset, files, trial_overrides)
        trials.append({"params": _plain(sampled), **summary})
        echo(
            f"[{len(trials)}/{total}] trial {len(trials)} {_plain(sampled)}: best valid "
            f"{summary['best_valid_score']:.4f} after {summary['epochs']} epoch(s) "
            f"({summary['stop_reason']})"
        )
        return {
            "model": model if isinstance(model, str) else model.__name__,
            "best_valid_score": summary["best_valid_score"],
            "valid_score_bigger": options["mode"] == "max",
            "best_valid_result": None,
            "test_result": None,  # the test split is evaluated once, for the best only
        }

    if algo == "exhaustive":
        # every combination of the choice values once, in order (RecBole's exhaustive
        # search samples them at random with hyperopt's old RandomState API)
        for values in itertools.product(*(p.values for p in params)):
            objective(dict(zip((p.name for p in params), values)), None)
        return trials
    tuner = HyperTuning(
        objective,
        space=hyperopt_space(params),
        algo=algo,
        max_evals=options["num_samples"],
        # RecBole stops after 10 trials without progress; run the budget the user asked
        early_stop=max(10, options["num_samples"]),
    )
    import contextlib
    import io

    # hyperopt's fmin seeds itself from HYPEROPT_FMIN_SEED (RecBole passes no rstate)
    seed_before = os.environ.get("HYPEROPT_FMIN_SEED")
    if options["seed"] is not None:
        os.environ["HYPEROPT_FMIN_SEED"] = str(options["seed"])
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # RecBole prints each trial
            tuner.run()
    finally:
        if seed_before is None:
            os.environ.pop("HYPEROPT_FMIN_SEED", None)
        else:
            os.environ["HYPEROPT_FMIN_SEED"] = seed_before
    return trials


def tune_model(
    model,
    dataset,
    params_file,
    config_file_list=None,
    config_dict=None,
    num_samples=4,
    scheduler="fifo",
    algo="random",
    tool="ray",
    max_concurrent=None,
    seed=None,
    cpus_per_trial=1,
    gpus_per_trial=0,
    ray_address=None,
    output=None,
    storage_path=None,
    num_cpus=None,
    echo=None,
    overwrite=False,
):
    """Search hyperparameters of ``model`` on ``dataset``; select on validation, test once.

    Args:
        params_file (str): RecBole hyper-parameter file, or the name of a shipped space
            (``STOSA``: ``properties/hyper/STOSA.hyper``; :func:`resolve_params_file`).
        num_samples (int): trials of ``random`` and ``bayes`` (``exhaustive``: every
            combination once).
        algo (str): ``random`` | ``bayes`` (TPE) | ``exhaustive``.
        tool (str): ``ray`` (Ray Tune, local or ``ray_address``) | ``hyperopt`` (RecBole's
            ``HyperTuning`` in this process; no scheduler, one trial at a time).
        scheduler (str): ``fifo`` | ``asha`` (Ray only: stops bad trials early).
        max_concurrent (int): at most this many trials at once (Ray; default: as many as
            the resources allow).
        seed (int): seed of the search algorithm (each trial keeps the config ``seed``).
        cpus_per_trial, gpus_per_trial: Ray resources of one trial (GPUs set use_gpu).
        ray_address (str): ``auto`` or ``HOST:PORT`` of an existing Ray cluster.
        output (str): folder of the trial table (CSV, markdown), ``best.yaml`` and
            ``result.json`` (default: a new ``tune/<model>-<dataset>-<time>-<token>/``);
            one holding an earlier search's results is refused unless ``overwrite``.
        echo (callable): receives one progress line per finished trial (default: print).

    Returns:
        dict: ``best_params``, ``best_valid_score``, ``valid_score_bigger``,
        ``best_valid_result`` (the selected trial's validation metrics, reloaded),
        ``test_result`` (the only test evaluation), ``trials`` (params, best valid score,
        epochs, stop reason, checkpoint) and ``output`` (the folder).
    """
    from recbole_attn.quick_start import (
        get_model_class,
        known_config_keys,
        load_data_and_model,
        make_config,
    )

    echo = echo or print
    if algo not in ALGOS:
        raise RecboleAttnError(f"algo must be one of {list(ALGOS)}, got {algo!r}")
    if scheduler not in SCHEDULERS:
        raise RecboleAttnError(
            f"scheduler must be one of {list(SCHEDULERS)}, got {scheduler!r}"
        )
    if tool not in TOOLS:
        raise RecboleAttnError(f"tool must be one of {list(TOOLS)}, got {tool!r}")
    for name, value, minimum in (
        ("num_samples", num_samples, 1),
        ("cpus_per_trial", cpus_per_trial, 1),
        ("gpus_per_trial", gpus_per_trial, 0),
        ("max_concurrent", max_concurrent or 1, 1),
    ):
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or value < minimum
        ):
            raise RecboleAttnError(
                f"{name} must be a number >= {minimum}, got {value!r}"
            )
    if tool == "hyperopt" and (scheduler != "fifo" or ray_address):
        raise RecboleAttnError(
            "--tool=hyperopt runs trials one after the other in this process: it has no "
            "--scheduler=asha and no --ray_address (use --tool=ray)"
        )

    params = read_params_file(params_file)
    overrides = _absolute(config_dict)
    if gpus_per_trial:
        overrides.setdefault("use_gpu", True)
    files = [os.path.abspath(p) for p in config_file_list or []]
    # validates model, dataset, files and values before any trial starts
    probe = make_config(model, dataset, files, overrides)
    model_class = get_model_class(model)
    check_space(
        params, known_config_keys(model_class, probe), model_class.__name__, algo
    )
    mode = "max" if probe["valid_metric_bigger"] else "min"
    if tool == "ray":
        check_ray_address(ray_address)

    if output:
        output = os.path.abspath(output)
        refuse_existing(
            [os.path.join(output, name) for name in OUTPUTS],
            f"the search's output {output}",
            overwrite,
        )
        os.makedirs(output, exist_ok=True)
    else:  # a new folder no concurrent search can take
        output = claim_folder(
            os.path.abspath(
                os.path.join("tune", run_stem(model_class.__name__, dataset))
            )
        )
    overrides.setdefault("checkpoint_dir", os.path.join(output, "saved"))
    options = {
        "num_samples": int(num_samples),
        "max_concurrent": max_concurrent,
        "seed": seed,
        "scheduler": scheduler,
        "cpus_per_trial": cpus_per_trial,
        "gpus_per_trial": gpus_per_trial,
        "storage_path": storage_path or os.path.join(output, "ray"),
        "mode": mode,
        "eval_step": int(probe["eval_step"] or 1),
    }
    started = time.time()
    if tool == "ray":
        _init_ray(ray_address, num_cpus)
        trials = _search_ray(
            params,
            algo,
            model,
            dataset,
            files,
            overrides,
            mode,
            probe["epochs"],
            options,
            echo,
        )
    else:
        trials = _search_hyperopt(
            params, algo, model, dataset, files, overrides, options, echo
        )
    search_seconds = time.time() - started

    pick = max if mode == "max" else min
    best = pick(trials, key=lambda t: t["best_valid_score"])
    model_file = best["saved_model_file"]
    _, _, trainer, (_, valid_data, test_data) = load_data_and_model(model_file)
    valid_result = dict(trainer.evaluate(valid_data, model_file=model_file))
    test_result = dict(trainer.evaluate(test_data, model_file=model_file))
    result = {
        "model": model_class.__name__,
        "dataset": dataset,
        "algo": algo,
        "tool": tool,
        "scheduler": scheduler,
        "best_params": best["params"],
        "best_valid_score": best["best_valid_score"],
        "valid_score_bigger": mode == "max",
        "valid_metric": probe["valid_metric"],
        "best_valid_result": {k: float(v) for k, v in valid_result.items()},
        "test_result": {k: float(v) for k, v in test_result.items()},
        "search_seconds": round(search_seconds, 1),
        "trials": trials,
        "output": output,
    }
    write_outputs(output, result, overrides, params)
    return result


# ---------------------------------------------------------------------- outputs


def write_outputs(output, result, overrides, params):
    """``trials.csv`` and ``trials.md`` (every trial), ``best.yaml`` (the selected
    configuration: the user's overrides and the selected values; ``--config_files``
    accepts it) and ``result.json``."""
    names = [p.name for p in params]
    header = names + ["best_valid_score", "epochs", "stop_reason", "saved_model_file"]
    rows = [
        [t["params"][n] for n in names]
        + [
            f"{t['best_valid_score']:.6f}",
            t["epochs"],
            t["stop_reason"],
            t["saved_model_file"],
        ]
        for t in result["trials"]
    ]
    with open(os.path.join(output, "trials.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    best = result["best_params"]
    lines = [
        f"# {result['model']} on {result['dataset']}: {len(rows)} trials, "
        f"algo {result['algo']} ({result['tool']}, scheduler {result['scheduler']}), "
        f"{result['search_seconds']} s",
        "",
        f"Selected on validation {result['valid_metric']}; only the selected "
        "configuration was evaluated on test.",
        "",
        "| " + " | ".join(header[:-1]) + " | selected |",
        "|" + "---|" * len(header),
    ]
    for trial, row in zip(result["trials"], rows):
        mark = "**yes**" if trial["params"] == best else ""
        lines.append("| " + " | ".join(str(v) for v in row[:-1]) + f" | {mark} |")
    lines += [
        "",
        f"Best configuration: `{json.dumps(best)}`",
        "",
        f"Validation: `{json.dumps(result['best_valid_result'])}`",
        "",
        f"Test: `{json.dumps(result['test_result'])}`",
        "",
    ]
    with open(os.path.join(output, "trials.md"), "w") as f:
        f.write("\n".join(lines))
    from recbole_attn.quick_start import convert_value

    # command-line overrides are strings ("50"); the yaml holds the values they spell
    chosen = {
        k: convert_value(v) if isinstance(v, str) else v
        for k, v in overrides.items()
        if k != "checkpoint_dir"
    }
    chosen.update(best)
    with open(os.path.join(output, "best.yaml"), "w") as f:
        f.write(
            f"# selected by recbole_attn.tuning for {result['model']} on "
            f"{result['dataset']} (validation {result['valid_metric']} = "
            f"{result['best_valid_score']:.4f})\n"
        )
        yaml.safe_dump(chosen, f, sort_keys=True)
    with open(os.path.join(output, "result.json"), "w") as f:
        json.dump(result, f, indent=2, default=str)
