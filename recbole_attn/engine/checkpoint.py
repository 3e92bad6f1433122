"""
recbole_attn.engine.checkpoint
##############################

The checkpoint format of recbole_attn's runs: what a checkpoint holds, how it is written
and read, and the checks that a loaded one fits the run.

* Only tensors, numbers, strings, lists and dicts (:func:`to_plain`), written atomically
  (:func:`save_checkpoint`) and read with ``weights_only=True`` (:func:`load_checkpoint`):
  torch >= 2.6 refuses RecBole's pickled ``Config`` by default, and switching
  weights-only loading off would execute whatever code a file holds.
* What a run stores (:func:`training_state`): the model, the dataset and its
  :func:`data_signature`, the user-given configuration, the epoch, the early-stopping
  state, the weights and the optimizer's state.
* :func:`load_weights` loads a checkpoint's weights into a model after checking, each
  with one actionable error, its model name, its data, its parameter shapes and that its
  weights are finite.
* RecBole's own checkpoints (its ``Config`` pickled) are read weights-only too:
  :mod:`recbole_attn.host.compat`.
"""

import hashlib
import json
import os
import zipfile
from collections.abc import Mapping

import numpy as np
import torch

from recbole_attn.errors import CheckpointError, ConfigError

CHECKPOINT_FORMAT = "recbole_attn-checkpoint-1"


def data_signature(dataset):
    """What a checkpoint records about its data: the dataset's name, its numbers of
    users and items (RecBole's ids, padding included) and of interactions, and a
    fingerprint of the data that defines the model and its split: the user and item
    tokens behind the ids and every interaction's (user, item, time) after filtering and
    remapping. Other data of the same name and sizes has another fingerprint."""
    digest = hashlib.sha256()
    for field in (dataset.uid_field, dataset.iid_field):
        digest.update("\x1f".join(map(str, dataset.field2id_token[field])).encode())
        digest.update(b"\x1e")
    columns = [dataset.uid_field, dataset.iid_field]
    if dataset.time_field and dataset.time_field in dataset.inter_feat:
        columns.append(dataset.time_field)
    for field in columns:
        values = dataset.inter_feat[field]
        values = values.numpy() if torch.is_tensor(values) else np.asarray(values)
        digest.update(np.ascontiguousarray(values, dtype=np.float64).tobytes())
    return {
        "dataset": str(dataset.dataset_name),
        "n_users": int(dataset.user_num),
        "n_items": int(dataset.item_num),
        "n_interactions": int(len(dataset.inter_feat)),
        "fingerprint": digest.hexdigest()[:16],
    }


def _data_difference(saved, current):
    """What differs between two :func:`data_signature` s, on the keys both have (a
    checkpoint from before a key was recorded is checked on the others); None if
    nothing."""
    shared = [k for k in saved if k in current]
    if all(saved[k] == current[k] for k in shared):
        return None
    if any(saved[k] != current[k] for k in shared if k != "fingerprint"):
        return f"{_describe(saved)}, but this run uses {_describe(current)}"
    return (
        f"other data named {saved['dataset']!r} with the same numbers of users, items "
        "and interactions: its interactions or its user and item tokens differ (data "
        f"fingerprint {saved['fingerprint']} there, {current['fingerprint']} here)"
    )


