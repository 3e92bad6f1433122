"""
One trial of a search: train one configuration (:func:`train_trial`, through the pipeline's
``train_and_evaluate``), validate after every evaluation, never touch the test split.
"""

import json
import os
import time

from recbole_attn.files import write_replacing

#: per-trial keys that must be absolute because Ray runs each trial in its own directory
PATH_KEYS = ("data_path", "checkpoint_dir")
#: written by a trial that ran to its end (all epochs or early stopping); a Ray trial
#: without it was stopped by the scheduler
STATUS_FILE = "trial_status.json"


def _absolute(config_dict):
    """``config_dict`` with the paths of :data:`PATH_KEYS` absolute."""
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
    called after every evaluation. Returns the trial's summary (``seconds``: its wall
    time, the data's loading included)."""
    from recbole_attn.engine.quick_start import build, train_and_evaluate

    started = time.monotonic()
    config_dict = {**(config_dict or {}), **_plain(params)}
    config, _, trainer, (train_data, valid_data, _) = build(
        model, dataset, config_file_list, config_dict
    )

    def on_evaluated(epoch_idx, valid_score):
        if report is not None:
            metrics = {k: float(v) for k, v in trainer.last_valid_result.items()}
            best, saved = float(trainer.best_valid_score), trainer.saved_model_file
            report(epoch_idx, float(valid_score), best, metrics, saved)

    try:
        result = train_and_evaluate(
            config,
            trainer,
            train_data,
            valid_data,
            callback=on_evaluated,
            verbose=False,
        )
    finally:  # a trial stopped before its first evaluation leaves no empty file
        trainer.release()
    summary = {
        "best_valid_score": float(result["best_valid_score"]),
        "epochs": result["epochs"],
        "stop_reason": result["stop_reason"],
        "saved_model_file": result["saved_model_file"],
        "seconds": round(time.monotonic() - started, 1),
    }
    # whole or not at all: the search reads it for the trial's stop reason
    status = os.path.join(config["checkpoint_dir"], STATUS_FILE)
    write_replacing(status, lambda f: json.dump(summary, f))
    return summary
