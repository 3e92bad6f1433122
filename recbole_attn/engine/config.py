"""A run's configuration: model class, yaml files, :class:`AttnConfig`, early checks."""

import os

import yaml
from recbole.config import Config

from recbole_attn.options import check as config_check
from recbole_attn.engine import distributed
from recbole_attn.data.bucketing import check_grouping
from recbole_attn.data.preparation import check_no_pickles
from recbole_attn.files import read_once, read_yaml
from recbole_attn.errors import ConfigError, MetricConfigError, RecboleAttnError
from recbole_attn.plugin import get_model_class
from recbole_attn.options.declared import declared_options
from recbole_attn.options.values import VALUE_RULES, convert_values

PROPERTIES_DIR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    "properties",
)


def properties_dir():
    if os.path.isdir(PROPERTIES_DIR):
        return PROPERTIES_DIR
    from importlib.resources import files

    return str(files("recbole_attn.properties"))


def model_classes(model_class, options=None):
    """The classes that configure a run of ``model_class`` (AWRSR: its backbone)."""
    hook = getattr(model_class, "yaml_classes", None)
    return list(hook(options or {})) if hook else [model_class]


def checkpoint_defaults(model, options):
    """The values a checkpoint that records no value of an option was trained with:
    its classes' ``checkpoint_defaults`` (options added after the checkpoint was
    written, whose defaults have changed since)."""
    defaults = {}
    for cls in model_classes(get_model_class(model), options):
        defaults.update(getattr(cls, "checkpoint_defaults", {}))
    return defaults


def user_options(config_file_list=None, config_dict=None):
    """The user's options: the yaml files in order, then the overrides."""
    options = {}
    for path in config_file_list or []:
        if os.path.isfile(path):
            options.update(read_yaml(path) or {})
    options.update(convert_values(config_dict or {}))
    return options


def model_yaml_files(model_class, options=None):
    """The shipped yaml files of a run of ``model_class``, base classes' first."""
    names = []
    for cls in model_classes(model_class, options):
        for base in reversed(cls.__mro__):
            if base.__name__ not in names:
                names.append(base.__name__)
    paths = [os.path.join(properties_dir(), "model", f"{n}.yaml") for n in names]
    return [path for path in paths if os.path.isfile(path)]


def config_files(model_class, dataset, config_file_list=None, options=None):
    """overall.yaml, the model's yaml files, the dataset's, then the user's."""
    props = properties_dir()
    files = [os.path.join(props, "overall.yaml")]
    files += model_yaml_files(model_class, options)
    path = os.path.join(props, "dataset", f"{dataset}.yaml")
    if os.path.isfile(path):
        files.append(path)
    return files + list(config_file_list or [])


class AttnConfig(Config):
    """RecBole's ``Config`` that reads no ``sys.argv``, converts strings with
    ``ast.literal_eval`` (RecBole's ``eval`` sees its own locals) and merges ``eval_args``
    entry by entry (RecBole replaces the dict and fills a random split)."""

    #: dict-valued keys whose entries later sources update one by one
    MERGED_KEYS = ("eval_args",)

    def _merge_into(self, merged, source):
        for key, value in (source or {}).items():
            if (
                key in self.MERGED_KEYS
                and isinstance(value, dict)
                and isinstance(merged.get(key), dict)
            ):
                value = {**merged[key], **value}
            merged[key] = value
        return merged

    def _load_config_files(self, file_list):
        merged = dict()
        for path in file_list or []:
            text = read_once(path, "config file")  # checked and read before: once
            self._merge_into(merged, yaml.load(text, Loader=self.yaml_loader))
        return merged

    def _merge_external_config_dict(self):
        merged = self._merge_into(dict(), self.file_config_dict)
        self._merge_into(merged, self.variable_config_dict)
        self.external_config_dict = self._merge_into(merged, self.cmd_config_dict)

    def _load_cmd_line(self):
        return dict()

    def _init_device(self):
        # a process of a multi-process run without CUDA: gloo (RecBole: NCCL only)
        if "local_rank" in self.final_config_dict and distributed.cpu_only(self):
            distributed.init_cpu_process_group(self)
        else:
            super()._init_device()

    def _convert_config_dict(self, config_dict):
        return convert_values(config_dict)


def make_config(model, dataset, config_file_list=None, config_dict=None):
    """The checked Config of ``model`` on ``dataset``, before any data loads."""
    model_class = get_model_class(model)
    # the model's own defaults, then the user's (AWRSR: which backbone's yaml to read)
    own = [
        os.path.join(properties_dir(), "model", f"{cls.__name__}.yaml")
        for cls in reversed(model_class.__mro__)
    ]
    for path in config_file_list or []:
        if not os.path.isfile(path):
            raise RecboleAttnError(f"config file not found: {path}")
    users = user_options(config_file_list, config_dict)  # the user's keys and values
    given = {**user_options(own), **users}
    classes = model_classes(model_class, given)  # the run's, as its yaml files are
    files = config_files(model_class, dataset, config_file_list, given)
    parsed = set(own) | set(config_file_list or [])  # read above
    for path in files:  # the others well-formed too before RecBole reads them
        if path not in parsed:
            read_yaml(path)
    # the user's overrides first, in our words (RecBole rejects some in its own)
    config_check.check_options(user_options(config_dict=config_dict), VALUE_RULES)
    try:
        # RecBole converts string values ("64", "[5,10]", "True") as on its command line
        config = AttnConfig(
            model=model_class,
            dataset=dataset,
            config_file_list=files,
            config_dict=dict(config_dict or {}),
        )
    except NotImplementedError as err:
        # RecBole: an unknown metric name, or metrics its evaluation cannot compute
        from recbole.evaluator import metric_types

        known = f"Known metrics: {', '.join(sorted(metric_types))} (any case)"
        unknown = "no metric named" in str(err)
        raise MetricConfigError(
            f"{err}. {known}" if unknown else f"{err} (RecBole's words)"
        ) from None
    except RecboleAttnError:
        raise
    except ValueError as err:  # RecBole's own checks of topk, eval_args, ...
        raise ConfigError(str(err)) from None
    # what the run is made of, settled once (the checks and warnings below read it)
    use_own_ml100k(config, users)
    config.run_classes = classes
    config.shipped_files = files[: len(files) - len(config_file_list or [])]
    config.given_keys = set(users)
    config.declared = declared_of(config.run_classes)
    config_check.check_values(config)
    config_check.check_research_wing_keys(config, set(config.declared))
    config_check.check_model_options(config, config.run_classes, config.declared)
    check_grouping(config)
    check_no_pickles(config)
    config.warnings = config_check.unknown_key_warnings(config, properties_dir())
    return config


def use_own_ml100k(config, users):
    """The user's ``data_path``/ml-100k folder instead of RecBole's bundled copy."""
    if config["dataset"] != "ml-100k" or not isinstance(users.get("data_path"), str):
        return
    own = os.path.join(users["data_path"], "ml-100k")
    if os.path.isdir(own):
        config["data_path"] = own


def declared_of(classes):
    """key -> declared :class:`Opt` of every option of ``classes``."""
    return {k: opt for cls in classes for k, opt in declared_options(cls).items()}


def check_no_research_options(config_file_list=None, config_dict=None):
    """A :class:`ConfigError` for a research-only option among the user's."""
    for path in config_file_list or []:
        read_yaml(path)  # missing, not a file, unreadable or not yaml: said here
    given = user_options(config_file_list, config_dict)
    config_check.check_research_wing_keys(given, set())
