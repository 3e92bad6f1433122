"""
recbole_attn.host
#################

What ``import recbole_attn`` changes in RecBole, and why: the one place where the plugin
reaches into its host (docs/environment.md, "What import recbole_attn changes in
RecBole"). Two kinds of change, each applied once, by :func:`install`:

**Fixes, so that RecBole's own API runs on today's stack** (``run_recbole``, ``Config``,
``create_dataset`` / ``data_preparation``, its trainers, ``load_data_and_model``,
``run_hyper``). Each is for RecBole :data:`RECBOLE_VERSION` and for the release of the
package that broke it, and is applied only there:

* numpy >= 2: ``Config.compatibility_settings`` reads ``np.float_`` & co. (removed in
  numpy 2) to set the aliases RecBole's code reads; it sets them from numpy 2's names
  (:func:`~recbole_attn.compat.set_numpy_aliases`).
* pandas >= 3: ``Dataset._load_feat``, ``_fill_nan``, ``_remap`` and
  ``SequentialDataset._benchmark_presets`` (Copy-on-Write makes their in-place fills
  no-ops, ``Series.agg(len)`` aggregates) are replaced by
  :mod:`recbole_attn.compat`'s, which give pandas 2's results; ``_normalize`` and
  ``_discretization`` refuse ``float_seq`` fields with a clear error.
* torch >= 2.6 (``torch.load`` is weights-only by default): RecBole pickles its ``Config``
  into checkpoints with pickle protocol 4, which the weights-only loader cannot read at
  all, so RecBole's ``evaluate`` after ``fit`` fails for every model. ``Trainer``'s
  checkpoints are written with protocol 2, and ``Trainer.resume_checkpoint``,
  ``Trainer.evaluate`` and ``load_data_and_model`` load them weights-only with exactly
  the classes such a checkpoint holds allowed (:func:`recbole_checkpoint_globals`); a
  file that needs anything else is refused with what it holds. Weights-only loading is
  never switched off.
* Ray >= 2.7: ``objective_function`` (``run_hyper``'s) calls ``tune.report(**result)``,
  which Ray's current API (``tune.report(metrics)``) refuses; it gets a ``tune`` whose
  ``report`` takes both forms.
* hyperopt >= 0.2.7: RecBole's ``exhaustive_search`` (``run_hyper``'s default) hands
  hyperopt a ``RandomState``; hyperopt draws with ``Generator.integers``. The same search
  with a ``Generator`` (every combination once; the order of the trials differs from
  hyperopt 0.2.5's).
* scipy >= 1.12: RecBole's graph models (LightGCN, NGCF, NCL, GCMC, SpectralCF, KGIN,
  MCCLK) fill their adjacency matrix with ``dok_matrix._update``, which scipy removed;
  ``dok_matrix`` gets that bulk insert back.
* RecBole 1.2.1's own bugs a run can reach (docs/environment.md, "RecBole 1.2.1's own
  bugs"): its samplers' endless loops where no negative is left (BERT4Rec's masking,
  ``sample_by_key_ids``) and ``Sampler``'s traceback for a user with every item, each a
  clear error (:func:`~recbole_attn.recbole_bugs.mask_item_neg_sample`,
  :func:`~recbole_attn.recbole_bugs.sample_by_key_ids`); Pop's counts
  (:func:`~recbole_attn.recbole_bugs.pop_calculate_loss`); ``Collector.get_data_struct`` on
  non-tensor values; a ``torch.Generator`` sent to a spawned data-loader worker
  (:func:`~recbole_attn.recbole_bugs.reduce_generator`). RecBole's replaced functions stay
  reachable (:func:`recbole_original`).
* autograd anomaly detection, which RecBole's ``sine.py`` switches on at import (several
  times slower backward, no change of results), is switched off again; a few warnings
  RecBole raises on every run are silenced where RecBole raises them
  (:data:`~recbole_attn.compat.HARMLESS_RECBOLE_WARNINGS`).

**Not installed into RecBole**: recbole_attn's own pipeline subclasses RecBole's ``Config``,
``Trainer``, datasets and training dataloader, and overrides private methods of the first
three (:data:`~recbole_attn.compat.PRIVATE_OVERRIDES`); it runs only on RecBole
:data:`RECBOLE_VERSION` (:func:`~recbole_attn.compat.check_recbole_version`, a clear error
otherwise).

**The plugin, so that RecBole's API answers to our names** (RecBole looks models up only
inside ``recbole.model``, yaml files only inside its own tree):

* ``get_model`` resolves our model names after RecBole's own (where RecBole's tree holds a
  model of the same name, RecBole's runs through RecBole's API and a warning says so;
  ``recbole-attn`` always runs ours); ``get_trainer`` gives our models
  :class:`~recbole_attn.trainer.AttnTrainer`; ``create_dataset`` finds
  :class:`~recbole_attn.data.dataset.AttnSequentialDataset` under RecBole's
  ``<Model>Dataset`` convention.
* ``Config`` loads, for our models, the model keys of our ``overall.yaml`` that RecBole's
  files lack and the model's yaml files (after RecBole's own, so that a model's
  ``MAX_ITEM_LIST_LENGTH`` is not replaced by a dataset's default; evaluation settings
  stay RecBole's and the user's), checks the model's options.
* ``load_data_and_model`` on a recbole_attn checkpoint rebuilds it as ``recbole-attn``
  does.
* CC, ILD and F1 are registered in RecBole's metric registry, and RecBole's
  ``Collector`` hands them the item->category table.

The modules of ``recbole.quick_start`` import Ray Tune, which takes seconds: they are
patched when first imported (an import hook), never imported by ``import recbole_attn``.
"""

