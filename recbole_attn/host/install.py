"""What ``import recbole_attn`` changes in RecBole (docs/environment.md): the stack fixes,
and RecBole's API answering to our models, metrics and checkpoints."""

import functools
import os
import sys
import warnings

from recbole_attn.host import compat, pandas3, recbole_bugs
from recbole_attn.engine import RECBOLE_VERSION

#: the keys of a model's yaml that stay RecBole's and the user's in RecBole's API
#: (a model's ``valid_metric: MRR@20`` breaks RecBole's default ``topk: [10]``)
EVALUATION_KEYS = tuple(
    "valid_metric metrics topk eval_args valid_metric_bigger".split()
)
#: the keys of our overall.yaml that stay RecBole's in RecBole's API: what a dataset
#: loads (RecBole's dataset yaml decides); every other key of it (training: batch size,
#: epochs, threads, ...) is recbole-attn's, so that RecBole's API trains as the command
DATA_KEYS = ("load_col", "rm_dup_inter", "category_field")
#: the keys whose values RecBole's API and recbole-attn may differ in (said in a warning)
KEPT_KEYS = EVALUATION_KEYS + DATA_KEYS

_INSTALLED = []  # the names of the changes applied, in order (see installed())
_INSTALLING = []
_WARNED = set()


def installed():
    return list(_INSTALLED)


def _apply(name, condition, patch):
    if name in _INSTALLED or not condition:
        return
    patch()
    _INSTALLED.append(name)


def install():
    """Apply every change the installed stack needs (idempotent)."""
    if _INSTALLING:
        return  # importing RecBole below ran the import hook
    _INSTALLING.append(True)
    try:
        _install()
    finally:
        _INSTALLING.clear()


def _install():
    import recbole

    compat.silence_harmless_recbole_warnings()  # first: importing RecBole's models
    compat.undo_recbole_anomaly_detection()
    fixes = recbole.__version__ == RECBOLE_VERSION
    if not fixes and "version" not in _WARNED:
        _WARNED.add("version")
        warnings.warn(
            f"recbole_attn's fixes are for RecBole {RECBOLE_VERSION}, and RecBole "
            f"{recbole.__version__} is installed: they are not applied (RecBole's own API "
            f"may fail on numpy 2, pandas 3 or torch >= 2.6); install "
            f"recbole=={RECBOLE_VERSION}",
            stacklevel=2,
        )
    version = compat.installed_version
    _apply(
        "numpy aliases",
        fixes and version("numpy") >= (2, 0, 0),
        compat.install_numpy_aliases,
    )
    _apply("pandas 3 dataset", fixes and pandas3.PANDAS_3, pandas3.install)
    _apply(
        "checkpoints",
        fixes and compat.recbole_checkpoints_need_fix(),
        compat.install_recbole_checkpoints,
    )
    _apply(
        "exhaustive search",
        fixes and compat.hyperopt_draws_with_generator(),
        compat.install_exhaustive_search,
    )
    _apply(
        "scipy dok_matrix",
        fixes and compat.dok_without_update(),
        compat.install_dok_update,
    )
    _apply("negative sampling", fixes, recbole_bugs.install_negative_sampling)
    _apply("Pop counts", fixes, recbole_bugs.install_pop_counts)
    _apply("collector values", fixes, recbole_bugs.install_collector_values)
    _apply("generator pickling", fixes, recbole_bugs.register_generator_pickling)
    _apply("plugin models", True, _plugin_models)
    _apply("category metrics", True, _category_metrics)
    _apply("quick_start hook", True, _quick_start_hook)


def _ours(name):
    from recbole_attn.plugin import MODELS

    return MODELS.get(name) if isinstance(name, str) else None


def _patch_get_model():
    import recbole.config.configurator as configurator
    import recbole.utils
    import recbole.utils.utils as utils

    recbole_get_model = utils.get_model

    @functools.wraps(recbole_get_model)
    def get_model(model_name):
        ours = _ours(model_name)
        try:
            theirs = recbole_get_model(model_name)
        # an unknown name (ImportError: RecBole's exlib models without their packages)
        except (ValueError, ImportError, AttributeError):
            if ours is None:
                raise
            return ours
        if ours is not None and theirs is not ours and model_name not in _WARNED:
            _WARNED.add(model_name)
            warnings.warn(
                f"RecBole has a model named {model_name} of its own "
                f"({theirs.__module__}); RecBole's API (run_recbole, Config, ...) runs "
                f"RecBole's. recbole_attn's {model_name} runs with `recbole-attn "
                f"--model={model_name}` or recbole_attn.engine.quick_start.run.",
                stacklevel=2,
            )
        return theirs

    recbole_get_trainer = utils.get_trainer

    @functools.wraps(recbole_get_trainer)
    def get_trainer(model_type, model_name):
        if _ours(model_name) is not None and get_model(model_name) is _ours(model_name):
            from recbole_attn.engine.trainer import AttnTrainer

            return AttnTrainer
        return recbole_get_trainer(model_type, model_name)

    for module in (utils, recbole.utils, configurator):
        module.get_model = get_model
    for module in (utils, recbole.utils):
        module.get_trainer = get_trainer
    return get_model, get_trainer


