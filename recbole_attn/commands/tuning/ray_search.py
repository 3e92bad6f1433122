"""
The search on Ray Tune (here or on a cluster): a trial reports its validation score after
every evaluation, so that schedulers such as ASHA can stop bad trials early.
"""

import contextlib
import itertools
import json
import logging
import os
import re
import socket

from recbole_attn.errors import RecboleAttnError
from recbole_attn.engine.logs import ANSI_COLOR
from recbole_attn.commands.tuning.space import ray_space, total_trials
from recbole_attn.commands.tuning.trial import STATUS_FILE, _plain, train_trial


def ray_trial(
    params, model, dataset, config_file_list=None, config_dict=None, threads=1
):
    """One Ray Tune trial: its own checkpoint folder, a report after every evaluation."""
    from ray import tune

    config_dict = {**(config_dict or {}), "threads": max(1, int(threads))}
    # RecBole names checkpoints by model and second: concurrent trials need a folder each
    base = config_dict.get("checkpoint_dir") or os.path.join(os.getcwd(), "saved")
    config_dict["checkpoint_dir"] = os.path.join(
        base, tune.get_context().get_trial_id()
    )

    def report(epoch, valid_score, best_valid_score, metrics, saved_model_file):
        """Tune's report of one evaluation (what schedulers such as ASHA read)."""
        tune.report(
            dict(
                valid_score=valid_score,
                best_valid_score=best_valid_score,
                epoch=epoch,
                saved_model_file=saved_model_file,
                **{f"valid/{k}": v for k, v in metrics.items()},
            )
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
        text = ANSI_COLOR.sub("", str(candidate))
        line = _RAY_LOST[name]
        used = re.search(r"was running was ([0-9.]+ ?GB / [0-9.]+ ?GB)", text)
        limit = re.search(r"memory usage threshold of ([0-9]+(?:\.[0-9]+)?)", text)
        if used:
            line += f" ({used.group(1)} used"
            line += f", Ray's threshold {limit.group(1)})" if limit else ")"
        if name == "OutOfMemoryError":
            line += "; free memory, run fewer trials at once (--max_concurrent) or a "
            line += "smaller model"
        return line
    return None


def trial_error_line(error, path=None):
    """One line for a failed trial: its exception, or why Ray lost it, without Ray's
    trace or colour codes; and where Ray keeps the trace."""
    where = f" (full trace: {os.path.join(path, 'error.txt')})" if path else ""
    lost = _ray_lost_line(error)
    if lost:
        return f"a trial failed: {lost}{where}"
    cause = getattr(error, "cause", None) or error
    text = ANSI_COLOR.sub("", str(cause)).strip()
    lines = [line for line in text.splitlines() if line.strip()]
    last = lines[-1].strip() if lines else type(cause).__name__
    if cause is not error or ":" not in last:
        last = f"{type(cause).__name__}: {last}"
    return f"a trial failed: {last}{where}"


#: an HTTP/2 client's first bytes: the connection preface and an empty SETTINGS frame
_HTTP2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


def check_ray_address(address, timeout=3.0):
    """``HOST:PORT`` must answer as a Ray head's gRPC server does (HTTP/2: SETTINGS
    first) within ``timeout`` s; Ray's client would retry for a minute, or wait forever
    on a silent port. ``auto`` is Ray's to check; with ``RAY_USE_TLS``, only the port.
    """
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
    with contextlib.suppress(socket.timeout):
        while len(data) < size and (chunk := conn.recv(size - len(data))):
            data += chunk
    return data


def _without(pattern):
    """A logging filter that drops the records whose message ``pattern`` finds."""
    search = re.compile(pattern).search
    return lambda record: not search(str(record.msg))


#: Ray's console lines a search says better itself: the notice of token authentication
#: on the local cluster (its warning that it is DISABLED is kept), Tune's ~150-line
#: trace of a failed trial (:func:`trial_error_line`), and Tune's lines on a Ctrl-C
_QUIET = {
    "ray._private.authentication.authentication_token_setup": _without(
        "is enabled for this Ray cluster"
    ),
    "ray.tune.execution.tune_controller": _without("^Trial task failed for trial"),
    "ray.tune.tune": _without("^(Stop signal received|Experiment has been int)"),
}


def _quiet_ray():
    """Ray's lines a tuning user needs not: its output engine's boxes (``verbose=0``
    does not reach them) and the lines of :data:`_QUIET`."""
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    for name, quiet in _QUIET.items():
        logger = logging.getLogger(name)
        if quiet not in logger.filters:
            logger.addFilter(quiet)


def _init_ray(address, num_cpus):
    """``ray.init`` on ``address`` (a cluster), else here unless Ray runs already; the
    SIGTERM handler ``ray.init`` replaces (the command's: SIGTERM as Ctrl-C) is put
    back, and so is the SIGINT handler (the search's: Ctrl-C stops it). A Ctrl-C while
    Ray is imported stops the search once the imports are done."""
    import signal
    import threading

    from recbole_attn.options.arguments import sigint_held

    _quiet_ray()
    with sigint_held():  # Ctrl-C during the imports: after them, Ray whole
        import ray
        import ray.tune  # noqa: F401 (the search's, seconds of imports)

    quiet = {"log_to_driver": False, "configure_logging": False}
    main_thread = threading.current_thread() is threading.main_thread()
    before = signal.getsignal(signal.SIGTERM) if main_thread else None
    before_int = signal.getsignal(signal.SIGINT) if main_thread else None
    try:
        if not address:
            if not ray.is_initialized():
                ray.init(num_cpus=num_cpus, include_dashboard=False, **quiet)
            return
        if ray.is_initialized():
            ray.shutdown()
        try:
            ray.init(address=address, **quiet)
        except (ConnectionError, RuntimeError, ValueError) as err:
            raise RecboleAttnError(
                f"cannot connect to the Ray cluster at {address!r}: "
                f"{str(err).splitlines()[0]}; start one with `ray start --head`"
            ) from None
    finally:
        if main_thread and before is not None:
            signal.signal(signal.SIGTERM, before)
        if main_thread and before_int is not None:
            signal.signal(signal.SIGINT, before_int)


def _row(params, best_valid_score, ran, saved, search, seconds=None):
    """A row of the trial table. Why the trial stopped: its own word (it returned: all
    epochs or early stopping), else all epochs or ASHA's stop (at its last epoch).
    ``seconds``: Ray's ``time_total_s`` of the trial (also of one that ASHA stopped)."""
    status_path = os.path.join(os.path.dirname(saved), STATUS_FILE)
    if os.path.isfile(status_path):
        with open(status_path) as f:
            reason = json.load(f)["stop_reason"]
    elif ran + search["eval_step"] > search["epochs"]:
        reason = "all epochs"
    else:
        reason = "stopped by ASHA"
    row = {
        "params": _plain(params),
        "best_valid_score": float(best_valid_score),
        "epochs": ran,
        "stop_reason": reason,
        "saved_model_file": saved,
    }
    if seconds is not None:
        row["seconds"] = round(float(seconds), 1)
    return row


def _trial_row(trial, names, search):
    """A finished Ray trial as a row of the trial table (what a stopped search keeps)."""
    result = trial.last_result or {}
    saved, best = result.get("saved_model_file"), result.get("best_valid_score")
    if saved is None or best is None:
        return None
    params = {k: trial.config.get(k) for k in names}
    ran = int(result.get("epoch", -1)) + 1
    row = _row(params, best, ran, saved, search, result.get("time_total_s"))
    return {**row, "trial_id": trial.trial_id}


#: the ids of the trials Ray Tune completed in this process
completed = set()


def _progress_callback(search, finished):
    """One line per finished trial; its row appended to ``finished`` (its id to
    :data:`completed`)."""
    from ray.tune import Callback

    names = [p.name for p in search["params"]]
    total, echo = total_trials(search), search["echo"]

    class Progress(Callback):
        done = len(finished)

        def _line(self, trial, what):
            Progress.done += 1
            params = {k: trial.config.get(k) for k in names}
            result = trial.last_result or {}
            score = result.get("best_valid_score")
            score = "-" if score is None else f"{score:.4f}"
            epochs = result.get("training_iteration", 0)
            echo(
                f"[{Progress.done}/{total}] trial {trial.trial_id} {params}: best valid "
                f"{score} after {epochs} evaluation(s) ({what})"
            )

        def on_trial_complete(self, iteration, trials, trial, **info):
            """Its row among the finished, kept, then its line: a search killed once
            the line is out does not run the trial again."""
            completed.add(trial.trial_id)
            row = _trial_row(trial, names, search)
            if row is not None:
                finished.append(row)
                search.get("keep", lambda: None)()
            self._line(trial, "finished")

        def on_trial_error(self, iteration, trials, trial, **info):
            self._line(trial, "failed")

    return Progress()


def _plan(search, before):
    """Ray's search algorithm, ``num_samples`` and space for the trials left after the
    finished ones in ``before`` (a stopped search's own records: nothing of Ray's
    experiment is read back): TPE (bayes) told the finished trials' scores, random
    sampling on a seed of its own, the grid's combinations not yet tried."""
    from ray.tune.search import BasicVariantGenerator, ConcurrencyLimiter

    limit, seed = search["max_concurrent"] or 0, search["seed"]
    params, algo = search["params"], search["algo"]
    left = total_trials(search) - len(before)
    if algo == "exhaustive" and before:  # the combinations not yet tried, in order
        done = [t["params"] for t in before]
        names = [p.name for p in params]
        points = [
            dict(zip(names, values))
            for values in itertools.product(*(p.values for p in params))
            if _plain(dict(zip(names, values))) not in done
        ]
        searcher = BasicVariantGenerator(
            max_concurrent=limit, points_to_evaluate=points
        )
        return searcher, len(points), ray_space(params, "random")
    space = ray_space(params, algo)
    if algo != "bayes":
        if before and seed is not None:  # not the samples the finished trials drew
            seed += len(before)
        searcher = BasicVariantGenerator(max_concurrent=limit, random_state=seed)
        return searcher, 1 if algo == "exhaustive" else left, space
    from recbole_attn.commands.tuning.tpe import InformedTPE

    num_samples = search["num_samples"]
    searcher = InformedTPE(
        metric="valid_score",
        mode=search["mode"],
        # TPE's random start-up trials (the finished ones count): 20 by default, half
        # the budget when smaller
        n_initial_points=min(20, max(1, num_samples // 2)),
        random_state_seed=seed,
        evaluated=[(t["params"], t["best_valid_score"]) for t in before],
    )
    if limit:
        searcher = ConcurrencyLimiter(searcher, max_concurrent=limit)
    return searcher, left, space


def _experiment_name(storage_path):
    """``recbole_attn`` for a new search; a continuation's own new name beside it
    (``recbole_attn.1``, ...): Ray never reads back an earlier experiment's files
    (its ``tuner.pkl`` and the trials' ``params.pkl`` are pickles)."""
    name, n = "recbole_attn", 0
    while os.path.exists(os.path.join(storage_path, name)):
        n += 1
        name = f"recbole_attn.{n}"
    return name


def _search_ray(search, finished=None):
    """The search on Ray Tune; every finished trial's row is appended to ``finished``,
    which holds those of a stopped search this one continues: a new experiment of the
    trials left, planned from those rows (:func:`_plan`), never Ray's ``Tuner.restore``
    (which unpickles the folder's ``tuner.pkl``). Ray Tune's own stop is a
    ``KeyboardInterrupt``."""
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler

    finished = [] if finished is None else finished
    before = list(finished)
    searcher, num_samples, space = _plan(search, before)
    if num_samples < 1:  # every trial had finished: select and test
        return before
    trainable = tune.with_resources(
        tune.with_parameters(
            ray_trial,
            model=search["model"],
            dataset=search["dataset"],
            config_file_list=search["files"],
            config_dict=search["overrides"],
            threads=search["cpus_per_trial"],
        ),
        {"cpu": search["cpus_per_trial"], "gpu": search["gpus_per_trial"]},
    )
    progress = _progress_callback(search, finished)
    scheduler = FIFOScheduler()
    if search["scheduler"] == "asha":
        scheduler = ASHAScheduler(
            max_t=search["epochs"], grace_period=search.get("grace_period", 1)
        )
    tuner = tune.Tuner(
        trainable,
        param_space=space,
        tune_config=tune.TuneConfig(
            metric="valid_score",
            mode=search["mode"],
            num_samples=num_samples,
            scheduler=scheduler,
            search_alg=searcher,
        ),
        run_config=tune.RunConfig(
            storage_path=search["storage_path"],
            name=_experiment_name(search["storage_path"]),
            verbose=0,
            callbacks=[progress],
        ),
    )
    left = total_trials(search) - len(before)
    return before + _results(tuner.fit(), search, finished, left)


def _results(grid, search, finished, left):
    """The rows of a search's ``left`` trials from Ray's ``ResultGrid``; a
    ``KeyboardInterrupt`` when a trial did not finish (no evaluation reported) or fewer
    than all were made (Ray Tune stopped the search on a Ctrl-C: it makes trials as
    resources free up)."""
    done = {t.get("trial_id") for t in finished} | completed
    analysis = getattr(grid, "_experiment_analysis", None)
    statuses = {t.trial_id: t.status for t in getattr(analysis, "trials", None) or ()}
    unfinished = set(statuses.values()) - {"TERMINATED", "ERROR"}
    if len(grid) < left or unfinished:
        raise KeyboardInterrupt
    names = [p.name for p in search["params"]]
    trials = []
    for result in grid:
        if result.error is not None:
            raise RecboleAttnError(trial_error_line(result.error, result.path))
        if not statuses and (result.metrics or {}).get("trial_id") not in done:
            raise KeyboardInterrupt  # unfinished: Ray Tune was stopped
        history = result.metrics_dataframe
        if history is None or "valid_score" not in history:
            raise KeyboardInterrupt  # stopped before its first evaluation
        scores = history["valid_score"]
        best = scores.max() if search["mode"] == "max" else scores.min()
        ran = int(history["epoch"].max()) + 1
        params = {k: result.config[k] for k in names}
        metrics = result.metrics
        saved, seconds = metrics["saved_model_file"], metrics.get("time_total_s")
        trials.append(_row(params, best, ran, saved, search, seconds))
    return trials
