"""The fixes RecBole 1.2.1 needs on today's stack, each with the function that installs it
(docs/environment.md lists them)."""

import functools
import importlib
import os
import pkgutil
import re
import warnings

import numpy as np
import torch

from recbole_attn.errors import CheckpointError
from recbole_attn.files import write_replacing


def installed_version(module_name):
    module = importlib.import_module(module_name)
    numbers = [int(n) for n in re.findall(r"\d+", module.__version__)[:3]]
    return tuple(numbers + [0] * (3 - len(numbers)))


def set_numpy_aliases():
    """The numpy aliases RecBole reads (``np.float``, ...), from numpy 2's names."""
    aliases = dict(bool=np.bool_, int=np.int_, long=np.int_, float=np.float64)
    aliases.update(
        complex=np.complex128, object=np.object_, str=np.str_, unicode=np.str_
    )
    for name, value in aliases.items():
        setattr(np, name, value)


def undo_recbole_anomaly_detection():
    """Switch off the anomaly detection RecBole's import enables."""
    import recbole.model.sequential_recommender  # noqa: F401  (imports sine.py)

    if torch.is_anomaly_enabled():
        torch.autograd.set_detect_anomaly(False)
        return True
    return False


#: (message regex, category, module regex) of warnings RecBole 1.2.1 raises on every run
#: that change nothing (docs/environment.md)
HARMLESS_RECBOLE_WARNINGS = (
    (r"A value is trying to be set on a copy", FutureWarning, r"recbole\.data\."),
    (
        r"using <built-in function len> in Series\.agg",
        FutureWarning,
        r"recbole\.data\.",
    ),
    (r"`torch\.cuda\.amp\.GradScaler", FutureWarning, r"recbole\.trainer\."),
    # pandas 3's read-only arrays: RecBole never writes through the tensors it wraps
    (r"The given NumPy array is not writable", UserWarning, r"recbole\.data\."),
    # Python >= 3.12 compiling RecBole's docstrings; the "module" is the file's path
    (r"invalid escape sequence", SyntaxWarning, r".*recbole[/\\]"),
)


def silence_harmless_recbole_warnings():
    """Ignore :data:`HARMLESS_RECBOLE_WARNINGS` where RecBole raises them."""
    for message, category, module in HARMLESS_RECBOLE_WARNINGS:
        warnings.filterwarnings("ignore", message, category, module)


def install_numpy_aliases():
    from recbole.config import Config

    def compatibility_settings(self):
        set_numpy_aliases()

    Config.compatibility_settings = compatibility_settings


def dok_without_update():
    """Whether scipy's ``dok_matrix`` lacks ``_update`` (scipy >= 1.12)."""
    import scipy.sparse

    return not hasattr(scipy.sparse.dok_matrix, "_update")


def install_dok_update():
    """``dok_matrix._update(dict)``: the same bulk insert into ``_dict``."""
    import scipy.sparse

    def _update(self, entries):
        self._dict.update(entries)

    scipy.sparse.dok_matrix._update = _update


def hyperopt_draws_with_generator():
    try:
        return installed_version("hyperopt") >= (0, 2, 7)
    except ImportError:
        return False


def exhaustive_search(new_ids, domain, trials, seed, nbMaxSucessiveFailures=1000):
    """RecBole's ``exhaustive_search`` with hyperopt >= 0.2.7's ``Generator``."""
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
                domain.s_idxs_vals, memo={domain.s_new_ids: [new_id], domain.s_rng: rng}
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
    """``ray.tune`` whose ``report`` takes ``**metrics`` (Ray <= 2.6) too."""

    def __init__(self, tune):
        self._tune = tune

    def report(self, *args, **metrics):
        return self._tune.report(*args) if args else self._tune.report(metrics)

    def __getattr__(self, name):
        return getattr(self._tune, name)


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
    try:
        return pkgutil.resolve_name(name)
    except (ImportError, AttributeError, ValueError):
        return None


def _allowed_global(name):
    """Whether a RecBole checkpoint may hold global ``name``."""
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
    """A RecBole checkpoint's globals for ``safe_globals``, or a CheckpointError."""
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
    if refused := [name for name in names if not _allowed_global(name)]:
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
    """A context in which ``torch.load`` reads that RecBole checkpoint."""
    return torch.serialization.safe_globals(recbole_checkpoint_globals(path))


def recbole_checkpoints_need_fix():
    """Whether torch loads weights-only by default (>= 2.6)."""
    return installed_version("torch") >= (2, 6, 0) and hasattr(
        torch.serialization, "get_unsafe_globals_in_checkpoint"
    )


def install_recbole_checkpoints():
    """RecBole's checkpoints saved with protocol 2, loaded weights-only."""
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
        # whole or not at all (RecBole writes in place: a kill left half a best model)
        write_replacing(
            saved_model_file,
            lambda f: torch.save(state, f, pickle_protocol=2),
            binary=True,
        )
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
