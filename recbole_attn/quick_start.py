"""
recbole_attn.quick_start
########################

Our own thin pipeline (Config -> dataset -> model -> trainer). RecBole's ``run_recbole``,
``objective_function`` and ``load_data_and_model`` look models up by name inside RecBole
and cannot load plugin models; these functions resolve our models first and RecBole's
built-in models otherwise, so that every comparison goes through one pipeline.
"""

import ast
import json
import logging
import os
from logging import getLogger

from recbole.config import Config
from recbole.data import data_preparation
from recbole.utils import get_model, init_logger, init_seed, set_color

import recbole_attn
from recbole_attn.compat import load_checkpoint
from recbole_attn.data.dataset import AttnSequentialDataset, check_training_mode
from recbole_attn.data.hints import converter_hint
from recbole_attn.errors import (  # noqa: F401  (re-exported)
    CategoryFieldError,
    ConfigError,
    DatasetNotFoundError,
    MetricConfigError,
    RecboleAttnError,
    UnknownModelError,
)
from recbole_attn.model import MODELS, AttnSequentialRecommender
from recbole_attn.trainer import AttnTrainer

PROPERTIES_DIR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "properties"
)


def properties_dir():
    """The folder of the shipped yaml defaults (source checkout or installed package)."""
    if os.path.isdir(PROPERTIES_DIR):
        return PROPERTIES_DIR
    from importlib.resources import files

    return str(files("recbole_attn.properties"))


def available_models():
    """Our model names, then RecBole's sequential models."""
    import recbole.model.sequential_recommender as seq

    recbole_models = sorted(
        name
        for name in dir(seq)
        if isinstance(getattr(seq, name), type) and name not in MODELS
    )
    return list(MODELS), recbole_models


def get_model_class(model):
    """Resolve ``model`` (a name or a class) to a model class: ours first, then RecBole's."""
    if isinstance(model, type):
        return model
    if model in MODELS:
        return MODELS[model]
    try:
        return get_model(model)
    # RecBole raises ValueError for an unknown name, after trying to import its optional
    # exlib models (ImportError without lightgbm/xgboost)
    except (ValueError, AttributeError, ImportError):
        ours, theirs = available_models()
        raise UnknownModelError(
            f"unknown model {model!r}. recbole_attn models: {', '.join(ours)}. "
            f"RecBole's sequential models also work, e.g. {', '.join(theirs[:8])} "
            f"(any name from recbole.model)."
        ) from None


def config_files(model_class, dataset, config_file_list=None):
    """overall.yaml, the model's yaml files (those of its base classes first, so that
    DPAtt.yaml adds to PAtt.yaml), the dataset's yaml (if we ship one), then the user's.
    """
    props = properties_dir()
    files = [os.path.join(props, "overall.yaml")]
    names = [("model", cls.__name__) for cls in reversed(model_class.__mro__)]
    for sub, name in names + [("dataset", dataset)]:
        path = os.path.join(props, sub, f"{name}.yaml")
        if os.path.isfile(path):
            files.append(path)
    for path in config_file_list or []:
        if not os.path.isfile(path):
            raise RecboleAttnError(f"config file not found: {path}")
        files.append(path)
    return files


class AttnConfig(Config):
    """RecBole's ``Config`` with two changes:

    * no implicit read of ``sys.argv``: command-line overrides reach it as ``config_dict``
      (``run_recbole_attn.py`` parses them), so that a program importing recbole_attn is
      not configured by its own command line;
    * string values are converted with ``ast.literal_eval`` (numbers, lists, dicts,
      ``True``/``true``...). RecBole 1.2.1 calls ``eval`` inside a function whose local
      variables are named ``key``, ``param`` and ``value``, so ``--refinement=value`` became
      the previous option's value.
    """

    def _load_cmd_line(self):
        return dict()

    def _convert_config_dict(self, config_dict):
        for key, param in config_dict.items():
            if isinstance(param, str):
                config_dict[key] = convert_value(param)
        return config_dict


