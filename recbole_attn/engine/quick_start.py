"""RecBole's quick_start names (``run``, ``load_data_and_model``...) on our pipeline."""

import contextlib
from logging import getLogger

from recbole.utils import set_color

from recbole_attn.engine import distributed
from recbole_attn.engine.checkpoint import checkpoint_options, load_checkpoint
from recbole_attn.engine.config import checkpoint_defaults
from recbole_attn.data.preparation import eval_modes
from recbole_attn.errors import ConfigError, Interrupted
from recbole_attn.engine.logs import DETAIL, show_progress
from recbole_attn.engine.pipeline import (  # noqa: F401  (create_dataset: re-exported)
    build,
    build_run,
    create_dataset,
    prepare,
)


def train_and_evaluate(
    config,
    trainer,
    train_data,
    valid_data,
    test_data=None,
    saved=True,
    show_progress=False,
    callback=None,
    verbose=True,
):
    """Fit with early stopping, then test the best model; a Ctrl-C is an
    :class:`Interrupted` saying how to resume. The result dict of ``run``."""
    testing = False
    try:
        best_valid_score, best_valid_result = trainer.fit(
            train_data,
            valid_data,
            verbose=verbose,
            saved=saved,
            show_progress=show_progress,
            callback_fn=callback,
        )
        test_result = None
        testing = True
        if test_data is not None:
            test_result = trainer.evaluate(
                test_data, load_best_model=saved, show_progress=show_progress
            )
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (options.arguments.guarded)
        raise Interrupted(trainer.interrupted_text(testing, saved)) from None
    last = trainer.last_evaluated_epoch
    epochs = trainer.start_epoch if last is None else last + 1
    early = epochs < config["epochs"]
    return {
        "best_valid_score": best_valid_score,
        "valid_score_bigger": config["valid_metric_bigger"],
        "valid_metric": config["valid_metric"].lower(),
        "best_valid_result": best_valid_result,
        "test_result": test_result,
        "saved_model_file": trainer.saved_model_file if saved else None,
        "epochs": epochs,
        "stop_reason": (
            f"early stopping (stopping_step {config['stopping_step']})"
            if early
            else "all epochs"
        ),
    }


def run(
    model,
    dataset,
    config_file_list=None,
    config_dict=None,
    saved=True,
    resume_checkpoint=None,
    verbose=False,
):
    """Train and test ``model`` on ``dataset`` (``nproc``, ``world_size``, ... in
    ``config_dict``: several processes); :func:`train_and_evaluate`'s result."""
    options, rest = distributed.distributed_options(config_dict)
    if options and "local_rank" not in rest:  # start the processes; each runs this
        # everything that can fail before the data loads fails here, once, as one line
        config = prepare(
            model, dataset, config_file_list, rest, processes=options["world_size"]
        )
        distributed.check_capacity(config, options["nproc"])
        return distributed.spawn(
            run,
            model,
            dataset,
            options,
            rest,
            config_file_list=config_file_list,
            saved=saved,
            resume_checkpoint=resume_checkpoint,
            verbose=verbose,
        )
    resume_checkpoint = resume_checkpoint or (config_dict or {}).get(
        "resume_checkpoint"
    )
    if resume_checkpoint:
        load_checkpoint(resume_checkpoint)  # readable? (before loading the data)
    config, _, trainer, splits = build(
        model, dataset, config_file_list, config_dict, verbose=verbose
    )
    try:
        if resume_checkpoint := resume_checkpoint or config["resume_checkpoint"]:
            trainer.resume_checkpoint(resume_checkpoint)
        result = train_and_evaluate(
            config, trainer, *splits, saved=saved, show_progress=show_progress(config)
        )
    finally:
        trainer.release()  # the claimed model file, if nothing was saved into it
    # the CLI prints both; the log file keeps them
    for label, key in (
        ("best valid ", "best_valid_result"),
        ("test result", "test_result"),
    ):
        getLogger().info(set_color(label, "yellow") + f": {result[key]}", extra=DETAIL)
    return result


def load_data_and_model(model_file, config_dict=None):
    """``(config, model, trainer, splits)`` rebuilt from a checkpoint."""
    config, net, trainer, _, splits = load_run(model_file, config_dict)
    return config, net, trainer, splits


def load_run(model_file, config_dict=None):
    """:func:`load_data_and_model`'s, with the whole dataset before the splits."""
    checkpoint = load_checkpoint(model_file)
    overrides = checkpoint_options(checkpoint, model_file)
    overrides = {**checkpoint_defaults(checkpoint["model"], overrides), **overrides}
    for key in ("model", "dataset"):
        given = (config_dict or {}).get(key)
        if given is not None and str(given) != checkpoint[key]:
            raise ConfigError(
                f"the checkpoint {model_file} holds {checkpoint['model']} trained on "
                f"{checkpoint['dataset']!r}; a loaded model keeps its {key} (got "
                f"--{key}={given}). For the same dataset in another folder pass "
                "--data_path=...; for another model give its --model_file"
            )
    overrides.update(config_dict or {})
    config, net, trainer, dataset, splits = build_run(
        checkpoint["model"], checkpoint["dataset"], config_dict=overrides, loaded=True
    )
    # checks the checkpoint's data; trainer.evaluate(test_data) reloads this file
    trainer.load_model_file(model_file)
    trainer.use_model_file(model_file)
    # what fit collects from the training data first (item counts, categories)
    trainer.eval_collector.data_collect(splits[0])
    return config, net, trainer, dataset, splits


def evaluate(model_file, config_dict=None, per_user=False):
    """Validation and test metrics (``per_user``: each test user's) of a saved model."""
    from recbole_attn.evaluator.per_user import PerUserRecorder

    config, _, trainer, (_, valid_data, test_data) = load_data_and_model(
        model_file, config_dict
    )
    if per_user and not is_full_ranking(config):
        raise ConfigError(
            "per-user results rank the target among all items: use full ranking "
            "(--eval_args=\"{'mode': 'full'}\")"
        )
    progress = show_progress(config)
    valid = trainer.evaluate(valid_data, model_file=model_file, show_progress=progress)
    recorder = PerUserRecorder(trainer)
    with recorder.recording() if per_user else contextlib.nullcontext():
        test = trainer.evaluate(
            test_data, model_file=model_file, show_progress=progress
        )
    result = {
        "model_file": str(model_file),
        "model": config["model"],
        "dataset": config["dataset"],
        "valid_result": {k: float(v) for k, v in valid.items()},
        "test_result": {k: float(v) for k, v in test.items()},
    }
    if per_user:
        header, rows = recorder.rows(test_data._dataset)
        result["per_user"] = {
            "meta": {
                "model": config["model"],
                "dataset": config["dataset"],
                "data": trainer.data_signature,
                "split": "test",
                "eval_mask_history": bool(config["eval_mask_history"]),
                "metric_decimal_place": config["metric_decimal_place"],
                "model_file": str(model_file),
            },
            "header": header,
            "rows": rows,
        }
    return result


def is_full_ranking(config):
    return eval_modes(config) == {"full"}
