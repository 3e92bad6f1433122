"""A run's checkpoints: plain tensors written atomically and read weights-only, what
they hold, the checks that one fits the run, and the trainer's methods for them."""

import hashlib
import json
import os
import zipfile
from collections.abc import Mapping

import numpy as np
import torch

from recbole_attn.engine import distributed
from recbole_attn.errors import CheckpointError, ConfigError
from recbole_attn.files import release_if_empty, write_failure, write_replacing

CHECKPOINT_FORMAT = "recbole_attn-checkpoint-1"


def data_signature(dataset):
    """The dataset's name, sizes and a fingerprint of its tokens and interactions."""
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
    """What differs between two data signatures (shared keys); None if nothing."""
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
    """A few names of parameters (module or state dict) holding NaN or inf."""
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
    lines = []
    for key in sorted(set(saved) | set(current)):
        a, b = saved.get(key), current.get(key)
        if a is None or b is None:
            lines.append(f"{key} {'only in the checkpoint' if b is None else 'is new'}")
        elif tuple(a.shape) != tuple(b.shape):
            lines.append(f"{key} is {list(a.shape)} there, {list(b.shape)} here")
    return "; ".join(lines[:3]) + ("; ..." if len(lines) > 3 else "")


def _options_text(checkpoint):
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
    """``value`` in types ``torch.load(weights_only=True)`` accepts, else TypeError."""
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
    """Write ``state`` (made plain) to ``path`` atomically."""
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


def _damaged_member(path):
    """The first member of the zip archive ``path`` whose bytes fail its CRC (torch's
    reader checks none), or None."""
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.testzip()
    except (OSError, zipfile.BadZipFile, EOFError, ValueError):
        return None


def load_checkpoint(path, map_location="cpu"):
    """Load a checkpoint weights-only; RecBole's own are refused with why."""
    path = str(path)
    if not os.path.isfile(path):
        raise CheckpointError(f"checkpoint file not found: {path}")
    if not zipfile.is_zipfile(path):  # torch.save writes a zip archive
        raise CheckpointError(_UNREADABLE.format(path=path))
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # torch raises UnpicklingError or RuntimeError here
        if damaged := _damaged_member(path):
            raise CheckpointError(
                f"{path} is damaged: its {damaged} fails the checksum torch.save "
                "wrote (a changed byte or a broken copy); copy it again or use "
                "another checkpoint"
            ) from None
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


def training_state(trainer, epoch):
    config, best = trainer.config, trainer.best_valid_result
    return {
        "format": CHECKPOINT_FORMAT,
        "model": config["model"],
        "dataset": config["dataset"],
        "data": trainer.data_signature,
        "external_config_json": json.dumps(config.external_config_dict, default=str),
        "epoch": int(epoch),
        "cur_step": int(trainer.cur_step),
        "best_valid_score": float(trainer.best_valid_score),
        # RecBole resets cur_step to 0 where the epoch is the best (before saving it)
        "best_valid_epoch": (
            epoch if trainer.cur_step == 0 else trainer.best_valid_epoch
        ),
        "best_valid_result": best and {k: float(v) for k, v in best.items()},
        "saved_model_file": trainer.saved_model_file,
        "state_dict": trainer.model.state_dict(),
        "other_parameter": trainer.model.other_parameter(),
        "optimizer": trainer.optimizer.state_dict(),
    }


