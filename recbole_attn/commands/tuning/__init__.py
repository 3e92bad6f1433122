"""
recbole_attn.commands.tuning
############################

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

import os
import time

from recbole_attn.errors import Interrupted, RecboleAttnError
from recbole_attn.files import (
    ExistingOutputError,
    _unlink_quietly,
    claim_folder,
    owner_gone,
    owner_tag,
    refuse_existing,
    release_if_empty,
    run_stem,
)
from recbole_attn.commands.tuning.hyperopt_search import _search_hyperopt
from recbole_attn.commands.tuning.outputs import (
    INTERRUPTED,
    OUTPUTS,
    read_interrupted,
    write_interrupted,
    write_outputs,
)
from recbole_attn.commands.tuning.ray_search import (  # noqa: F401  (re-exported)
    _init_ray,
    _search_ray,
    check_ray_address,
    ray_trial,
    trial_error_line,
)
from recbole_attn.commands.tuning.space import (  # noqa: F401  (re-exported)
    Param,
    check_space,
    grid_size,
    hyperopt_space,
    parse_params_file,
    ray_space,
    read_params_file,
    resolve_params_file,
    shipped_spaces,
)
from recbole_attn.commands.tuning.trial import (  # noqa: F401  (re-exported)
    PATH_KEYS,
    STATUS_FILE,
    _absolute,
    train_trial,
)

ALGOS = ("random", "bayes", "exhaustive")
SCHEDULERS = ("fifo", "asha")
TOOLS = ("ray", "hyperopt")


#: beside the claimed (empty) ``result.json``: who claimed it (``files.owner_tag``), so
#: that the claim of a search that was killed (no clean-up ran) is known for one
OWNER = ".search.owner"


def _claim_output(output, overwrite):
    """Check that the search's ``output`` folder holds no earlier search's files and
    claim it (its ``result.json``, created empty and exclusively, and who claimed it in
    :data:`OWNER`) before the work: a second search into it, started while this one
    runs, stops at once instead of replacing this one's results at the end. The files of
    a search that stopped there (Ctrl-C: ``interrupted.json``; killed: its claim and
    a dead owner) are its own: the same command continues it. Returns ``(claim, stopped)``:
    the claimed file (None with ``overwrite``) and whether a stopped search is
    continued."""
    what = f"the search's output {output}"
    claim = os.path.join(output, "result.json")
    owner = os.path.join(output, OWNER)
    killed = False
    if os.path.isfile(claim) and os.path.getsize(claim) == 0 and not overwrite:
        try:
            with open(owner, encoding="utf-8") as f:
                killed = owner_gone(f.read())
        except OSError:
            pass
        if not killed:
            raise ExistingOutputError(
                f"{what} is being written by another search (its result.json is "
                "empty; if no search runs there, the last one was killed: remove the "
                "file); choose another --output"
            )
        os.remove(claim)  # a killed search's: this one takes its place
    # a search that was stopped there left its own files: the same command continues it
    stopped = killed or os.path.isfile(os.path.join(output, INTERRUPTED))
    refuse_existing(
        [
            os.path.join(output, n)
            for n in OUTPUTS
            if not (stopped and n != "result.json")
        ],
        what,
        overwrite,
    )
    os.makedirs(output, exist_ok=True)
    if overwrite:
        return None, stopped
    try:
        with open(claim, "x"):
            pass
    except FileExistsError:
        raise ExistingOutputError(
            f"{what} is being written by another search (it claimed result.json a "
            "moment ago); choose another --output"
        ) from None
    with open(owner, "w", encoding="utf-8") as f:
        f.write(owner_tag() + "\n")
    return claim, stopped


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
    from recbole_attn.engine.config import make_config
    from recbole_attn.options.check import known_run_keys
    from recbole_attn.engine.quick_start import load_data_and_model

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
    model_class = probe.model_class
    check_space(params, known_run_keys(probe), model_class.__name__, algo)
    mode = "max" if probe["valid_metric_bigger"] else "min"
    if tool == "ray":
        check_ray_address(ray_address)

    claim, stopped = None, False
    given_output = bool(output)
    if output:
        output = os.path.abspath(output)
        claim, stopped = _claim_output(output, overwrite)
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
    # the finished trials: those of a stopped search in this folder first (the same
    # command continues it), then this one's, as each finishes
    finished = read_interrupted(output)
    options["continue"] = bool(finished) or stopped
    total = grid_size(params) if algo == "exhaustive" else int(num_samples)
    try:  # a failed search leaves no claim behind
        started = time.time()
        try:
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
                    finished,
                )
            else:
                trials = _search_hyperopt(
                    params,
                    algo,
                    model,
                    dataset,
                    files,
                    overrides,
                    options,
                    echo,
                    finished,
                )
            search_seconds = time.time() - started

            pick = max if mode == "max" else min
            best = pick(trials, key=lambda t: t["best_valid_score"])
            model_file = best["saved_model_file"]
            _, _, trainer, (_, valid_data, test_data) = load_data_and_model(model_file)
            valid_result = dict(trainer.evaluate(valid_data, model_file=model_file))
            test_result = dict(trainer.evaluate(test_data, model_file=model_file))
        except KeyboardInterrupt:  # Ctrl-C, SIGTERM, or Ray Tune's own stop
            write_interrupted(
                output, finished, params, total, model_class.__name__, dataset
            )
            again = "the same command" + (
                "" if given_output else f" and --output={output}"
            )
            how = (
                "it restores Ray's experiment and runs the unfinished trials"
                if tool == "ray"
                else "it runs the trials left"
            )
            raise Interrupted(
                f"search interrupted: {len(finished)} of {total} trials finished, "
                f"kept in {os.path.join(output, 'trials.csv')}; continue with {again} "
                f"({how}, then selects and tests)"
            ) from None
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
    finally:
        release_if_empty(claim)
        if claim:
            _unlink_quietly(os.path.join(output, OWNER))
