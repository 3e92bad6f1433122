"""
recbole_attn.host.compat
########################

The fixes that RecBole 1.2.1 needs on today's stack, each with the function that installs
it (``import recbole_attn`` runs :func:`recbole_attn.host.install.install`, which applies each
for RecBole 1.2.1 and the release of the package that broke it only):

* Anomaly detection. RecBole 1.2.1's ``recbole/model/sequential_recommender/sine.py`` calls
  ``torch.autograd.set_detect_anomaly(True)`` at import time, and ``recbole.model`` imports
  it, so every RecBole training run (SASRec included) does autograd's debugging checks on
  every backward node (several times slower backward, measured on Office).
  :func:`undo_recbole_anomaly_detection` switches it off again; a few warnings RecBole
  raises on every run are silenced where RecBole raises them
  (:data:`HARMLESS_RECBOLE_WARNINGS`).
* numpy 2. RecBole's ``Config.compatibility_settings`` re-creates numpy's removed aliases
  (``np.float``, ``np.int``, ...) from ``np.float_``, ``np.complex_`` and ``np.unicode_``,
  which numpy 2 removed too, so every ``Config()`` fails. RecBole's own code still uses the
  aliases (``np.float`` in its metrics, interactions and NaN filling), so
  :func:`set_numpy_aliases` gives them the values RecBole gives them, from numpy 2's names.
* torch >= 2.6 (``torch.load`` is weights-only by default): RecBole pickles its
  ``Config`` into checkpoints with pickle protocol 4, which the weights-only loader
  cannot read at all, so RecBole's ``evaluate`` after ``fit`` fails for every model.
  :func:`install_recbole_checkpoints`: ``Trainer``'s checkpoints are written with
  protocol 2, and ``Trainer.resume_checkpoint``, ``Trainer.evaluate`` and
  ``load_data_and_model`` load them weights-only with exactly the classes such a
  checkpoint holds allowed (:func:`recbole_checkpoint_globals`); a file that needs
  anything else is refused with what it holds. Weights-only loading is never switched
  off.
* pandas 3: :mod:`recbole_attn.host.pandas3`.
* scipy >= 1.12: RecBole's graph models (LightGCN, NGCF, NCL, GCMC, SpectralCF, KGIN,
  MCCLK) fill their adjacency matrix with ``dok_matrix._update``, which scipy removed;
  :func:`install_dok_update` gives ``dok_matrix`` that bulk insert back.
* hyperopt >= 0.2.7: RecBole's ``exhaustive_search`` (``run_hyper``'s default) hands
  hyperopt a ``RandomState``; hyperopt draws with ``Generator.integers``.
  :func:`exhaustive_search` is the same search with a ``Generator`` (every combination
  once; the order of the trials differs from hyperopt 0.2.5's).
* Ray >= 2.7: ``objective_function`` (``run_hyper``'s) calls ``tune.report(**result)``,
  which Ray's current API (``tune.report(metrics)``) refuses; it gets a ``tune`` whose
  ``report`` takes both forms (:class:`Tune`).
* RecBole 1.2.1's own bugs, reported upstream after the release, that a run can reach:
  :mod:`recbole_attn.host.recbole_bugs`.
* Couplings. :data:`~recbole_attn.engine.PRIVATE_OVERRIDES` lists every private RecBole method that the
  pipeline's own subclasses override (a test keeps the list complete);
  :func:`~recbole_attn.engine.check_recbole_version` stops a run on any RecBole but :data:`~recbole_attn.engine.RECBOLE_VERSION`.
"""

import functools
import importlib
import os
import re
import warnings

import numpy as np
import torch

from recbole_attn.errors import CheckpointError


def installed_version(module_name):
    """The installed release of ``module_name`` as ``(major, minor, micro)``."""
    module = importlib.import_module(module_name)
    numbers = [int(n) for n in re.findall(r"\d+", module.__version__)[:3]]
    return tuple(numbers + [0] * (3 - len(numbers)))


