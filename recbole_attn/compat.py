"""
recbole_attn.compat
###################

The few targeted adaptations that RecBole 1.2.1 needs on today's stack (torch >= 2.6,
numpy < 2, ray 2.6.3). Nothing here patches RecBole globally: every fix is a function that
our own pipeline calls explicitly.

* Checkpoints. RecBole's ``Trainer`` pickles the whole ``Config`` into its checkpoints and
  reloads them with ``torch.load(path)``. Since torch 2.6 ``torch.load`` defaults to
  ``weights_only=True``, which refuses such files. We never switch weights-only loading off
  (that would execute arbitrary code from a file); instead our checkpoints contain only
  tensors, numbers, strings, lists and dicts (:func:`to_plain`), and we load them with
  :func:`load_checkpoint`, which always passes ``weights_only=True``.
* Anomaly detection. RecBole 1.2.1's ``recbole/model/sequential_recommender/sine.py`` calls
  ``torch.autograd.set_detect_anomaly(True)`` at import time, and ``recbole.model`` imports
  it, so every RecBole training run (SASRec included) does autograd's debugging checks on
  every backward node. Measured here on Office (STOSA, batch 256) that made backward several
  times slower. :func:`undo_recbole_anomaly_detection` switches it off again once, right
  after RecBole's models are imported; it is a debugging mode that changes no result.
"""

import os
import uuid
import warnings
import zipfile
from collections.abc import Mapping

import numpy as np
import torch

from recbole_attn.errors import RecboleAttnError

__all__ = [
    "to_plain",
    "save_checkpoint",
    "load_checkpoint",
    "CheckpointError",
    "undo_recbole_anomaly_detection",
    "silence_harmless_recbole_warnings",
]


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
#: every run with the pinned stack and that change nothing under our pins: pandas' chained
#: assignment notices (pandas 3 behaviour; we pin pandas<3, where the in-place fill works),
#: pandas' ``agg(len)`` deprecation (same result in 2.x) and torch's
#: ``torch.cuda.amp.GradScaler`` rename (RecBole creates a disabled scaler on CPU).
HARMLESS_RECBOLE_WARNINGS = (
    (r"A value is trying to be set on a copy", FutureWarning, r"recbole\.data\."),
    (
        r"using <built-in function len> in Series\.agg",
        FutureWarning,
        r"recbole\.data\.",
    ),
    (r"`torch\.cuda\.amp\.GradScaler", FutureWarning, r"recbole\.trainer\."),
)


def silence_harmless_recbole_warnings():
    """Ignore exactly the warnings of :data:`HARMLESS_RECBOLE_WARNINGS`, and only where
    RecBole's modules raise them (other code keeps every warning)."""
    for message, category, module in HARMLESS_RECBOLE_WARNINGS:
        warnings.filterwarnings("ignore", message, category, module)


class CheckpointError(RecboleAttnError, ValueError):
    """A checkpoint file cannot be read by recbole_attn, or does not fit the run."""


def to_plain(value):
    """Convert ``value`` into types that ``torch.load(weights_only=True)`` accepts.

    numpy scalars become Python numbers and numpy arrays become tensors; mappings become
    plain dicts. Raises :class:`TypeError` for anything else that is not a tensor, number,
    string, bool, ``None``, list or tuple, so that an unsafe checkpoint is never written.
    """
    if value is None or isinstance(value, (bool, int, float, str, torch.Tensor)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value.copy())
    if isinstance(value, torch.device):
        return str(value)
    if isinstance(value, Mapping):
        return {to_plain(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_plain(v) for v in value)
    raise TypeError(
        f"cannot store a value of type {type(value).__name__} in a weights-only "
        "checkpoint; convert it to tensors, numbers, strings, lists or dicts"
    )


def save_checkpoint(state, path):
    """Write ``state`` (made plain by :func:`to_plain`) to ``path`` atomically.

    The file is written next to ``path`` and renamed over it, so an interrupted save never
    leaves a truncated checkpoint behind. Its permissions follow the user's umask, like any
    file the user writes.
    """
    state = to_plain(state)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".tmp-{uuid.uuid4().hex}.pth")
    try:
        # mode 0o666 before the umask (tempfile.mkstemp would force 0o600)
        with os.fdopen(
            os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "wb"
        ) as f:
            torch.save(state, f)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


_UNREADABLE = (
    "{path} is not a readable checkpoint (truncated, or not a file written by "
    "torch.save); use the .pth files that run_recbole_attn.py writes in checkpoint_dir "
    "(saved/)"
)


def load_checkpoint(path, map_location="cpu"):
    """Load a checkpoint written by :func:`save_checkpoint` with ``weights_only=True``.

    A checkpoint written by RecBole's own trainer (it pickles the ``Config`` object) is
    refused with an explanation instead of an unpickling trace.
    """
    path = str(path)
    if not os.path.isfile(path):
        raise CheckpointError(f"checkpoint file not found: {path}")
    if not zipfile.is_zipfile(path):  # torch.save writes a zip archive
        raise CheckpointError(_UNREADABLE.format(path=path))
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # torch raises UnpicklingError or RuntimeError here
        if "Weights only load failed" in str(err):
            # a readable torch file with pickled objects (RecBole's Trainer saves its Config)
            raise CheckpointError(
                f"{path} is not a recbole_attn checkpoint: it holds pickled Python "
                "objects (RecBole's own Trainer saves its Config object that way), which "
                "recbole_attn never unpickles (weights-only loading). Retrain with "
                "run_recbole_attn.py, or, only if you trust the file, load its "
                "'state_dict' yourself."
            ) from None
        raise CheckpointError(_UNREADABLE.format(path=path)) from None
    if not isinstance(state, dict) or "state_dict" not in state:
        raise CheckpointError(
            f"{path} is not a recbole_attn checkpoint (no 'state_dict' entry)"
        )
    return state
