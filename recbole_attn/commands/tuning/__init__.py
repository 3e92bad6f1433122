"""
Hyperparameter search (docs/tuning.md) on Ray Tune or RecBole's ``HyperTuning`` over a
space in RecBole's hyper-parameter file format. Unlike RecBole's objective, a trial reports
validation scores only: the best on validation is the one configuration tested.
"""

import contextlib
import os
import time
from pathlib import Path

from recbole_attn.errors import Interrupted, RecboleAttnError
from recbole_attn.options.arguments import sigint_as_interrupt
from recbole_attn.files import ExistingOutputError, _unlink_quietly, claim_folder
from recbole_attn.files import owner_gone, owner_tag, refuse_existing
from recbole_attn.files import release_if_empty, run_stem
from recbole_attn.commands.tuning.hyperopt_search import _search_hyperopt
from recbole_attn.commands.tuning.outputs import INTERRUPTED, OUTPUTS
from recbole_attn.commands.tuning.outputs import read_interrupted, write_interrupted
from recbole_attn.commands.tuning.outputs import write_record
from recbole_attn.commands.tuning.outputs import write_outputs

# the package's API (docs/tuning.md): the search, its space and its checks
from recbole_attn.commands.tuning.ray_search import _init_ray, _search_ray
from recbole_attn.commands.tuning.ray_search import check_ray_address  # noqa: F401
from recbole_attn.commands.tuning.ray_search import trial_error_line  # noqa: F401
from recbole_attn.commands.tuning.space import check_space, parse_params_file  # noqa
from recbole_attn.commands.tuning.space import read_params_file, resolve_params_file
from recbole_attn.commands.tuning.space import shipped_spaces, total_trials  # noqa
from recbole_attn.commands.tuning.trial import _absolute

ALGOS = ("random", "bayes", "exhaustive")
SCHEDULERS = ("fifo", "asha")
TOOLS = ("ray", "hyperopt")

#: beside the claimed (empty) ``result.json``: who claimed it (``files.owner_tag``), so
#: that the claim of a search that was killed (no clean-up ran) is known for one
OWNER = ".search.owner"


def _claim_output(output, overwrite):
    """Claim ``output`` (an empty ``result.json`` made exclusively, its owner in
    :data:`OWNER`) unless it holds an earlier search's results; a stopped or killed
    search's files are its own, continued. Returns the claim (``None`` with
    ``overwrite``)."""
    what = f"the search's output {output}"
    claim = os.path.join(output, "result.json")
    owner = os.path.join(output, OWNER)
    killed = False
    if os.path.isfile(claim) and os.path.getsize(claim) == 0 and not overwrite:
        with contextlib.suppress(OSError):
            killed = owner_gone(Path(owner).read_text(encoding="utf-8"))
        if not killed:
            raise ExistingOutputError(
                f"{what} is being written by another search (its result.json is "
                "empty; if no search runs there, the last one was killed: remove the "
                "file); choose another --output"
            )
        os.remove(claim)  # a killed search's: this one takes its place
    # a search that was stopped there left its own files: the same command continues it
    stopped = killed or os.path.isfile(os.path.join(output, INTERRUPTED))
    kept = ["result.json"] if stopped else OUTPUTS
    refuse_existing([os.path.join(output, n) for n in kept], what, overwrite)
    os.makedirs(output, exist_ok=True)
    if overwrite:
        return None
    try:
        with open(claim, "x"):
            pass
    except FileExistsError:
        raise ExistingOutputError(
            f"{what} is being written by another search (it claimed result.json a "
            "moment ago); choose another --output"
        ) from None
    Path(owner).write_text(owner_tag() + "\n", encoding="utf-8")
    return claim