import functools
import importlib
import os
import re
import sys
import warnings

import numpy as np
import pandas as pd
import torch

from recbole_attn import compat, recbole_bugs
from recbole_attn.checkpoint import loading_recbole_checkpoint

# the RecBole release the fixes were written for (and checked against), and the private
# methods the pipeline's own subclasses override: compat.py holds both
from recbole_attn.compat import (  # noqa: F401  (re-exported)
    PRIVATE_OVERRIDES,
    RECBOLE_VERSION,
    check_recbole_version,
)

#: the keys of a model's yaml that stay RecBole's and the user's in RecBole's API
#: (a model's ``valid_metric: MRR@20`` breaks RecBole's default ``topk: [10]``)
EVALUATION_KEYS = (
    "valid_metric",
    "metrics",
    "topk",
    "eval_args",
    "valid_metric_bigger",
)

_INSTALLED = []  # the names of the changes applied, in order (see installed())
_INSTALLING = []
_WARNED = set()


def _version(module_name):
    """The installed release of ``module_name`` as ``(major, minor, micro)``."""
    module = importlib.import_module(module_name)
    numbers = [int(n) for n in re.findall(r"\d+", module.__version__)[:3]]
    return tuple(numbers + [0] * (3 - len(numbers)))


def installed():
    """The changes :func:`install` has applied (names as in the module docstring)."""
    return list(_INSTALLED)


def _apply(name, condition, patch):
    if name in _INSTALLED or not condition:
        return
    patch()
    _INSTALLED.append(name)


def install():
    """Apply every change of this module that the installed stack needs (idempotent).
    ``import recbole_attn`` calls it when RecBole is imported."""
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
    _apply("numpy aliases", fixes and _version("numpy") >= (2, 0, 0), _numpy_aliases)
    _apply("pandas 3 dataset", fixes and compat.PANDAS_3, _pandas_dataset)
    _apply(
        "checkpoints",
        fixes
        and _version("torch") >= (2, 6, 0)
        and hasattr(torch.serialization, "get_unsafe_globals_in_checkpoint"),
        _checkpoints,
    )
    _apply("exhaustive search", fixes and _hyperopt_generator(), _exhaustive_search)
    _apply("scipy dok_matrix", fixes and _dok_without_update(), _dok_update)
    _apply("negative sampling", fixes, _negative_sampling)
    _apply("Pop counts", fixes, _pop_counts)
    _apply("collector values", fixes, _collector_values)
    _apply("generator pickling", fixes, recbole_bugs.register_generator_pickling)
    _apply("plugin models", True, _plugin_models)
    _apply("category metrics", True, _category_metrics)
    _apply("quick_start hook", True, _quick_start_hook)