def non_finite_parameters(model_or_state):
    """The names of the parameters (of a module, or tensors of a state dict) that hold a
    NaN or an infinity, a few of them; empty when all are finite."""
    items = (
        model_or_state.named_parameters()
        if isinstance(model_or_state, torch.nn.Module)
        else model_or_state.items()
    )
    bad = [
        name
        for name, tensor in items
        if torch.is_tensor(tensor)
        and tensor.is_floating_point()
        and not bool(torch.isfinite(tensor).all())
    ]
    return ", ".join(bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")


def _shape_differences(saved, current):
    """The parameters whose shapes differ (or that only one side has), a few of them."""
    lines = []
    for key in sorted(set(saved) | set(current)):
        a, b = saved.get(key), current.get(key)
        if a is None or b is None:
            lines.append(f"{key} {'only in the checkpoint' if b is None else 'is new'}")
        elif tuple(a.shape) != tuple(b.shape):
            lines.append(f"{key} is {list(a.shape)} there, {list(b.shape)} here")
    return "; ".join(lines[:3]) + ("; ..." if len(lines) > 3 else "")


def _options_text(checkpoint):
    """The options a checkpoint's run was given (its user-given configuration)."""
    given = json.loads(checkpoint.get("external_config_json") or "{}")
    shown = {k: v for k, v in given.items() if k not in ("data_path", "checkpoint_dir")}
    return ", ".join(f"{k}={v}" for k, v in sorted(shown.items())) or "the defaults"


def _describe(signature):
    interactions = signature.get("n_interactions")
    return (
        f"{signature['dataset']!r} ({signature['n_users']} users, "
        f"{signature['n_items']} items"
        + (f", {interactions} interactions)" if interactions is not None else ")")
    )


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
    from recbole_attn.files import write_failure, write_replacing

    state = to_plain(state)
    try:
        write_replacing(path, lambda f: torch.save(state, f), binary=True)
    except (OSError, RuntimeError) as err:  # torch's zip writer: RuntimeError
        reason, advice = write_failure(err, path)
        raise CheckpointError(
            f"cannot write the checkpoint {path} ({reason}); {advice}, or choose "
            "another --checkpoint_dir"
        ) from None


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


def _plain_result(result):
    """A metrics result as plain floats (None stays None)."""
    return None if result is None else {k: float(v) for k, v in result.items()}


def training_state(trainer, epoch):
    """What a checkpoint of ``trainer`` (an :class:`~recbole_attn.engine.trainer.AttnTrainer`)
    after ``epoch`` holds: the user-given configuration (enough to rebuild config, data
    and model), the data's signature, the early-stopping state, weights and optimizer.
    """
    config = trainer.config
    return {
        "format": CHECKPOINT_FORMAT,
        "model": config["model"],
        "dataset": config["dataset"],
        "data": trainer.data_signature,
        "external_config_json": json.dumps(config.external_config_dict, default=str),
        "epoch": int(epoch),
        "cur_step": int(trainer.cur_step),
        "best_valid_score": float(trainer.best_valid_score),
        "best_valid_result": _plain_result(trainer.best_valid_result),
        "saved_model_file": trainer.saved_model_file,
        "state_dict": trainer.model.state_dict(),
        "other_parameter": trainer.model.other_parameter(),
        "optimizer": trainer.optimizer.state_dict(),
    }


def load_weights(model, path, model_name, data=None, map_location="cpu"):
    """Load the weights of checkpoint ``path`` into ``model`` (named ``model_name`` in
    the run), after checking its model, its data against ``data`` (a
    :func:`data_signature`; None: not checked), its parameter shapes and that its weights
    are finite; returns the checkpoint."""
    checkpoint = load_checkpoint(path, map_location=map_location)
    if checkpoint.get("model", "").lower() != model_name.lower():
        raise ConfigError(
            f"checkpoint {path} was trained with model {checkpoint.get('model')!r}, "
            f"not {model_name!r}; pass --model={checkpoint.get('model')}"
        )
    saved = checkpoint.get("data")
    difference = saved and data and _data_difference(saved, data)
    if difference:
        raise CheckpointError(
            f"checkpoint {path} was trained on {difference}; pass "
            f"--dataset={saved['dataset']} and the --data_path of the data it was "
            "trained on, or train a new model on this data"
        )
    try:
        model.load_state_dict(checkpoint["state_dict"])
    except RuntimeError:
        raise CheckpointError(
            f"checkpoint {path} does not fit this model: "
            f"{_shape_differences(checkpoint['state_dict'], model.state_dict())}"
            f". It was trained with {_options_text(checkpoint)}; pass the same "
            "model options (or train a new model with these)"
        ) from None
    bad = non_finite_parameters(checkpoint["state_dict"])
    if bad:
        raise CheckpointError(
            f"checkpoint {path} holds NaN or infinite weights ({bad}): its training "
            "diverged; train again with a lower --learning_rate"
        )
    model.load_other_parameter(checkpoint.get("other_parameter"))
    return checkpoint
