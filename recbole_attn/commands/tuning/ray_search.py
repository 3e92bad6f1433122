"""
recbole_attn.commands.tuning.ray_search
#######################################

The search on Ray Tune (this machine or an existing cluster): a trial reports its
validation score after every evaluation (``tune.report``), so that schedulers such as
ASHA can stop bad trials; one progress line per finished trial.
"""

import json
import logging
import os
import re
import socket

from recbole_attn.errors import RecboleAttnError
from recbole_attn.commands.tuning.space import grid_size, ray_space
from recbole_attn.commands.tuning.trial import STATUS_FILE, _plain, train_trial


def ray_trial(
    params, model, dataset, config_file_list=None, config_dict=None, threads=1
):
    """One Ray Tune trial: its own checkpoint folder, a report after every evaluation."""
    from ray import tune

    config_dict = {**(config_dict or {}), "threads": max(1, int(threads))}
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


#: Ray's errors for a trial it lost (not an exception of the trial's code): what to say
_RAY_LOST = {
    "OutOfMemoryError": "Ray stopped it: the machine ran low on memory",
    "WorkerCrashedError": "its worker process died",
    "ActorDiedError": "its worker process died",
    "NodeDiedError": "the machine running it left the cluster",
    "LocalRayletDiedError": "Ray's process on this machine died",
    "OwnerDiedError": "the process that owned its data died",
}


def _ray_lost_line(error):
    """The one line for a trial Ray lost (memory, a dead worker), or None."""
    for candidate in (error, getattr(error, "cause", None), error.__cause__):
        name = type(candidate).__name__ if candidate is not None else ""
        if name not in _RAY_LOST:
            continue
        text = re.sub(r"\x1b\[[0-9;]*m", "", str(candidate))
        line = _RAY_LOST[name]
        used = re.search(r"was running was ([0-9.]+ ?GB / [0-9.]+ ?GB)", text)
        limit = re.search(r"memory usage threshold of ([0-9]+(?:\.[0-9]+)?)", text)
        if used:
            line += f" ({used.group(1)} used"
            line += f", Ray's threshold {limit.group(1)})" if limit else ")"
        if name == "OutOfMemoryError":
            line += (
                "; free memory, run fewer trials at once (--max_concurrent) or a "
                "smaller model"
            )
        return line
    return None


def trial_error_line(error, path=None):
    """One line for a failed trial: the exception that ended it, or why Ray lost it
    (memory, a dead worker), without Ray's trace or ANSI colour codes, and where Ray keeps
    the full trace."""
    where = f" (full trace: {os.path.join(path, 'error.txt')})" if path else ""
    lost = _ray_lost_line(error)
    if lost:
        return f"a trial failed: {lost}{where}"
    cause = getattr(error, "cause", None) or error
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(cause)).strip()
    lines = [line for line in text.splitlines() if line.strip()]
    last = lines[-1].strip() if lines else type(cause).__name__
    if cause is not error or ":" not in last:
        last = f"{type(cause).__name__}: {last}"
    return f"a trial failed: {last}{where}"


#: an HTTP/2 client's first bytes: the connection preface and an empty SETTINGS frame
_HTTP2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


def check_ray_address(address, timeout=3.0):
    """``HOST:PORT`` must be a Ray head: it accepts a connection and answers as a gRPC
    server does (HTTP/2: a SETTINGS frame first) within ``timeout`` seconds. Ray's own
    client retries for a minute, and waits forever on a port that accepts and never
    answers; ``auto`` is checked by Ray itself. With ``RAY_USE_TLS`` only the connection
    is checked."""
    if address in (None, "", "auto", "local"):
        return
    host, _, port = address.rpartition(":")
    if address.startswith("ray://") or not host or not port.isdigit():
        raise RecboleAttnError(
            f"--ray_address must be auto or HOST:PORT of a running Ray head (the "
            f"address `ray start --head` prints), got {address!r}"
        )
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as conn:
            if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
                return
            conn.sendall(_HTTP2_HELLO)
            reply = _read_exactly(conn, 9, timeout)
    except OSError as err:
        raise RecboleAttnError(
            f"cannot reach a Ray cluster at {address} ({err.strerror or err}); start one "
            "with `ray start --head` on that machine, or check the address and firewall"
        ) from None
    if len(reply) < 9 or reply[3] != 4:  # frame type 4: SETTINGS
        answer = "no answer" if not reply else f"an answer that is not gRPC: {reply!r}"
        raise RecboleAttnError(
            f"{address} accepts connections but is not a Ray head ({answer} within "
            f"{timeout:g} s); give the address `ray start --head` printed (its GCS port, "
            "6379 by default)"
        )


def _read_exactly(conn, size, timeout):
    """Up to ``size`` bytes, fewer when the peer closes or is silent for ``timeout``."""
    data = b""
    conn.settimeout(timeout)
    while len(data) < size:
        try:
            chunk = conn.recv(size - len(data))
        except socket.timeout:
            break
        if not chunk:
            break
        data += chunk
    return data


class _LocalClusterNotice(logging.Filter):
    """Ray's notice that the cluster it starts on this machine uses token authentication
    ("Token authentication is enabled for this Ray cluster ..."): no cluster was asked
    for. Its warning that authentication is DISABLED is kept."""

    def filter(self, record):
        return "is enabled for this Ray cluster" not in str(record.msg)


class _TrialTrace(logging.Filter):
    """Tune's log of a failed trial with its whole trace (~150 lines for a trial Ray
    killed for memory, with its object-store dump): the search says it in one line
    instead (:func:`trial_error_line`), with the path of the trace Ray keeps."""

    def filter(self, record):
        return not str(record.msg).startswith("Trial task failed for trial")