# ---------------------------------------------------------------------- stack fixes
def _numpy_aliases():
    from recbole.config import Config

    def compatibility_settings(self):
        compat.set_numpy_aliases()

    Config.compatibility_settings = compatibility_settings


def _pandas_dataset():
    from recbole.data.dataset import Dataset, SequentialDataset

    SequentialDataset._benchmark_presets = compat.benchmark_presets
    Dataset._load_feat = compat.load_feat
    Dataset._fill_nan = compat.fill_nan
    Dataset._remap = compat.remap
    Dataset._normalize = compat.refusing_float_seq(
        Dataset._normalize, "normalize_field / normalize_all", compat.normalized_fields
    )
    Dataset._discretization = compat.refusing_float_seq(
        Dataset._discretization,
        "numerical_features / discretization",
        compat.discretized_fields,
    )


def _dok_without_update():
    import scipy.sparse

    return not hasattr(scipy.sparse.dok_matrix, "_update")


def _dok_update():
    """RecBole's graph models (LightGCN, NGCF, NCL, GCMC, SpectralCF, KGIN, MCCLK) build
    their adjacency matrix with ``dok_matrix._update(dict)``, which scipy 1.12 removed
    (a DOK matrix is no dict any more): the same bulk insert into its ``_dict``."""
    import scipy.sparse

    def _update(self, entries):
        self._dict.update(entries)

    scipy.sparse.dok_matrix._update = _update


#: (class, attribute) -> RecBole's own function, for each RecBole bug fixed below (the
#: tests run RecBole's version to show the bug)
_ORIGINALS = {}


def recbole_original(cls, name):
    """RecBole's own ``cls.name`` before a fix of :func:`install` replaced it."""
    return _ORIGINALS.get((cls, name), getattr(cls, name))


def _replace(cls, name, value):
    _ORIGINALS.setdefault((cls, name), getattr(cls, name))
    setattr(cls, name, value)


def _negative_sampling():
    """RecBole's samplers without their endless loops (RecBole #2193): BERT4Rec's
    masking transform, ``AbstractSampler.sample_by_key_ids`` and ``Sampler``'s check of
    users who have every item, each a clear error (or, where the negative is never read,
    the padding item) instead of a hang or a traceback."""
    from recbole.data.transform import MaskItemSequence
    from recbole.sampler.sampler import AbstractSampler, Sampler

    _replace(MaskItemSequence, "_neg_sample", recbole_bugs.mask_item_neg_sample)
    _replace(AbstractSampler, "sample_by_key_ids", recbole_bugs.sample_by_key_ids)
    _replace(
        Sampler, "get_used_ids", recbole_bugs.sampler_used_ids(Sampler.get_used_ids)
    )


def _pop_counts():
    from recbole.model.general_recommender.pop import Pop

    _replace(Pop, "__init__", recbole_bugs.pop_init(Pop.__init__))
    _replace(Pop, "calculate_loss", recbole_bugs.pop_calculate_loss)


def _collector_values():
    from recbole.evaluator.collector import Collector

    fixed = recbole_bugs.collector_data_struct(Collector.get_data_struct)
    _replace(Collector, "get_data_struct", fixed)


def _hyperopt_generator():
    try:
        return _version("hyperopt") >= (0, 2, 7)
    except ImportError:
        return False


def exhaustive_search(new_ids, domain, trials, seed, nbMaxSucessiveFailures=1000):
    """RecBole 1.2.1's ``exhaustive_search`` with the random ``Generator`` that hyperopt
    >= 0.2.7 draws with: new samples of the space until one not tried before, for each
    new trial id."""
    from hyperopt import pyll
    from hyperopt.base import miscs_update_idxs_vals

    def key(vals):
        return frozenset(
            (name, value[0] if len(value) > 0 else None) for name, value in vals.items()
        )

    seen = {key(trial["misc"]["vals"]) for trial in trials.trials}
    rng = np.random.default_rng(seed)
    rval = []
    for new_id in new_ids:
        failures = 0
        while True:
            idxs, vals = pyll.rec_eval(
                domain.s_idxs_vals,
                memo={domain.s_new_ids: [new_id], domain.s_rng: rng},
            )
            new_result = domain.new_result()
            new_misc = dict(tid=new_id, cmd=domain.cmd, workdir=domain.workdir)
            miscs_update_idxs_vals([new_misc], idxs, vals)
            if key(new_misc["vals"]) not in seen:
                seen.add(key(new_misc["vals"]))
                break
            failures += 1
            if failures > nbMaxSucessiveFailures:
                return []  # the space is exhausted
        rval.extend(trials.new_trial_docs([new_id], [None], [new_result], [new_misc]))
    return rval


