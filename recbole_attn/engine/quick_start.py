"""
recbole_attn.engine.quick_start
###############################

Our own thin pipeline (Config -> dataset -> model -> trainer, built by
:mod:`recbole_attn.engine.pipeline`), which ``recbole-attn`` runs, with RecBole's quick_start
names: our models first and RecBole's built-in models otherwise, so that every
comparison goes through one pipeline, with every check before the data loads,
weights-only checkpoints and no pickled datasets. RecBole's own ``run_recbole`` and
``load_data_and_model`` run our models too after ``import recbole_attn``
(:mod:`recbole_attn.host.install`).
"""

import contextlib
import json
from logging import getLogger

from recbole.utils import set_color

from recbole_attn.engine import distributed
from recbole_attn.engine.checkpoint import CHECKPOINT_FORMAT, load_checkpoint
from recbole_attn.data.preparation import eval_modes
from recbole_attn.errors import CheckpointError, ConfigError, Interrupted
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
    """The training loop of every run, search trial and experiment: fit on ``train_data``
    with validation after every evaluation step (early stopping on ``valid_metric``; the
    best model saved when ``saved``), then, given ``test_data``, one test evaluation of
    the best model (of the last one without ``saved``). ``callback(epoch, valid_score)``
    after every evaluation. A Ctrl-C is an :class:`~recbole_attn.errors.Interrupted` that
    says what was saved and how to resume.

    Returns:
        dict: ``best_valid_score``, ``valid_score_bigger``, ``best_valid_result``,
        ``test_result`` (None without ``test_data``), ``saved_model_file`` (None without
        ``saved``), ``epochs`` (the epochs trained, resumed ones included) and
        ``stop_reason``.
    """
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
    except (
        KeyboardInterrupt
    ):  # Ctrl-C, or SIGTERM (recbole_attn.options.arguments.guarded)
        raise Interrupted(trainer.interrupted_text(testing, saved)) from None
    last = trainer.last_evaluated_epoch
    epochs = trainer.start_epoch if last is None else last + 1
    early = epochs < config["epochs"]
    return {
        "best_valid_score": best_valid_score,
        "valid_score_bigger": config["valid_metric_bigger"],
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
    """Train and test ``model`` on ``dataset``; the result dict of RecBole's ``run_recbole``.

    Args:
        model (str or type): one of ours (``STOSA``, ``SASRecAP``, ...) or any RecBole model.
        dataset (str): dataset name, looked up as ``<data_path>/<dataset>/<dataset>.inter``.
        config_file_list (list of str): extra yaml files, applied after our defaults.
        config_dict (dict): overrides applied last (command-line ``--key=value`` too).
        saved (bool): save the best model and test it (else test the last one).
        resume_checkpoint (str): a ``-last.pth`` (or best-model) checkpoint to continue.
        verbose (bool): also print the configuration, dataset and model summaries on the
            console (they always go to the log file).

    ``config_dict`` keys ``nproc``, ``world_size``, ``ip``, ``port``, ``offset`` run it in
    several processes (torch DDP; ``recbole_attn.engine.distributed``); the result is process 0's.

    Returns:
        dict: :func:`train_and_evaluate`'s.
    """
    options, rest = distributed.distributed_options(config_dict)
    if options and "local_rank" not in rest:  # start the processes; each runs this
        # everything that can fail before the data loads fails here, once, as one line
        prepare(model, dataset, config_file_list, rest, processes=options["world_size"])
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
    config, net, trainer, (train_data, valid_data, test_data) = build(
        model, dataset, config_file_list, config_dict, verbose=verbose
    )
    try:
        resume_checkpoint = resume_checkpoint or config["resume_checkpoint"]
        if resume_checkpoint:
            trainer.resume_checkpoint(resume_checkpoint)
        result = train_and_evaluate(
            config,
            trainer,
            train_data,
            valid_data,
            test_data,
            saved=saved,
            show_progress=show_progress(config),
        )
    finally:
        trainer.release()  # the claimed model file, if nothing was saved into it
    logger = getLogger()
    # the CLI prints both; the log file keeps them
    logger.info(
        set_color("best valid ", "yellow") + f": {result['best_valid_result']}",
        extra=DETAIL,
    )
    logger.info(
        set_color("test result", "yellow") + f": {result['test_result']}",
        extra=DETAIL,
    )
    return result


def load_data_and_model(model_file, config_dict=None):
    """Rebuild config, data and model from a checkpoint written by ``run``.

    The checkpoint stores the user-given configuration (yaml files, config dict and
    command line, merged) as JSON text; ``config_dict`` overrides it.

    Returns:
        tuple: ``(config, model, trainer, (train_data, valid_data, test_data))``.
    """
    config, net, trainer, _, splits = load_run(model_file, config_dict)
    return config, net, trainer, splits


#: how a checkpoint's run was trained, not what it is: a loaded checkpoint runs in this
#: process on this machine (its processes, addresses, devices and folders stay behind;
#: ``config_dict`` may set them again)
TRAINING_ENVIRONMENT_KEYS = distributed.DISTRIBUTED_KEYS + (
    "local_rank",
    "gpu_id",
    "use_gpu",
    "device",
    "checkpoint_dir",
    "resume_checkpoint",
    "worker",
    "show_progress",
    "log_wandb",
    "wandb_project",
)


def checkpoint_options(checkpoint, path="the checkpoint"):
    """The user-given configuration a checkpoint's run was trained with, without
    :data:`TRAINING_ENVIRONMENT_KEYS`; a :class:`CheckpointError` when the checkpoint
    does not say (damaged, or not written by recbole_attn)."""
    problem = None
    try:
        options = json.loads(checkpoint["external_config_json"])
    except KeyError:
        problem = "no external_config_json entry"
    except (TypeError, ValueError) as err:
        problem = f"its external_config_json is not JSON: {err}"
    else:
        if not isinstance(options, dict):
            problem = f"its external_config_json is a {type(options).__name__}"
    for key in ("model", "dataset"):
        if problem is None and not isinstance(checkpoint.get(key), str):
            problem = f"no {key} name"
    if problem:
        raise CheckpointError(
            f"checkpoint {path} does not say how its model was trained ({problem}): it "
            "is damaged or was not written by recbole-attn; train the model again"
        )
    return {k: v for k, v in options.items() if k not in TRAINING_ENVIRONMENT_KEYS}


def load_run(model_file, config_dict=None):
    """:func:`load_data_and_model`'s, and the whole dataset before the splits:
    ``(config, model, trainer, dataset, (train_data, valid_data, test_data))``. The
    checkpoint's model and data options come back; how it was trained (processes,
    addresses, devices, folders: :data:`TRAINING_ENVIRONMENT_KEYS`) does not."""
    checkpoint = load_checkpoint(model_file)
    overrides = checkpoint_options(checkpoint, model_file)
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
    # checks the data the checkpoint was trained on; trainer.evaluate(test_data) then
    # reloads this file
    trainer.load_model_file(model_file)
    trainer.use_model_file(model_file)
    # what fit collects from the training data first (RecBole's popularity metrics:
    # item counts; ours: the item categories)
    trainer.eval_collector.data_collect(splits[0])
    return config, net, trainer, dataset, splits


def is_recbole_attn_checkpoint(path):
    """Whether ``path`` is a checkpoint that recbole_attn wrote (weights-only, with its
    format mark), as opposed to one of RecBole's own trainer."""
    try:
        checkpoint = load_checkpoint(path)
    except CheckpointError:
        return False
    return checkpoint.get("format") == CHECKPOINT_FORMAT


def evaluate(model_file, config_dict=None, per_user=False):
    """Validation and test metrics of a saved model (a checkpoint written by ``run``);
    ``config_dict`` changes the evaluation (``metrics``, ``topk``, ``eval_args`` such as
    ``{'mode': 'uni100'}``, ``eval_mask_history``, ``data_path`` if the data moved).
    ``per_user``: also every test user's target rank and metric values (full ranking;
    :mod:`recbole_attn.evaluator.per_user`).

    Returns:
        dict: ``model_file``, ``model``, ``dataset``, ``valid_result``, ``test_result``
        and, with ``per_user``, ``per_user``: ``{"meta", "header", "rows"}``.
    """
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