class CheckpointMixin:
    """The trainer's methods that save, load and resume its checkpoints."""

    def _save_checkpoint(self, epoch, verbose=True, **kwargs):
        """Save the best model (RecBole's hook)."""
        if not distributed.is_main_process(self.config):
            return
        saved_model_file = kwargs.pop("saved_model_file", self.saved_model_file)
        save_checkpoint(training_state(self, epoch), saved_model_file)
        if verbose:
            self.logger.info(f"Saving current: {saved_model_file}")

    def _save_resume_state(self, epoch):
        if not distributed.is_main_process(self.config):
            return
        state = training_state(self, epoch)
        state["rng_torch"] = torch.get_rng_state()
        if self._train_generator is not None:
            state["rng_train_dataloader"] = self._train_generator.get_state()
        save_checkpoint(state, self.resume_file)
        self.resume_epoch = epoch

    def load_model_file(self, path):
        """Load ``path``'s weights, checked (model, data, shapes, NaN); the checkpoint."""
        model, model_name, data = self.model, self.config["model"], self.data_signature
        checkpoint = load_checkpoint(path, map_location=self.device)
        if checkpoint.get("model", "").lower() != model_name.lower():
            raise ConfigError(
                f"checkpoint {path} was trained with model {checkpoint.get('model')!r}, "
                f"not {model_name!r}; pass --model={checkpoint.get('model')}"
            )
        saved = checkpoint.get("data")
        if difference := saved and data and _data_difference(saved, data):
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
        if bad := non_finite_parameters(checkpoint["state_dict"]):
            raise CheckpointError(
                f"checkpoint {path} holds NaN or infinite weights ({bad}): its training "
                "diverged; train again with a lower --learning_rate"
            )
        model.load_other_parameter(checkpoint.get("other_parameter"))
        return checkpoint

    def use_model_file(self, path):
        """Make ``path`` the model file; an unwritten claimed one is released."""
        if str(path) != self.saved_model_file:
            release_if_empty(self.saved_model_file)
        self.saved_model_file = str(path)

    def release(self):
        release_if_empty(self.saved_model_file)

    def resume_checkpoint(self, resume_file):
        """Continue training from ``resume_file`` (``-last.pth``: exactly)."""
        checkpoint = self.load_model_file(resume_file)
        self.start_epoch = checkpoint["epoch"] + 1
        self.cur_step = checkpoint["cur_step"]
        self.best_valid_score = checkpoint["best_valid_score"]
        self.best_valid_result = checkpoint.get("best_valid_result")
        self.best_valid_epoch = checkpoint.get("best_valid_epoch")  # older: None
        self.use_model_file(checkpoint.get("saved_model_file", str(resume_file)))
        self.resume_file = str(resume_file)
        self.optimizer.load_state_dict(checkpoint["optimizer"])
        if "rng_torch" in checkpoint:
            torch.set_rng_state(checkpoint["rng_torch"])
        self._pending_generator_state = checkpoint.get("rng_train_dataloader")
        self.check_epochs_left()
        # the console counts epochs from 1: the next one trained is start_epoch + 1
        self.logger.info(
            f"checkpoint {resume_file} loaded: training continues with epoch "
            f"{self.start_epoch + 1}/{self.epochs}"
        )

    def check_epochs_left(self):
        """A :class:`ConfigError` when the resumed checkpoint trained every epoch."""
        if self.start_epoch >= self.epochs:
            # RecBole would save the resumed weights over the best model of the finished run
            raise ConfigError(
                f"the checkpoint has already trained {self.start_epoch} epochs and epochs "
                f"is {self.epochs}: nothing to train. Raise --epochs to continue, or "
                "evaluate its best model with recbole-attn evaluate "
                f"--model_file={self.saved_model_file}"
            )

    def saved_state_text(self):
        if self.resume_epoch is None:
            return "nothing was saved (no evaluation had finished)"
        return (
            f"the state after epoch {self.resume_epoch + 1}/{self.epochs} is saved: "
            f"continue with the same command and --resume_checkpoint={self.resume_file}"
        )

    def interrupted_text(self, testing=False, saved=True):
        """One line for a run stopped by Ctrl-C or SIGTERM: what to do next."""
        if testing:
            if saved and self.saved_model_file:
                return (
                    "interrupted during the test; the training is complete and its "
                    "best model is saved: evaluate it with recbole-attn evaluate "
                    f"--model_file={self.saved_model_file}"
                )
            return "interrupted during the test; nothing was saved"
        where = (
            "" if self.epoch is None else f" in epoch {self.epoch + 1}/{self.epochs}"
        )
        return f"interrupted{where}; {self.saved_state_text()}"


#: how a checkpoint's run was trained, not what it is: they stay behind when it is loaded
TRAINING_ENVIRONMENT_KEYS = distributed.DISTRIBUTED_KEYS + tuple(
    "local_rank gpu_id use_gpu device checkpoint_dir resume_checkpoint worker "
    "show_progress log_wandb wandb_project".split()
)


def checkpoint_options(checkpoint, path="the checkpoint"):
    """The options a checkpoint's run was given, without how it was trained."""
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


def is_recbole_attn_checkpoint(path):
    """Whether ``path`` is a checkpoint recbole_attn wrote (not RecBole's)."""
    try:
        checkpoint = load_checkpoint(path)
    except CheckpointError:
        return False
    return checkpoint.get("format") == CHECKPOINT_FORMAT