def _exhaustive_search():
    import recbole.trainer.hyper_tuning as hyper_tuning

    hyper_tuning.exhaustive_search = exhaustive_search


# ---------------------------------------------------------------------- checkpoints
def _checkpoints():
    from recbole.trainer import Trainer
    from recbole.utils import set_color

    def _save_checkpoint(self, epoch, verbose=True, **kwargs):
        # RecBole 1.2.1's, with pickle protocol 2 (the weights-only loader reads it)
        if not self.config["single_spec"] and self.config["local_rank"] != 0:
            return
        saved_model_file = kwargs.pop("saved_model_file", self.saved_model_file)
        state = {
            "config": self.config,
            "epoch": epoch,
            "cur_step": self.cur_step,
            "best_valid_score": self.best_valid_score,
            "state_dict": self.model.state_dict(),
            "other_parameter": self.model.other_parameter(),
            "optimizer": self.optimizer.state_dict(),
        }
        torch.save(state, saved_model_file, pickle_protocol=2)
        if verbose:
            self.logger.info(
                set_color("Saving current", "blue") + f": {saved_model_file}"
            )

    resume = Trainer.resume_checkpoint
    evaluate = Trainer.evaluate

    @functools.wraps(resume)
    def resume_checkpoint(self, resume_file):
        with loading_recbole_checkpoint(resume_file):
            return resume(self, resume_file)

    @functools.wraps(evaluate)
    def evaluate_(
        self, eval_data, load_best_model=True, model_file=None, show_progress=False
    ):
        if not (eval_data and load_best_model):
            return evaluate(self, eval_data, load_best_model, model_file, show_progress)
        with loading_recbole_checkpoint(model_file or self.saved_model_file):
            return evaluate(self, eval_data, load_best_model, model_file, show_progress)

    Trainer._save_checkpoint = _save_checkpoint
    Trainer.resume_checkpoint = resume_checkpoint
    Trainer.evaluate = evaluate_


# ---------------------------------------------------------------------- our models
def _ours(name):
    from recbole_attn.models import MODELS

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
        # RecBole raises ValueError for an unknown name, after trying to import its
        # optional exlib models (ImportError without lightgbm / xgboost)
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
                f"--model={model_name}` or recbole_attn.quick_start.run.",
                stacklevel=2,
            )
        return theirs

    recbole_get_trainer = utils.get_trainer

    @functools.wraps(recbole_get_trainer)
    def get_trainer(model_type, model_name):
        if _ours(model_name) is not None and get_model(model_name) is _ours(model_name):
            from recbole_attn.trainer import AttnTrainer

            return AttnTrainer
        return recbole_get_trainer(model_type, model_name)

    for module in (utils, recbole.utils, configurator):
        module.get_model = get_model
    for module in (utils, recbole.utils):
        module.get_trainer = get_trainer
    return get_model, get_trainer


def _load_plugin_defaults(config):
    """For our models in RecBole's ``Config``: the model keys of our overall.yaml that
    RecBole's files lack, RecBole's sampler off (our models draw their negatives), then
    the model's yaml files without :data:`EVALUATION_KEYS`."""
    import yaml

    from recbole_attn.config import model_yaml_files, properties_dir

    internal = config.internal_config_dict
    with open(os.path.join(properties_dir(), "overall.yaml"), encoding="utf-8") as f:
        overall = yaml.load(f, Loader=config.yaml_loader) or {}
    for key, value in overall.items():
        if key not in internal and key not in EVALUATION_KEYS:
            internal[key] = value
    internal["train_neg_sample_args"] = None

    def read(paths):
        values = {}
        for path in paths:
            with open(path, encoding="utf-8") as f:
                values.update(yaml.load(f, Loader=config.yaml_loader) or {})
        return values

    # the model's own yaml and the user's options choose the files (AWRSR: its backbone's)
    options = {
        **read(model_yaml_files(config.model_class)),
        **config.external_config_dict,
    }
    values = read(model_yaml_files(config.model_class, options))
    internal.update({k: v for k, v in values.items() if k not in EVALUATION_KEYS})


