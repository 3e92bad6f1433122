"""
The search in this process with RecBole's own ``HyperTuning`` (hyperopt; no Ray, one trial
after the other); ``exhaustive`` walks the grid itself (RecBole's exhaustive search hands
hyperopt >= 0.2.7 an old ``RandomState``).
"""

import contextlib
import io
import itertools
import os
import sys

from recbole_attn.commands.tuning.space import hyperopt_space, total_trials
from recbole_attn.commands.tuning.trial import _plain, train_trial


def _search_hyperopt(search, trials=None):
    """In-process search with RecBole's ``HyperTuning``; each finished trial is appended
    to ``trials``, which holds those of a stopped search this one continues
    (``exhaustive`` skips their combinations, ``random`` and ``bayes`` run the rest)."""
    trials = [] if trials is None else trials
    objective = _objective(search, trials)
    params = search["params"]
    if search["algo"] == "exhaustive":
        # every combination of the choice values once, in order
        done = [t["params"] for t in trials]
        for values in itertools.product(*(p.values for p in params)):
            sampled = dict(zip((p.name for p in params), values))
            if _plain(sampled) not in done:
                objective(sampled, None)
        return trials
    left = search["num_samples"] - len(trials)
    if left > 0:
        _run_hyperopt(search, objective, left)
    return trials


def _objective(search, trials):
    """RecBole's objective function: one trial, its row appended to ``trials`` and its
    progress line; no test evaluation."""
    total = total_trials(search)
    overrides = search["overrides"]
    base = overrides.get("checkpoint_dir") or os.path.join(os.getcwd(), "saved")
    echo, stream = search["echo"], sys.stdout  # RecBole's prints are silenced, not ours
    if echo is print:
        echo = lambda line: print(line, file=stream, flush=True)  # noqa: E731
    model, dataset, files = search["model"], search["dataset"], search["files"]

    def objective(sampled, _fixed_files):
        """Train the ``sampled`` configuration; its validation result for hyperopt."""
        trial_overrides = dict(overrides)
        trial_overrides["checkpoint_dir"] = os.path.join(base, f"trial_{len(trials)}")
        summary = train_trial(sampled, model, dataset, files, trial_overrides)
        trials.append({"params": _plain(sampled), **summary})
        search.get("keep", lambda: None)()  # kept even if the search is then killed
        echo(
            f"[{len(trials)}/{total}] trial {len(trials)} {_plain(sampled)}: best valid "
            f"{summary['best_valid_score']:.4f} after {summary['epochs']} epoch(s) "
            f"({summary['stop_reason']})"
        )
        return {
            "model": model if isinstance(model, str) else model.__name__,
            "best_valid_score": summary["best_valid_score"],
            "valid_score_bigger": search["mode"] == "max",
            "best_valid_result": None,
            "test_result": None,  # the test split is evaluated once, for the best only
        }

    return objective


def _run_hyperopt(search, objective, left):
    """``left`` trials of hyperopt's ``random`` or ``bayes`` (TPE), seeded by the
    search's seed (``HYPEROPT_FMIN_SEED``: RecBole passes no ``rstate``)."""
    from recbole.trainer import HyperTuning

    tuner = HyperTuning(
        objective,
        space=hyperopt_space(search["params"]),
        algo=search["algo"],
        max_evals=left,
        # RecBole stops after 10 trials without progress; run the budget the user asked
        early_stop=max(10, left),
    )
    seed_before = os.environ.get("HYPEROPT_FMIN_SEED")
    if search["seed"] is not None:
        os.environ["HYPEROPT_FMIN_SEED"] = str(search["seed"])
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # RecBole prints each trial
            tuner.run()
    finally:
        if seed_before is None:
            os.environ.pop("HYPEROPT_FMIN_SEED", None)
        else:
            os.environ["HYPEROPT_FMIN_SEED"] = seed_before
