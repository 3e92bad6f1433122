"""
recbole_attn.commands.tuning.hyperopt_search
############################################

The search in this process with RecBole's own ``HyperTuning`` (hyperopt; no Ray, one trial
after the other); ``exhaustive`` walks the grid itself (RecBole's exhaustive search hands
hyperopt >= 0.2.7 an old ``RandomState``).
"""

import itertools
import os
import sys

from recbole_attn.commands.tuning.space import grid_size, hyperopt_space
from recbole_attn.commands.tuning.trial import _plain, train_trial


def _search_hyperopt(
    params, algo, model, dataset, files, overrides, options, echo, trials=None
):
    """In-process search with RecBole's ``HyperTuning`` (hyperopt; no Ray). ``trials``:
    the list every finished trial is appended to, holding those of a stopped search
    this one continues (``exhaustive`` skips their combinations, ``random`` and
    ``bayes`` run the samples left)."""
    from recbole.trainer import HyperTuning

    trials = [] if trials is None else trials
    done = [t["params"] for t in trials]
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
            sampled = dict(zip((p.name for p in params), values))
            if _plain(sampled) not in done:
                objective(sampled, None)
        return trials
    left = options["num_samples"] - len(trials)
    if left <= 0:
        return trials
    tuner = HyperTuning(
        objective,
        space=hyperopt_space(params),
        algo=algo,
        max_evals=left,
        # RecBole stops after 10 trials without progress; run the budget the user asked
        early_stop=max(10, left),
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