def _plugin_models():
    # our modules are imported when RecBole's functions are called, not here: install()
    # may run while one of them is being imported (it imports RecBole)
    from recbole.config import Config

    _patch_get_model()
    load_internal = Config._load_internal_config_dict
    init = Config.__init__

    def ours(config):
        from recbole_attn.config import AttnConfig

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
    """After RecBole's ``Config`` of one of our models: its options checked and its dataset
    class where RecBole's ``create_dataset`` looks for
    ``recbole.data.dataset.<Model>Dataset``."""
    import recbole.data.dataset as recbole_datasets

    from recbole_attn import config_check
    from recbole_attn.config import model_classes
    from recbole_attn.data.dataset import AttnSequentialDataset

    for cls in model_classes(config.model_class, config):
        config_check.check_model_options(cls, config)
    name = f"{config.model}Dataset"
    if getattr(recbole_datasets, name, AttnSequentialDataset) is AttnSequentialDataset:
        setattr(recbole_datasets, name, AttnSequentialDataset)


def _category_metrics():
    from recbole.evaluator.collector import Collector

    data_collect = Collector.data_collect

    @functools.wraps(data_collect)
    def data_collect_(self, train_data):
        from recbole_attn.evaluator.collector import collect_item_categories

        data_collect(self, train_data)
        collect_item_categories(self, train_data)

    Collector.data_collect = data_collect_


# ---------------------------------------------------------------------- quick_start
class _Tune:
    """``ray.tune`` for RecBole's ``objective_function``: ``report(**metrics)`` (Ray <=
    2.6) as Ray's current ``report(metrics)``."""

    def __init__(self, tune):
        self._tune = tune

    def report(self, *args, **metrics):
        return self._tune.report(*args) if args else self._tune.report(metrics)

    def __getattr__(self, name):
        return getattr(self._tune, name)


def load_data_and_model(model_file):
    """RecBole's ``load_data_and_model`` that also loads recbole_attn checkpoints (as
    ``recbole-attn`` built them): ``(config, model, dataset, train_data, valid_data,
    test_data)``."""
    from recbole_attn.quick_start import is_recbole_attn_checkpoint, load_run

    if is_recbole_attn_checkpoint(model_file):
        config, model, _, dataset, (train, valid, test) = load_run(model_file)
        return config, model, dataset, train, valid, test
    with _recbole_loading(model_file):
        return _RECBOLE["load_data_and_model"](model_file)


_RECBOLE = {}


def _recbole_loading(path):
    if "checkpoints" in _INSTALLED:
        return loading_recbole_checkpoint(path)
    import contextlib

    return contextlib.nullcontext()


def _patch_quick_start(module):
    """``recbole.quick_start.quick_start`` (and its package): our ``get_model`` /
    ``get_trainer``, Ray's current ``tune.report``, and ``load_data_and_model`` for
    both kinds of checkpoint."""
    import recbole.utils

    module.get_model = recbole.utils.get_model
    module.get_trainer = recbole.utils.get_trainer
    if hasattr(module, "tune") and _version("ray") >= (2, 7, 0):
        module.tune = _Tune(module.tune)
    _RECBOLE.setdefault("load_data_and_model", module.load_data_and_model)
    module.load_data_and_model = load_data_and_model
    package = sys.modules.get("recbole.quick_start")
    if package is not None and hasattr(package, "load_data_and_model"):
        package.load_data_and_model = load_data_and_model


def _quick_start_hook():
    from recbole_attn.hooks import after_import

    after_import("recbole.quick_start.quick_start", _patch_quick_start)


__all__ = [
    "RECBOLE_VERSION",
    "EVALUATION_KEYS",
    "install",
    "installed",
    "recbole_checkpoint_globals",
    "recbole_original",
    "exhaustive_search",
    "load_data_and_model",
]
