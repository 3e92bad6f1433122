"""
recbole_attn.quick_start
########################

Our own thin pipeline (Config -> dataset -> model -> trainer), which ``recbole-attn``
runs: our models first and RecBole's built-in models otherwise, so that every comparison
goes through one pipeline, with every check before the data loads, weights-only
checkpoints and no pickled datasets. RecBole's own ``run_recbole`` and
``load_data_and_model`` run our models too after ``import recbole_attn``
(:mod:`recbole_attn.host`).
"""

import contextlib
import json
import os
from logging import getLogger

from recbole.utils import init_seed, set_color

from recbole_attn import distributed
from recbole_attn.evaluator import validate_dataset
from recbole_attn.checkpoint import CHECKPOINT_FORMAT, data_signature, load_checkpoint
from recbole_attn.compat import check_recbole_version
from recbole_attn.config import (  # noqa: F401  (re-exported: RecBole's quick_start names)
    AttnConfig,
    available_models,
    check_model_training_mode,
    check_valid_metric,
    config_files,
    config_warnings,
    convert_value,
    get_model_class,
    has_categories,
    model_classes,
    known_config_keys,
    make_config,
    properties_dir,
)
from recbole_attn.data.bucketing import bucket_train_dataloader
from recbole_attn.data.categories import check_category_field_loads
from recbole_attn.data.checks import (
    check_atomic_files,
    check_labeled_evaluation,
    check_sequential_order,
    has_label,
)
from recbole_attn.data.dataset import (
    AttnSequentialDataset,
    check_sequential_dataset_class,
    recbole_dataset_class,
)
from recbole_attn.data.hints import converter_hint
from recbole_attn.data.preparation import data_preparation
from recbole_attn.evaluator.collector import check_metrics_category_field_loads
from recbole_attn.files import check_writable_folder
from recbole_attn.errors import (  # noqa: F401  (re-exported)
    CategoryFieldError,
    CheckpointError,
    ConfigError,
    DatasetNotFoundError,
    Interrupted,
    MetricConfigError,
    RecboleAttnError,
    UnknownModelError,
)
from recbole_attn.memory import check_memory
from recbole_attn.logs import (  # noqa: F401  (re-exported)
    DETAIL,
    init_logging,
    log_file_only,
    quiet_logging,
    show_progress,
)
from recbole_attn.sequential.recommender import AttnSequentialRecommender
from recbole_attn.trainer import AttnTrainer
from recbole_attn.threads import set_threads


def check_dataset_exists(config):
    """Fail early (before RecBole tries to download anything) when the atomic files of
    ``config['dataset']`` are missing."""
    dataset, data_path = config["dataset"], config["data_path"]
    names = [f"{dataset}.inter"]
    if config["benchmark_filename"]:
        names = [f"{dataset}.{part}.inter" for part in config["benchmark_filename"]]
    missing = [n for n in names if not os.path.isfile(os.path.join(data_path, n))]
    if missing:
        hint = converter_hint(dataset, os.path.dirname(os.path.normpath(data_path)))
        raise DatasetNotFoundError(
            f"dataset {dataset!r} not found: no {', '.join(missing)} in "
            f"{os.path.abspath(data_path)}; create it with: {hint}; or point "
            f"--data_path to the folder that holds {dataset}/"
        )


def check_before_loading(config, model_class, writes=True):
    """Everything about a run that can be checked before its data loads, so that a bad
    value, a broken file or a folder that cannot be written fails in seconds, not after
    an epoch: the validation metric, the dataset's files (:func:`check_dataset_exists`,
    :func:`~recbole_attn.data.checks.check_atomic_files`), the category field the model
    or the metrics need, and the checkpoint folder."""
    from recbole.utils import ModelType

    check_valid_metric(config)
    check_recbole_negatives(config, model_class)
    check_labeled_evaluation(config)
    check_dataset_exists(config)
    sequential = config["MODEL_TYPE"] == ModelType.SEQUENTIAL
    if sequential:
        check_model_training_mode(config, model_class)
        check_sequential_order(config)
        check_sequential_dataset_class(config, model_class)
    check_atomic_files(config, sequential)
    if any(
        getattr(c, "needs_item_categories", False)
        for c in model_classes(model_class, config)
    ):
        name = model_class.__name__
        check_category_field_loads(
            config, f"{name} needs", "use a model that needs no categories (PAtt)"
        )
    check_metrics_category_field_loads(config)
    if writes:  # a loaded checkpoint writes nothing
        check_writable_folder(config["checkpoint_dir"], "checkpoint_dir")