def _load_plugin_defaults(config):
    """Our model's defaults in RecBole's ``Config``, without :data:`EVALUATION_KEYS`."""
    import yaml

    from recbole_attn.engine.config import model_yaml_files, properties_dir

    def read(paths):
        values = {}
        for path in paths:
            with open(path, encoding="utf-8") as f:
                values.update(yaml.load(f, Loader=config.yaml_loader) or {})
        return values

    internal = config.internal_config_dict
    for key, value in read([os.path.join(properties_dir(), "overall.yaml")]).items():
        # RecBole's overall.yaml has train_batch_size 2048 (ours 256): ours, to train
        # as the command does; a key only we have (category_field) is ours too
        if key not in KEPT_KEYS or key not in internal:
            internal[key] = value
    internal["train_neg_sample_args"] = None
    # the model's own yaml and the user's options choose the files (AWRSR: its backbone's)
    options = {
        **read(model_yaml_files(config.model_class)),
        **config.external_config_dict,
    }
    values = read(model_yaml_files(config.model_class, options))
    internal.update({k: v for k, v in values.items() if k not in EVALUATION_KEYS})


def _plugin_models():
    # our modules are imported when RecBole's functions run: install() may run while
    # one of them is being imported
    from recbole.config import Config

    _patch_get_model()
    load_internal = Config._load_internal_config_dict
    init = Config.__init__

    def ours(config):
        from recbole_attn.engine.config import AttnConfig

        model_class = getattr(config, "model_class", None)
        return _ours(config.model) is model_class and not isinstance(config, AttnConfig)

    @functools.wraps(load_internal)
    def _load_internal_config_dict(self, model, model_class, dataset):
        load_internal(self, model, model_class, dataset)
        if ours(self):
            _load_plugin_defaults(self)

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        from recbole_attn.evaluator import register_metrics

        register_metrics()  # before RecBole checks the metric names
        init(self, *args, **kwargs)
        if ours(self):
            _configure_plugin_model(self)

    Config._load_internal_config_dict = _load_internal_config_dict
    Config.__init__ = __init__


def _configure_plugin_model(config):
    """Our model's options checked, its dataset class where RecBole looks."""
    import recbole.data.dataset as recbole_datasets

    from recbole_attn.options import check as config_check
    from recbole_attn.engine.config import declared_of, model_classes
    from recbole_attn.data.dataset import AttnSequentialDataset

    classes = model_classes(config.model_class, config)
    config_check.check_model_options(config, classes, declared_of(classes))
    name = f"{config.model}Dataset"
    if getattr(recbole_datasets, name, AttnSequentialDataset) is AttnSequentialDataset:
        setattr(recbole_datasets, name, AttnSequentialDataset)
    note = command_differences(config)
    if note and note not in _WARNED:
        _WARNED.add(note)
        warnings.warn(note, stacklevel=3)


def command_differences(config):
    """The warning naming the evaluation and data settings in which RecBole's ``Config``
    of our model differs from ``recbole-attn``'s run of the same options; or None (the
    training settings are the same: :func:`_load_plugin_defaults`)."""
    from recbole_attn.engine.config import make_config
    from recbole_attn.errors import RecboleAttnError

    given = dict(config.external_config_dict)
    try:
        command = make_config(config.model, config.dataset, config_dict=given)
    except RecboleAttnError:  # what the command refuses, it has no results to differ
        return None
    differ = [
        key for key in KEPT_KEYS if key not in given and command[key] != config[key]
    ]
    if not differ:
        return None
    return (
        f"{config.model} on {config.dataset} through RecBole's API trains as "
        f"`recbole-attn --model={config.model}` does, but evaluates and loads data as "
        "RecBole does: "
        + ", ".join(f"{k} {config[k]!r} (recbole-attn: {command[k]!r})" for k in differ)
        + "; give them in config_dict for recbole-attn's results"
    )


def _category_metrics():
    from recbole.evaluator.collector import Collector

    data_collect = Collector.data_collect

    @functools.wraps(data_collect)
    def data_collect_(self, train_data):
        from recbole_attn.data.fields import missing_field_hint
        from recbole_attn.evaluator import collect_item_categories

        data_collect(self, train_data)
        collect_item_categories(self, train_data, hint=missing_field_hint)

    Collector.data_collect = data_collect_


def load_data_and_model(model_file):
    """RecBole's ``load_data_and_model`` that also loads recbole_attn checkpoints."""
    from recbole_attn.engine.checkpoint import is_recbole_attn_checkpoint
    from recbole_attn.engine.quick_start import load_run

    if is_recbole_attn_checkpoint(model_file):
        config, model, _, dataset, (train, valid, test) = load_run(model_file)
        return config, model, dataset, train, valid, test
    if "checkpoints" not in _INSTALLED:
        return _RECBOLE["load_data_and_model"](model_file)
    with compat.loading_recbole_checkpoint(model_file):
        return _RECBOLE["load_data_and_model"](model_file)


_RECBOLE = {}


def _patch_quick_start(module):
    """``recbole.quick_start`` with our ``get_model``, Ray's ``report``, our loading."""
    import recbole.utils

    module.get_model = recbole.utils.get_model
    module.get_trainer = recbole.utils.get_trainer
    if hasattr(module, "tune") and compat.installed_version("ray") >= (2, 7, 0):
        module.tune = compat.Tune(module.tune)
    _RECBOLE.setdefault("load_data_and_model", module.load_data_and_model)
    module.load_data_and_model = load_data_and_model
    package = sys.modules.get("recbole.quick_start")
    if package is not None and hasattr(package, "load_data_and_model"):
        package.load_data_and_model = load_data_and_model


def _quick_start_hook():
    from recbole_attn.host.hooks import after_import

    after_import("recbole.quick_start.quick_start", _patch_quick_start)