def set_numpy_aliases():
    """What RecBole 1.2.1's ``Config.compatibility_settings`` does on numpy 1: set the
    numpy aliases its code reads (``np.float``, ``np.int``, ...), here from numpy 2's names
    (RecBole's own method reads ``np.float_``, ``np.complex_`` and ``np.unicode_``, which
    numpy 2 removed, and fails). recbole_attn requires numpy >= 2."""
    for name, value in {
        "bool": np.bool_,
        "int": np.int_,
        "float": np.float64,
        "complex": np.complex128,
        "object": np.object_,
        "str": np.str_,
        "long": np.int_,
        "unicode": np.str_,
    }.items():
        setattr(np, name, value)


def undo_recbole_anomaly_detection():
    """Import RecBole's models and switch off the anomaly detection their import enables.

    Returns True when it was on (RecBole 1.2.1), False otherwise. A user who wants anomaly
    detection can switch it on again after importing recbole_attn.
    """
    import recbole.model.sequential_recommender  # noqa: F401  (imports sine.py)

    if torch.is_anomaly_enabled():
        torch.autograd.set_detect_anomaly(False)
        return True
    return False


#: (message regex, category, module regex) of the warnings that RecBole 1.2.1 raises on
#: every run and that change nothing: pandas 2's chained-assignment and ``agg(len)``
#: notices (on pandas 2 the in-place fill works and ``agg(len)`` is per cell; on pandas 3
#: :func:`load_feat` & co. replace those methods), torch's ``torch.cuda.amp.GradScaler``
#: rename (RecBole creates a disabled scaler on CPU), pandas 3's read-only arrays and the
#: invalid escape sequences of RecBole's docstrings (Python >= 3.12).
HARMLESS_RECBOLE_WARNINGS = (
    (r"A value is trying to be set on a copy", FutureWarning, r"recbole\.data\."),
    (
        r"using <built-in function len> in Series\.agg",
        FutureWarning,
        r"recbole\.data\.",
    ),
    (r"`torch\.cuda\.amp\.GradScaler", FutureWarning, r"recbole\.trainer\."),
    # pandas 3 (Copy-on-Write) hands out read-only arrays; RecBole wraps a column's array
    # in a tensor once, when the DataFrame is converted and then dropped, and never
    # writes through it
    (r"The given NumPy array is not writable", UserWarning, r"recbole\.data\."),
    # Python >= 3.12 compiling RecBole's docstrings (dien.py: "\p"); the module of a
    # compile-time warning is the file's path
    (r"invalid escape sequence", SyntaxWarning, r".*recbole[/\\]"),
)


def silence_harmless_recbole_warnings():
    """Ignore exactly the warnings of :data:`HARMLESS_RECBOLE_WARNINGS`, and only where
    RecBole's modules raise them (other code keeps every warning)."""
    for message, category, module in HARMLESS_RECBOLE_WARNINGS:
        warnings.filterwarnings("ignore", message, category, module)


def install_numpy_aliases():
    """RecBole's ``Config.compatibility_settings`` as :func:`set_numpy_aliases`."""
    from recbole.config import Config

    def compatibility_settings(self):
        set_numpy_aliases()

    Config.compatibility_settings = compatibility_settings


def dok_without_update():
    """Whether scipy's ``dok_matrix`` lacks the ``_update`` RecBole's graph models call."""
    import scipy.sparse

    return not hasattr(scipy.sparse.dok_matrix, "_update")


def install_dok_update():
    """``dok_matrix._update(dict)``, removed in scipy 1.12: the same bulk insert into its
    ``_dict`` (a DOK matrix is no dict any more)."""
    import scipy.sparse

    def _update(self, entries):
        self._dict.update(entries)

    scipy.sparse.dok_matrix._update = _update


def hyperopt_draws_with_generator():
    """Whether hyperopt (>= 0.2.7) draws with ``Generator.integers``."""
    try:
        return installed_version("hyperopt") >= (0, 2, 7)
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


def install_exhaustive_search():
    import recbole.trainer.hyper_tuning as hyper_tuning

    hyper_tuning.exhaustive_search = exhaustive_search


class Tune:
    """``ray.tune`` for RecBole's ``objective_function``: ``report(**metrics)`` (Ray <=
    2.6) as Ray's current ``report(metrics)``."""

    def __init__(self, tune):
        self._tune = tune

    def report(self, *args, **metrics):
        return self._tune.report(*args) if args else self._tune.report(metrics)

    def __getattr__(self, name):
        return getattr(self._tune, name)


