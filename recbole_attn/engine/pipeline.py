"""The set-up of one run: configuration, checks before loading, data, model, trainer."""

import os
from logging import getLogger

from recbole.utils import init_seed

from recbole_attn.engine import allocator, check_recbole_version, distributed
from recbole_attn.engine.checkpoint import data_signature
from recbole_attn.engine.config import make_config
from recbole_attn.data.bucketing import bucket_train_dataloader
from recbole_attn.data.checks import check_dataset_exists, check_dataset_files
from recbole_attn.data.fields import check_loaded_categories
from recbole_attn.data.dataset import (
    check_recbole_negatives,
    check_sequential_model,
    load_dataset,
)
from recbole_attn.data.preparation import data_preparation
from recbole_attn.errors import ConfigError, MetricConfigError, RecboleAttnError
from recbole_attn.evaluator import check_metric_options
from recbole_attn.engine.defaults import differences_line
from recbole_attn.files import check_writable_folder
from recbole_attn.engine.logs import DETAIL, init_logging, console_off
from recbole_attn.engine.memory import check_memory
from recbole_attn.engine.threads import set_threads
from recbole_attn.engine.trainer import AttnTrainer, LoadedTrainer


def check_valid_metric(config):
    """``valid_metric`` must be computed, at a ``topk`` cutoff for a top-K metric."""
    from recbole.evaluator.register import metric_types
    from recbole.utils import EvaluatorType

    valid = str(config["valid_metric"])
    name, _, cutoff = valid.partition("@")
    metrics = [m.lower() for m in config["metrics"]]
    if name.lower() not in metrics:
        raise MetricConfigError(
            f"valid_metric {valid!r} is not computed: metrics are {config['metrics']}. "
            f"Add {name} to metrics or choose another --valid_metric."
        )
    if not cutoff and metric_types.get(name.lower()) == EvaluatorType.RANKING:
        raise MetricConfigError(
            f"valid_metric {valid!r} needs a cutoff of topk {config['topk']}, e.g. "
            f"--valid_metric={name}@{config['topk'][-1]}"
        )
    if cutoff and (not cutoff.isdigit() or int(cutoff) not in config["topk"]):
        raise MetricConfigError(
            f"valid_metric {valid!r} needs the cutoff {cutoff} in topk {config['topk']}. "
            f"Add it to topk or choose another --valid_metric."
        )


def check_before_loading(config, writes=True, processes=1):
    """Everything about a run that can be checked before its data loads."""
    from recbole.utils import ModelType

    model_class = config.model_class
    if processes > 1 and "f1" in [str(m).lower() for m in config["metrics"]]:
        # F1 is a harmonic mean of dataset-level means: per-process values do not combine
        raise ConfigError(
            "F1 cannot be computed over several processes (nproc > 1); train "
            "without F1 in metrics, then evaluate the saved model in one process: "
            "recbole-attn evaluate --model_file=... --metrics=\"[...,'F1']\""
        )
    check_valid_metric(config)
    metrics_need = check_metric_options(config)  # do they need categories?
    needs_categories = []  # (who needs them, what to do instead)
    if any(getattr(c, "needs_item_categories", False) for c in config.run_classes):
        needs_categories.append(
            (
                f"{model_class.__name__} needs",
                "use a model that needs no categories (PAtt)",
            )
        )
    if metrics_need:
        needs_categories.append(metrics_need)
    sequential = config["MODEL_TYPE"] == ModelType.SEQUENTIAL
    if sequential:
        check_sequential_model(config, model_class)
    check_recbole_negatives(config, model_class)
    check_dataset_files(config, sequential, needs_categories)
    if writes:  # a loaded checkpoint writes nothing
        check_writable_folder(config["checkpoint_dir"], "checkpoint_dir")
        check_tensorboard_folder()


#: where RecBole's Trainer writes its TensorBoard events: in the folder the run starts in
TENSORBOARD = "log_tensorboard"


def check_tensorboard_folder(path=TENSORBOARD):
    """RecBole's Trainer can write into ``path``, or a :class:`ConfigError` (it was
    RecBole's traceback when the run had trained nothing yet)."""
    where = os.path.abspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise ConfigError(
            f"{where} is a file; RecBole's trainer writes its TensorBoard logs into a "
            "folder of that name where the run starts: move the file, or start the run "
            "in another folder"
        )
    try:  # the folder, or where the trainer makes it (made by it, not here)
        check_writable_folder(
            where if os.path.isdir(where) else os.path.dirname(where), TENSORBOARD
        )
    except RecboleAttnError:
        raise ConfigError(
            f"cannot write into {where}, where RecBole's trainer writes its "
            "TensorBoard logs: make it writable, or start the run in another folder"
        ) from None


def create_dataset(config, model_class=None):
    """Our dataset for sequential models, RecBole's otherwise, after its checks."""
    from recbole.utils import ModelType

    check_dataset_exists(config)
    if config["MODEL_TYPE"] == ModelType.SEQUENTIAL:
        check_sequential_model(config, model_class)
    return load_dataset(config, model_class)


def prepare(
    model, dataset, config_file_list=None, config_dict=None, writes=True, processes=1
):
    """The checked configuration of a run (on RecBole's one release)."""
    check_recbole_version()
    config = make_config(model, dataset, config_file_list, config_dict)
    if not distributed.SPAWNED:  # else checked once, before
        check_before_loading(config, writes=writes, processes=processes)
    return config


def build(model, dataset, config_file_list=None, config_dict=None, verbose=False):
    config, net, trainer, _, splits = build_run(
        model, dataset, config_file_list, config_dict, verbose
    )
    return config, net, trainer, splits


def build_run(
    model, dataset, config_file_list=None, config_dict=None, verbose=False, loaded=False
):
    """:func:`build`'s and the dataset; ``loaded``: a checkpoint's, writing nothing."""
    config = prepare(model, dataset, config_file_list, config_dict, writes=not loaded)
    model_class = config.model_class
    init_seed(config["seed"], config["reproducibility"])
    log_file = init_logging(config, verbose, log_file=not loaded)
    logger = getLogger()
    if log_file and not verbose:
        logger.info(
            f"log: {os.path.relpath(log_file)} (configuration, dataset and model "
            "summaries; --verbose prints them here too)"
        )
    for message in config.warnings:
        logger.warning(message)
    if recbole_differs := differences_line(config):  # the same model name in RecBole
        logger.info(recbole_differs)
    for line in (set_threads(config), allocator.described()):  # the machine's use
        logger.info(line, extra=DETAIL)
    logger.info(config, extra=DETAIL)

    with console_off("quiet"):
        data = load_dataset(config, model_class)  # checked by prepare()
        logger.info(data)
        check_loaded_categories(config, data)
        train_data, valid_data, test_data = data_preparation(config, data)
        train_data = bucket_train_dataloader(config, train_data)

        check_memory(config, data, model_class, training=not loaded)
        init_seed(config["seed"], config["reproducibility"])
        try:
            net = model_class(config, train_data._dataset).to(config["device"])
        except NotImplementedError as err:
            # RecBole's models refuse an option value this way
            raise ConfigError(
                f"{config['model']} cannot be built with these options: {err} "
                f"(RecBole's words); change the option it names"
            ) from None
        logger.info(net)
    # a loaded checkpoint's trainer evaluates it: writes nothing, trains nothing
    trainer = (LoadedTrainer if loaded else AttnTrainer)(
        config, net, data_signature(data)
    )
    return config, net, trainer, data, (train_data, valid_data, test_data)