def tune_model(
    model,
    dataset,
    params_file,
    config_file_list=None,
    config_dict=None,
    num_samples=4,
    scheduler="fifo",
    grace_period=None,
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
    """Search hyperparameters of ``model`` on ``dataset``: select on validation, test
    the selected configuration once (the options as ``recbole-attn --help`` says).
    Returns the search's ``result.json`` as a dict; ``output`` is its folder."""
    numbers = num_samples, cpus_per_trial, gpus_per_trial, max_concurrent
    _check_options(algo, scheduler, tool, ray_address, *numbers)
    overrides = _absolute(config_dict)
    if gpus_per_trial:
        overrides.setdefault("use_gpu", True)
    search = _prepare(model, dataset, params_file, config_file_list, overrides, algo)
    _check_grace_period(grace_period, scheduler, search)
    if tool == "ray":
        check_ray_address(ray_address)
    search.update(
        algo=algo,
        tool=tool,
        scheduler=scheduler,
        grace_period=int(grace_period or 1),
        num_samples=int(num_samples),
        max_concurrent=max_concurrent,
        seed=seed,
        cpus_per_trial=cpus_per_trial,
        gpus_per_trial=gpus_per_trial,
        echo=echo or print,
        given_output=bool(output),
    )
    if output:
        output = os.path.abspath(output)
        claim = _claim_output(output, overwrite)
    else:  # a new folder no concurrent search can take
        folder = os.path.join("tune", run_stem(search["name"], search["dataset"]))
        output, claim = claim_folder(os.path.abspath(folder)), None
    search["overrides"].setdefault("checkpoint_dir", os.path.join(output, "saved"))
    search["storage_path"] = storage_path or os.path.join(output, "ray")
    try:  # a failed search leaves no claim behind
        with (
            sigint_as_interrupt()
        ):  # Ctrl-C stops Ray's start-up too (run.run says why)
            return _search_and_test(search, output, ray_address, num_cpus)
    finally:
        release_if_empty(claim)
        if claim:
            _unlink_quietly(os.path.join(output, OWNER))


def _prepare(model, dataset, params_file, config_file_list, overrides, algo):
    """The search's space, files and overrides, and what its configuration says (the
    model's class name, validation mode and metric, epochs), checked before any trial.
    """
    from recbole_attn.engine.config import make_config
    from recbole_attn.options.check import known_run_keys

    params = read_params_file(params_file)
    files = [os.path.abspath(p) for p in config_file_list or []]
    probe = make_config(model, dataset, files, overrides)
    name = probe.model_class.__name__
    check_space(params, known_run_keys(probe), name, algo)
    return {
        "model": model,
        "dataset": dataset,
        "params": params,
        "files": files,
        "overrides": overrides,
        "name": name,
        "mode": "max" if probe["valid_metric_bigger"] else "min",
        "valid_metric": probe["valid_metric"],
        "epochs": probe["epochs"],
        "eval_step": int(probe["eval_step"] or 1),
    }


def _search_and_test(search, output, ray_address, num_cpus):
    """Run the trials (after those a stopped search finished), select on validation,
    test once, write the outputs; a stop keeps the finished trials."""
    finished = read_interrupted(output)
    total = total_trials(search)
    # after each finished trial (``finished`` holds it): kept even if the search is killed
    search["keep"] = lambda: write_record(
        output, finished, total, search["name"], search["dataset"]
    )
    try:
        started = time.time()
        if search["tool"] == "ray":
            _init_ray(ray_address, num_cpus)
            trials = _search_ray(search, finished)
        else:
            trials = _search_hyperopt(search, finished)
        seconds = time.time() - started
        best, valid_result, test_result = _select_and_test(trials, search["mode"])
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM, or Ray Tune's own stop
        raise _interrupted(output, finished, search) from None
    result = {
        "model": search["name"],
        "dataset": search["dataset"],
        "algo": search["algo"],
        "tool": search["tool"],
        "scheduler": search["scheduler"],
        **(
            {"grace_period": search["grace_period"]}
            if search["scheduler"] == "asha"
            else {}
        ),
        "best_params": best["params"],
        "best_valid_score": best["best_valid_score"],
        "valid_score_bigger": search["mode"] == "max",
        "valid_metric": search["valid_metric"],
        "best_valid_result": {k: float(v) for k, v in valid_result.items()},
        "test_result": {k: float(v) for k, v in test_result.items()},
        "search_seconds": round(seconds, 1),
        "trials": trials,
        "output": output,
    }
    write_outputs(output, result, search["overrides"], search["params"])
    return result


def _check_grace_period(grace_period, scheduler, search):
    """ASHA's grace period: a whole number of evaluations within the trials' budget."""
    if grace_period is None:
        return
    number = isinstance(grace_period, int) and not isinstance(grace_period, bool)
    if not number or grace_period < 1:
        raise RecboleAttnError(
            f"grace_period must be a whole number >= 1, got {grace_period!r}"
        )
    if scheduler != "asha":
        raise RecboleAttnError(
            "grace_period is ASHA's (the evaluations every trial gets before it may "
            "be stopped): add --scheduler=asha, or drop --grace_period"
        )
    evaluations = max(search["epochs"] // search["eval_step"], 1)
    if grace_period > evaluations:
        raise RecboleAttnError(
            f"grace_period {grace_period} is more than the {evaluations} evaluations "
            f"a trial has (epochs {search['epochs']}, eval_step {search['eval_step']}): "
            "lower --grace_period or raise --epochs"
        )


def _check_options(algo, scheduler, tool, ray_address, *numbers):
    """The search's options from Python, by the rules of its command-line flags."""
    choices = {"algo": ALGOS, "scheduler": SCHEDULERS, "tool": TOOLS}
    for (name, allowed), value in zip(choices.items(), (algo, scheduler, tool)):
        if value not in allowed:
            raise RecboleAttnError(
                f"{name} must be one of {list(allowed)}, got {value!r}"
            )
    names = ("num_samples", "cpus_per_trial", "gpus_per_trial", "max_concurrent")
    for name, value in zip(names, numbers):
        minimum = 0 if name == "gpus_per_trial" else 1
        value = 1 if name == "max_concurrent" and not value else value
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not number or value < minimum:
            raise RecboleAttnError(
                f"{name} must be a number >= {minimum}, got {value!r}"
            )
    if tool == "hyperopt" and (scheduler != "fifo" or ray_address):
        raise RecboleAttnError(
            "--tool=hyperopt runs trials one after the other in this process: it has no "
            "--scheduler=asha and no --ray_address (use --tool=ray)"
        )


def _select_and_test(trials, mode):
    """The best trial on validation, and its checkpoint's validation and test results
    (the only test evaluation)."""
    from recbole_attn.engine.quick_start import load_data_and_model

    pick = max if mode == "max" else min
    best = pick(trials, key=lambda t: t["best_valid_score"])
    model_file = best["saved_model_file"]
    _, _, trainer, (_, valid_data, test_data) = load_data_and_model(model_file)
    valid_result = dict(trainer.evaluate(valid_data, model_file=model_file))
    test_result = dict(trainer.evaluate(test_data, model_file=model_file))
    return best, valid_result, test_result


def _interrupted(output, finished, search):
    """What a stopped search keeps (its finished trials), and the error that says how
    to continue it."""
    total = total_trials(search)
    name, dataset = search["name"], search["dataset"]
    write_interrupted(output, finished, search["params"], total, name, dataset)
    again = "the same command" + (
        "" if search["given_output"] else f" and --output={output}"
    )
    how = "it runs the trials left"
    return Interrupted(
        f"search interrupted: {len(finished)} of {total} trials finished, "
        f"kept in {os.path.join(output, 'trials.csv')}; continue with {again} "
        f"({how}, then selects and tests)"
    )