# ------------------------------------------------ torch >= 2.6: RecBole's checkpoints
#: the classes, other than the model's, that a RecBole 1.2.1 checkpoint holds
_CHECKPOINT_CLASSES = (
    "recbole.config.configurator.Config",
    "recbole.utils.enum_type.ModelType",
    "recbole.utils.enum_type.InputType",
    "recbole.utils.enum_type.EvaluatorType",
    "recbole.utils.enum_type.FeatureType",
    "recbole.utils.enum_type.FeatureSource",
    "yaml.loader.FullLoader",
)


def _resolve(name):
    """The object a pickled global ``module.qualname`` names (None if it does not
    import)."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def _allowed_global(name):
    """Whether a RecBole checkpoint may hold the global ``name``: the classes of
    :data:`_CHECKPOINT_CLASSES`, numpy's scalars and dtypes, and model classes of RecBole
    or recbole_attn (the ``Config`` keeps its model's class)."""
    from recbole.model.abstract_recommender import AbstractRecommender

    if name in _CHECKPOINT_CLASSES:
        return True
    if name.startswith("numpy.") and (
        name.endswith("multiarray.scalar")
        or name == "numpy.dtype"
        or name.startswith("numpy.dtypes.")
    ):
        return True
    if name.startswith(("recbole.model.", "recbole_attn.model.")):
        obj = _resolve(name)
        return isinstance(obj, type) and issubclass(obj, AbstractRecommender)
    return False


def recbole_checkpoint_globals(path):
    """The globals a RecBole checkpoint at ``path`` holds, resolved, for
    ``torch.serialization.safe_globals``; a :class:`~recbole_attn.errors.CheckpointError`
    for a file that is not one (it needs other globals, or cannot be read weights-only:
    RecBole before recbole_attn's fix wrote pickle protocol 4)."""
    path = str(path)
    if not os.path.isfile(path):
        raise CheckpointError(f"checkpoint file not found: {path}")
    try:
        names = torch.serialization.get_unsafe_globals_in_checkpoint(path)
    except Exception:  # not a torch zip file, or a pickle the scanner cannot read
        names = None
    if names is None:
        raise CheckpointError(
            f"{path} cannot be loaded weights-only: RecBole wrote it with pickle protocol "
            "4 (before `import recbole_attn`, or with torch < 2.6), which torch's "
            "weights-only loader cannot read. Retrain it, or, only if you trust the file, "
            "set TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 for that one load."
        )
    refused = [name for name in names if not _allowed_global(name)]
    if refused:
        raise CheckpointError(
            f"{path} holds {', '.join(refused)}, which a RecBole checkpoint does not: "
            "not loaded (weights-only loading). Only if you trust the file, set "
            "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 for that one load."
        )
    # numpy's dtypes are rebuilt from their classes, which the scan does not list
    dtypes = [
        cls
        for cls in vars(getattr(np, "dtypes", np)).values()
        if isinstance(cls, type) and issubclass(cls, np.dtype)
    ]
    return [(_resolve(name), name) for name in names] + dtypes


def loading_recbole_checkpoint(path):
    """A context in which ``torch.load`` (weights-only) reads the RecBole checkpoint at
    ``path``: its globals allowed (:func:`recbole_checkpoint_globals`)."""
    return torch.serialization.safe_globals(recbole_checkpoint_globals(path))


def recbole_checkpoints_need_fix():
    """torch >= 2.6 loads weights-only by default, which RecBole's checkpoints (its
    ``Config`` pickled with protocol 4) cannot pass."""
    return installed_version("torch") >= (2, 6, 0) and hasattr(
        torch.serialization, "get_unsafe_globals_in_checkpoint"
    )


def install_recbole_checkpoints():
    """RecBole's ``Trainer`` writes its checkpoints with pickle protocol 2, and
    ``resume_checkpoint`` and ``evaluate`` load them weights-only with exactly the
    classes such a checkpoint holds allowed (:func:`recbole_checkpoint_globals`; a file
    that needs anything else is refused with what it holds). Weights-only loading is
    never switched off."""
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