class _StopNotice(logging.Filter):
    """Ray Tune's lines when Ctrl-C stops it ("Stop signal received ...", "Experiment
    has been interrupted ... Tuner.restore(...)"): the search says in one line what is
    kept and the command that continues it (the same command restores Ray's
    experiment)."""

    def filter(self, record):
        text = str(record.msg)
        return not text.startswith(("Stop signal received", "Experiment has been int"))


def _quiet_ray():
    """Ray's console output that says nothing a tuning user needs: the experiment box and
    result-folder lines of its output engine (``verbose=0`` does not reach them), and
    its token-authentication notice for the local cluster."""
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    auth = logging.getLogger("ray._private.authentication.authentication_token_setup")
    if not any(isinstance(f, _LocalClusterNotice) for f in auth.filters):
        auth.addFilter(_LocalClusterNotice())
    tune_run = logging.getLogger("ray.tune.tune")
    if not any(isinstance(f, _StopNotice) for f in tune_run.filters):
        tune_run.addFilter(_StopNotice())
    controller = logging.getLogger("ray.tune.execution.tune_controller")
    if not any(isinstance(f, _TrialTrace) for f in controller.filters):
        controller.addFilter(_TrialTrace())


def _init_ray(address, num_cpus):
    """Start Ray here, or connect to ``address``. ``ray.init`` makes a SIGTERM end the
    driver at once (``sys.exit``: no word, no kept trials); the handler in place before
    (the command's: SIGTERM as Ctrl-C) is put back."""
    import signal
    import threading

    main_thread = threading.current_thread() is threading.main_thread()
    before = signal.getsignal(signal.SIGTERM) if main_thread else None
    try:
        _start_ray(address, num_cpus)
    finally:
        if main_thread and before is not None:
            signal.signal(signal.SIGTERM, before)


def _start_ray(address, num_cpus):
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


def _trial_row(trial, params_names, epochs, eval_step):
    """A finished Ray trial as a row of the trial table (what a stopped search keeps)."""
    result = trial.last_result or {}
    saved = result.get("saved_model_file")
    if saved is None or result.get("best_valid_score") is None:
        return None
    ran = int(result.get("epoch", -1)) + 1
    status_path = os.path.join(os.path.dirname(saved), STATUS_FILE)
    if os.path.isfile(status_path):
        with open(status_path) as f:
            reason = json.load(f)["stop_reason"]
    elif ran + eval_step > epochs:
        reason = "all epochs"
    else:
        reason = "stopped by ASHA"
    return {
        "params": _plain({k: trial.config.get(k) for k in params_names}),
        "best_valid_score": float(result["best_valid_score"]),
        "epochs": ran,
        "stop_reason": reason,
        "saved_model_file": saved,
        "trial_id": trial.trial_id,
    }


#: the ids of the trials Ray Tune completed in this process
completed = set()


def _progress_callback(total, params_names, echo, finished=None, epochs=0, step=1):
    """One line per finished trial; its row appended to ``finished`` (its id to
    :data:`completed`)."""
    from ray.tune import Callback

    class Progress(Callback):
        done = len(finished or ())

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
            completed.add(trial.trial_id)
            row = _trial_row(trial, params_names, epochs, step)
            if finished is not None and row is not None:
                finished.append(row)

        def on_trial_error(self, iteration, trials, trial, **info):
            self._line(trial, "failed")

    return Progress()


def _search_ray(
    params,
    algo,
    model,
    dataset,
    files,
    overrides,
    mode,
    epochs,
    options,
    echo,
    finished=None,
):
    """The search on Ray Tune; every finished trial's row is appended to ``finished``
    (holding those of a stopped search this one continues: Ray's experiment is then
    restored, ``Tuner.restore``, and runs its unfinished trials). A search Ray Tune
    stopped (its own Ctrl-C handling) is a ``KeyboardInterrupt``."""
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
    finished = [] if finished is None else finished
    progress = _progress_callback(
        total,
        [p.name for p in params],
        echo,
        finished,
        epochs,
        options["eval_step"],
    )
    experiment = os.path.join(options["storage_path"], "recbole_attn")
    if options.get("continue") and tune.Tuner.can_restore(experiment):
        tuner = tune.Tuner.restore(
            experiment,
            trainable=tune.with_resources(trainable, resources),
            resume_unfinished=True,
            restart_errored=True,
        )
        run_config = getattr(getattr(tuner, "_local_tuner", None), "_run_config", None)
        if run_config is not None:  # this process's progress lines and rows
            run_config.callbacks = [progress]
        return _results(tuner.fit(), params, mode, epochs, options, finished, total)
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
            callbacks=[progress],
        ),
    )
    return _results(tuner.fit(), params, mode, epochs, options, finished, total)


def _results(grid, params, mode, epochs, options, finished, total):
    """The rows of a search's trials from Ray's ``ResultGrid``; a ``KeyboardInterrupt``
    when a trial did not finish or fewer than ``total`` were made (Ray Tune stopped the
    search on a Ctrl-C: it makes trials as resources free up)."""
    done = {t.get("trial_id") for t in finished} | completed
    analysis = getattr(grid, "_experiment_analysis", None)
    statuses = {t.trial_id: t.status for t in getattr(analysis, "trials", None) or ()}
    if len(grid) < total or any(
        status not in ("TERMINATED", "ERROR") for status in statuses.values()
    ):
        raise KeyboardInterrupt
    trials = []
    for result in grid:
        names = [p.name for p in params]
        row = {"params": _plain({k: result.config[k] for k in names})}
        if result.error is not None:
            raise RecboleAttnError(trial_error_line(result.error, result.path))
        trial_id = (result.metrics or {}).get("trial_id")
        if not statuses and trial_id not in done:
            raise KeyboardInterrupt  # unfinished: Ray Tune was stopped
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