def check_recbole_negatives(config, model_class):
    """RecBole's own models that train on sampled negatives (pairwise models such as
    BPR, and its sequential models with ``loss_type: BPR``) need RecBole's sampler, which
    our defaults switch off (our models sample inside the model): say how to switch it on
    instead of RecBole's ``KeyError: 'neg_item_id'`` after loading the data. Our models
    train on RecBole's negatives only the way RecBole trains their model files: on its
    prefix samples, with the loss of the model file."""
    from recbole.utils import InputType, ModelType

    sampling = (config["train_neg_sample_args"] or {}).get("distribution", "none")
    name = model_class.__name__
    if issubclass(model_class, AttnSequentialRecommender):
        losses = getattr(model_class, "recbole_loss_types", ())
        sampled = [loss for loss in losses if loss != "CE"]
        if sampling == "none":
            return
        if config["training_mode"] != "last_position" or config["loss_type"] not in (
            sampled
        ):
            raise ConfigError(
                f"train_neg_sample_args: RecBole's sampler draws the negatives {name} "
                "trains on RecBole's way only (training_mode: last_position, loss_type: "
                f"{' or '.join(sampled) or 'none'}); otherwise {name} draws its own "
                "(neg_sample_num): remove train_neg_sample_args"
            )
        return
    pairwise = getattr(model_class, "input_type", None) == InputType.PAIRWISE
    sequential_bpr = (
        config["MODEL_TYPE"] == ModelType.SEQUENTIAL and config["loss_type"] == "BPR"
    )
    if (pairwise or sequential_bpr) and sampling == "none":
        raise ConfigError(
            f"{name} trains on negatives from RecBole's sampler, which "
            "recbole_attn's defaults switch off; set --train_neg_sample_args=\"{"
            "'distribution': 'uniform', 'sample_num': 1}\""
        )
    # point-wise models (context-aware ones, DIN, DIEN, NeuMF, ...) train on labels,
    # which RecBole's sampler makes (1, and 0 for each sampled negative) unless the
    # data has them; Pop and the other traditional models count interactions
    pointwise = getattr(model_class, "input_type", None) == InputType.POINTWISE
    traditional = getattr(model_class, "type", None) == ModelType.TRADITIONAL
    if pointwise and not traditional and sampling == "none" and not has_label(config):
        raise ConfigError(
            f"{model_class.__name__} trains on labelled interactions (1, or 0 for a "
            f"negative), and the data has no {config['LABEL_FIELD']} field while "
            "recbole_attn's defaults switch off RecBole's sampler, which would label "
            "them; set --train_neg_sample_args=\"{'distribution': 'uniform', "
            "'sample_num': 1}\", or load a label field (or --threshold=\"{'rating': "
            '4}")'
        )


def create_dataset(config, model_class=None):
    """Our sequential dataset (training modes) for sequential models; RecBole's dataset
    class otherwise (:func:`~recbole_attn.data.dataset.recbole_dataset_class`), after
    checking that its files exist and (with ``model_class``) that the model can train in
    ``training_mode``. A run (:func:`prepare`) checks both once, before."""
    from recbole.utils import ModelType

    check_dataset_exists(config)
    if config["MODEL_TYPE"] == ModelType.SEQUENTIAL:
        check_model_training_mode(config, model_class)
    return _load_dataset(config, model_class)


def _load_dataset(config, model_class):
    from recbole.utils import ModelType

    if config["MODEL_TYPE"] == ModelType.SEQUENTIAL:
        # a model may train on a dataset class of its own (the research wing's records
        # the held-out items); RecBole's models train on ours
        return getattr(model_class, "dataset_class", AttnSequentialDataset)(config)
    return recbole_dataset_class(config)(config)


def prepare(model, dataset, config_file_list=None, config_dict=None, writes=True):
    """Everything a run settles before its data loads, in this order, each step once and
    every yaml file read once (:func:`~recbole_attn.files.read_once`):

    1. the configuration (:func:`~recbole_attn.config.make_config`): the yaml files
       well-formed, the user's overrides, the common keys' values, the research-wing
       keys, the model's declared options and their rules, its presets, the batch
       grouping and the dataset's saved files;
    2. the run against its inputs (:func:`check_before_loading`): the validation
       metric, the model's negatives, the dataset's files, the training mode, the
       category field, the checkpoint folder (``writes``);
    3. the user's keys that nothing reads (warnings, logged by the caller).

    Returns ``(config, model_class, warnings)``. First of all, the installed RecBole must
    be the release the pipeline was written for (:func:`~recbole_attn.compat.
    check_recbole_version`)."""
    check_recbole_version()
    config = make_config(model, dataset, config_file_list, config_dict)
    model_class = get_model_class(model)
    check_before_loading(config, model_class, writes=writes)
    warnings = config_warnings(config, model_class, config_file_list, config_dict)
    return config, model_class, warnings


