"""
recbole_attn.trainer
####################

:class:`AttnTrainer` is RecBole's :class:`~recbole.trainer.Trainer` with

* weights-only checkpoints (docs/environment.md): the best model is saved as plain tensors and numbers
  and reloaded with ``torch.load(weights_only=True)``;
* resumable training: after every evaluation the full training state (model, optimizer,
  early-stopping state, RNG states of torch and of the training dataloader) is written to
  ``<saved_model_file>-last.pth``; ``resume_checkpoint(path)`` continues from it and gives the
  same result as an uninterrupted run with the same seed;
* checkpoints that know their data: the dataset's name and numbers of users and items are
  stored, and resuming or loading a checkpoint on other data is a clear error instead of a
  tensor size mismatch (or, worse, a silent run on the wrong items);
* the evaluation option ``eval_mask_history`` (docs/metrics.md): in sequential full ranking,
  the items of the input sequence are excluded from the ranking (STOSA's and PAtt's protocol).
  RecBole does not do this; it is off by default.
"""

import json

import numpy as np
import torch
from recbole.trainer import Trainer
from torch.nn.parallel import DistributedDataParallel

from recbole_attn import distributed
from recbole_attn.compat import CheckpointError, load_checkpoint, save_checkpoint
from recbole_attn.evaluator.collector import CategoryCollector
from recbole_attn.errors import ConfigError

CHECKPOINT_FORMAT = "recbole_attn-checkpoint-1"


def _plain_result(result):
    return None if result is None else {k: float(v) for k, v in result.items()}


def data_signature(dataset):
    """What a checkpoint records about its data: the dataset's name and its numbers of
    users and items (RecBole's ids, padding included)."""
    return {
        "dataset": str(dataset.dataset_name),
        "n_users": int(dataset.user_num),
        "n_items": int(dataset.item_num),
    }


def _describe(signature):
    return (
        f"{signature['dataset']!r} ({signature['n_users']} users, "
        f"{signature['n_items']} items)"
    )