def convert_value(text):
    """A command-line or config-dict string as the value it spells: a Python literal,
    ``true``/``false`` in any case, else the string itself."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return {"true": True, "false": False}.get(text.strip().lower(), text)


def make_config(model, dataset, config_file_list=None, config_dict=None):
    """The Config of ``model`` on ``dataset``. A model whose class depends on its
    configuration (``implementation(config)``, e.g. AWRSR's backbone) gets the yaml files
    of that class (the backbone's, then its own)."""
    model_class = get_model_class(model)

    def configure(cls):
        # RecBole converts string values ("64", "[5,10]", "True") as on its command line
        return AttnConfig(
            model=model_class,
            dataset=dataset,
            config_file_list=config_files(cls, dataset, config_file_list),
            config_dict=dict(config_dict or {}),
        )

    config = configure(model_class)
    implementation = getattr(model_class, "implementation", None)
    if implementation is not None:
        config = configure(implementation(config))
    return config


def check_dataset_exists(config):
    """Fail early (before RecBole tries to download anything) when the atomic files of
    ``config['dataset']`` are missing."""
    dataset, data_path = config["dataset"], config["data_path"]
    names = [f"{dataset}.inter"]
    if config["benchmark_filename"]:
        names = [f"{dataset}.{part}.inter" for part in config["benchmark_filename"]]
    missing = [n for n in names if not os.path.isfile(os.path.join(data_path, n))]
    if missing:
        raise DatasetNotFoundError(
            f"dataset {dataset!r} not found: no {', '.join(missing)} in "
            f"{os.path.abspath(data_path)}.\nCreate it with:\n  "
            f"{converter_hint(dataset, os.path.dirname(os.path.normpath(data_path)))}\n"
            "or point --data_path to the folder that contains the "
            f"'{dataset}/' directory."
        )


def check_valid_metric(config):
    """``valid_metric`` must be one of the computed metrics, at one of the ``topk`` cutoffs
    (RecBole only finds out after the first epoch, with a KeyError)."""
    valid = config["valid_metric"]
    name, _, cutoff = valid.partition("@")
    metrics = [m.lower() for m in config["metrics"]]
    if name.lower() not in metrics:
        raise MetricConfigError(
            f"valid_metric {valid!r} is not computed: metrics are {config['metrics']}. "
            f"Add {name} to metrics or choose another --valid_metric."
        )
    if cutoff and (not cutoff.isdigit() or int(cutoff) not in config["topk"]):
        raise MetricConfigError(
            f"valid_metric {valid!r} needs the cutoff {cutoff} in topk {config['topk']}. "
            f"Add it to topk or choose another --valid_metric."
        )


def check_model_training_mode(config, model_class=None):
    """``training_mode``, checked against the model: only recbole_attn's models put a loss
    at every position, so any other model (RecBole's SASRec, GRU4Rec, ...) needs
    ``last_position`` (RecBole's prefix samples)."""
    mode = check_training_mode(config)
    if (
        model_class is not None
        and mode == "all_position"
        and not issubclass(model_class, AttnSequentialRecommender)
    ):
        name = model_class.__name__
        raise ConfigError(
            f"{name} is not a recbole_attn model: it trains on RecBole's prefix samples "
            "with a loss at the last position only, so training_mode: all_position would "
            f"silently train it on one sample per user. Use training_mode: last_position "
            f"with {name}, or the all-position SASRec of this package, SASRecAP."
        )
    return mode


def create_dataset(config, model_class=None):
    """Our sequential dataset (training modes) for sequential models; RecBole's otherwise.
    With ``model_class``, checks that the model can train in ``training_mode``."""
    from recbole.data import create_dataset as recbole_create_dataset
    from recbole.utils import ModelType

    check_dataset_exists(config)
    if config["MODEL_TYPE"] == ModelType.SEQUENTIAL:
        check_model_training_mode(config, model_class)
        return AttnSequentialDataset(config)
    return recbole_create_dataset(config)


def build(model, dataset, config_file_list=None, config_dict=None):
    """Config, dataset, dataloaders, model and trainer, as ``run`` uses them."""
    config = make_config(model, dataset, config_file_list, config_dict)
    check_valid_metric(config)
    init_seed(config["seed"], config["reproducibility"])
    init_logger(config)
    logger = getLogger()
    logger.info(config)

    model_class = get_model_class(model)
    data = create_dataset(config, model_class)
    logger.info(data)
    recbole_attn.validate_dataset(config, data)
    train_data, valid_data, test_data = data_preparation(config, data)

    init_seed(config["seed"], config["reproducibility"])
    net = model_class(config, train_data._dataset).to(config["device"])
    logger.info(net)
    trainer = AttnTrainer(config, net)
    return config, net, trainer, (train_data, valid_data, test_data)


def run(
    model,
    dataset,
    config_file_list=None,
    config_dict=None,
    saved=True,
    resume_checkpoint=None,
):
    """Train and test ``model`` on ``dataset``; the result dict of RecBole's ``run_recbole``.

    Args:
        model (str or type): one of ours (``STOSA``, ``SASRecAP``, ...) or any RecBole model.
        dataset (str): dataset name, looked up as ``<data_path>/<dataset>/<dataset>.inter``.
        config_file_list (list of str): extra yaml files, applied after our defaults.
        config_dict (dict): overrides applied last (command-line ``--key=value`` too).
        saved (bool): save the best model and test it (else test the last one).
        resume_checkpoint (str): a ``-last.pth`` (or best-model) checkpoint to continue.

    Returns:
        dict: ``best_valid_score``, ``valid_score_bigger``, ``best_valid_result``,
        ``test_result``.
    """
    config, net, trainer, (train_data, valid_data, test_data) = build(
        model, dataset, config_file_list, config_dict
    )
    resume_checkpoint = resume_checkpoint or config["resume_checkpoint"]
    if resume_checkpoint:
        trainer.resume_checkpoint(resume_checkpoint)
    best_valid_score, best_valid_result = trainer.fit(
        train_data, valid_data, saved=saved, show_progress=config["show_progress"]
    )
    test_result = trainer.evaluate(
        test_data, load_best_model=saved, show_progress=config["show_progress"]
    )
    logger = getLogger()
    logger.info(set_color("best valid ", "yellow") + f": {best_valid_result}")
    logger.info(set_color("test result", "yellow") + f": {test_result}")
    return {
        "best_valid_score": best_valid_score,
        "valid_score_bigger": config["valid_metric_bigger"],
        "best_valid_result": best_valid_result,
        "test_result": test_result,
        "saved_model_file": trainer.saved_model_file if saved else None,
    }


def load_data_and_model(model_file, config_dict=None):
    """Rebuild config, data and model from a checkpoint written by ``run``.

    The checkpoint stores the user-given configuration (yaml files, config dict and
    command line, merged) as JSON text; ``config_dict`` overrides it.

    Returns:
        tuple: ``(config, model, trainer, (train_data, valid_data, test_data))``.
    """
    checkpoint = load_checkpoint(model_file)
    overrides = json.loads(checkpoint["external_config_json"])
    overrides.update(config_dict or {})
    config, net, trainer, data = build(
        checkpoint["model"], checkpoint["dataset"], config_dict=overrides
    )
    net.load_state_dict(checkpoint["state_dict"])
    net.load_other_parameter(checkpoint.get("other_parameter"))
    return config, net, trainer, data


def quiet_logging():
    """Silence RecBole's console output (tests, tuning)."""
    logging.getLogger().setLevel(logging.ERROR)