def build(model, dataset, config_file_list=None, config_dict=None, verbose=False):
    """Config, model, trainer and dataloaders, as ``run`` uses them. The configuration,
    dataset and model summaries go to the log file (and to the console with
    ``verbose``)."""
    config, net, trainer, _, splits = _build(
        model, dataset, config_file_list, config_dict, verbose
    )
    return config, net, trainer, splits


def _build(
    model, dataset, config_file_list=None, config_dict=None, verbose=False, loaded=False
):
    """:func:`build`'s, and the whole dataset (before its split) before the splits.
    ``loaded``: for a checkpoint that is loaded, not trained: nothing is written (no
    log file, no TensorBoard folder, no model file claimed), so that evaluate and
    recommend work in a read-only folder."""
    config, model_class, warnings = prepare(
        model, dataset, config_file_list, config_dict, writes=not loaded
    )
    threads = set_threads(config)
    init_seed(config["seed"], config["reproducibility"])
    log_file = init_logging(config, verbose, log_file=not loaded)
    logger = getLogger()
    if log_file and not verbose:
        logger.info(
            f"log: {os.path.relpath(log_file)} (configuration, dataset and model "
            "summaries; --verbose prints them here too)"
        )
    for message in warnings:
        logger.warning(message)
    logger.info(threads, extra=DETAIL)
    logger.info(config, extra=DETAIL)

    with log_file_only():
        data = _load_dataset(config, model_class)  # checked by prepare()
        logger.info(data)
        validate_dataset(config, data)
        train_data, valid_data, test_data = data_preparation(config, data)
        train_data = bucket_train_dataloader(config, train_data)

        check_memory(config, data, model_class, training=not loaded)
        init_seed(config["seed"], config["reproducibility"])
        try:
            net = model_class(config, train_data._dataset).to(config["device"])
        except NotImplementedError as err:
            # RecBole's models refuse an option value this way ("Make sure 'loss_type'
            # in ['BPR', 'CE']!")
            raise ConfigError(
                f"{config['model']} cannot be built with these options: {err} "
                f"(RecBole's words); change the option it names"
            ) from None
        logger.info(net)
    trainer = AttnTrainer(config, net, data=data_signature(data), loaded=loaded)
    return config, net, trainer, data, (train_data, valid_data, test_data)


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
    evaluated = []

    def on_evaluated(epoch, valid_score):
        evaluated.append(epoch)
        if callback is not None:
            callback(epoch, valid_score)

    try:
        best_valid_score, best_valid_result = trainer.fit(
            train_data,
            valid_data,
            verbose=verbose,
            saved=saved,
            show_progress=show_progress,
            callback_fn=on_evaluated,
        )
        test_result = None
        if test_data is not None:
            test_result = trainer.evaluate(
                test_data, load_best_model=saved, show_progress=show_progress
            )
    except KeyboardInterrupt:
        epoch = "" if trainer.epoch is None else f" in epoch {trainer.epoch}"
        raise Interrupted(f"interrupted{epoch}; {trainer.saved_state_text()}") from None
    epochs = (evaluated[-1] + 1) if evaluated else trainer.start_epoch
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
    several processes (torch DDP; ``recbole_attn.distributed``); the result is process 0's.

    Returns:
        dict: :func:`train_and_evaluate`'s.
    """
    options, rest = distributed.distributed_options(config_dict)
    if options and "local_rank" not in rest:  # start the processes; each runs this
        metrics = make_config(model, dataset, config_file_list, rest)["metrics"]
        if "f1" in [str(m).lower() for m in metrics]:
            # F1 is the harmonic mean of two dataset-level means: the processes' F1
            # values do not combine into it
            raise ConfigError(
                "F1 cannot be computed over several processes (nproc > 1); train "
                "without F1 in metrics, then evaluate the saved model in one process: "
                "recbole-attn evaluate --model_file=... --metrics=\"[...,'F1']\""
            )
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
    config, net, trainer, dataset, splits = _build(
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
    mode = (config["eval_args"] or {}).get("mode")
    modes = set(mode.values()) if isinstance(mode, dict) else {mode}
    return modes == {"full"}