class AttnTrainer(Trainer):
    r"""RecBole's Trainer with safe, resumable checkpoints and optional history masking."""

    def __init__(self, config, model, data=None):
        """``data``: :func:`data_signature` of the run's dataset, stored in every
        checkpoint and checked when one is loaded (None: not recorded, not checked)."""
        if distributed.is_distributed(config) and config["device"].type == "cpu":
            # RecBole wraps the model for GPU devices (device_ids=[local_rank]); a CPU
            # module is wrapped without device ids
            config["single_spec"] = True
            try:
                super().__init__(config, model)
            finally:
                config["single_spec"] = False
            self.distributed_model = DistributedDataParallel(self.model)
        else:
            super().__init__(config, model)
        # one file name for every process (RecBole's names hold each process's clock)
        self.saved_model_file = distributed.broadcast(self.saved_model_file, config)
        self.data_signature = data
        # collects the item->category table for CC / ILD / F1 (recbole_attn.evaluator)
        self.eval_collector = CategoryCollector(config)
        self.eval_mask_history = bool(config["eval_mask_history"])
        self.resume_file = self.saved_model_file[: -len(".pth")] + "-last.pth"
        self._train_generator = None
        self._pending_generator_state = None
        self.last_valid_result = None

    # ------------------------------------------------------------------ checkpoints
    def _state(self, epoch):
        # the user-given configuration, enough to rebuild config, data and model
        external = json.dumps(self.config.external_config_dict, default=str)
        return {
            "format": CHECKPOINT_FORMAT,
            "model": self.config["model"],
            "dataset": self.config["dataset"],
            "data": self.data_signature,
            "external_config_json": external,
            "epoch": int(epoch),
            "cur_step": int(self.cur_step),
            "best_valid_score": float(self.best_valid_score),
            "best_valid_result": _plain_result(self.best_valid_result),
            "saved_model_file": self.saved_model_file,
            "state_dict": self.model.state_dict(),
            "other_parameter": self.model.other_parameter(),
            "optimizer": self.optimizer.state_dict(),
        }

    def _save_checkpoint(self, epoch, verbose=True, **kwargs):
        """Save the best model (RecBole's hook), weights-only loadable."""
        if not distributed.is_main_process(self.config):
            return
        saved_model_file = kwargs.pop("saved_model_file", self.saved_model_file)
        save_checkpoint(self._state(epoch), saved_model_file)
        if verbose:
            self.logger.info(f"Saving current: {saved_model_file}")

    def _save_resume_state(self, epoch):
        if not distributed.is_main_process(self.config):
            return
        state = self._state(epoch)
        state["rng_torch"] = torch.get_rng_state()
        if self._train_generator is not None:
            state["rng_train_dataloader"] = self._train_generator.get_state()
        save_checkpoint(state, self.resume_file)

    def load_model_file(self, path):
        """Load the model weights of checkpoint ``path`` (its model and data checked
        against this run); returns the checkpoint."""
        checkpoint = load_checkpoint(path, map_location=self.device)
        if checkpoint.get("model", "").lower() != self.config["model"].lower():
            raise ConfigError(
                f"checkpoint {path} was trained with model {checkpoint.get('model')!r}, "
                f"not {self.config['model']!r}; pass --model={checkpoint.get('model')}"
            )
        saved, current = checkpoint.get("data"), self.data_signature
        if saved and current and saved != current:
            raise CheckpointError(
                f"checkpoint {path} was trained on {_describe(saved)}, but this run uses "
                f"{_describe(current)}; pass --dataset={saved['dataset']} (and its "
                "--data_path), or train a new model on this data"
            )
        self.model.load_state_dict(checkpoint["state_dict"])
        self.model.load_other_parameter(checkpoint.get("other_parameter"))
        return checkpoint

    def resume_checkpoint(self, resume_file):
        """Continue training from a checkpoint written by this trainer.

        Use the ``-last.pth`` file to continue exactly where training stopped; the best-model
        file restarts from the best epoch.
        """
        checkpoint = self.load_model_file(resume_file)
        self.start_epoch = checkpoint["epoch"] + 1
        self.cur_step = checkpoint["cur_step"]
        self.best_valid_score = checkpoint["best_valid_score"]
        self.best_valid_result = checkpoint.get("best_valid_result")
        self.saved_model_file = checkpoint.get("saved_model_file", str(resume_file))
        self.resume_file = str(resume_file)
        self.optimizer.load_state_dict(checkpoint["optimizer"])
        if "rng_torch" in checkpoint:
            torch.set_rng_state(checkpoint["rng_torch"])
        self._pending_generator_state = checkpoint.get("rng_train_dataloader")
        self.logger.info(
            f"Checkpoint loaded. Resume training from epoch {self.start_epoch}"
        )

    def fit(
        self,
        train_data,
        valid_data=None,
        verbose=True,
        saved=True,
        show_progress=False,
        callback_fn=None,
    ):
        if self.start_epoch >= self.epochs:
            # RecBole would save the resumed weights over the best model of the finished run
            raise ConfigError(
                f"the checkpoint has already trained {self.start_epoch} epochs and epochs "
                f"is {self.epochs}: nothing to train. Raise --epochs to continue, or "
                "evaluate the checkpoint with recbole_attn.quick_start.load_data_and_model"
            )
        self._train_generator = getattr(train_data, "generator", None)
        if self._pending_generator_state is not None and self._train_generator:
            self._train_generator.set_state(self._pending_generator_state)
            self._pending_generator_state = None

        def on_evaluated(epoch_idx, valid_score):
            if saved:
                self._save_resume_state(epoch_idx)
            if callback_fn is not None:
                callback_fn(epoch_idx, valid_score)

        return super().fit(
            train_data,
            valid_data,
            verbose=verbose,
            saved=saved,
            show_progress=show_progress,
            callback_fn=on_evaluated,
        )

    # ------------------------------------------------------------------ evaluation
    def _valid_epoch(self, valid_data, show_progress=False):
        valid_score, valid_result = super()._valid_epoch(valid_data, show_progress)
        # RecBole's callback only receives the score; tuning reports every metric
        self.last_valid_result = valid_result
        return valid_score, valid_result

    def _full_sort_batch_eval(self, batched_data):
        interaction, scores, positive_u, positive_i = super()._full_sort_batch_eval(
            batched_data
        )
        # sequential models only: RecBole already masks the history of general models
        if self.eval_mask_history and hasattr(self.model, "ITEM_SEQ"):
            # the target keeps its score even when it repeats an earlier item, so that a
            # repeat is still a reachable hit; every other item of the input is excluded
            target_scores = scores[positive_u, positive_i].clone()
            item_seq = interaction[self.model.ITEM_SEQ].to(scores.device)
            scores = scores.scatter(1, item_seq, -np.inf)
            scores[positive_u, positive_i] = target_scores
            scores[:, 0] = -np.inf
        return interaction, scores, positive_u, positive_i

    @torch.no_grad()
    def evaluate(
        self, eval_data, load_best_model=True, model_file=None, show_progress=False
    ):
        if not eval_data:
            return
        self.eval_collector.ensure_item_categories(eval_data)  # evaluate without fit
        if load_best_model:
            distributed.barrier(self.config)  # process 0 has written the file
            checkpoint_file = model_file or self.saved_model_file
            self.load_model_file(checkpoint_file)
            self.logger.info(
                f"Loading model structure and parameters from {checkpoint_file}"
            )
        return super().evaluate(
            eval_data, load_best_model=False, show_progress=show_progress
        )
