"""
recbole_attn.engine.trainer
###########################

:class:`AttnTrainer` is RecBole's :class:`~recbole.trainer.Trainer` with

* weights-only checkpoints (docs/environment.md; their format, writing, reading and
  checks: :mod:`recbole_attn.engine.checkpoint`): the best model is saved as plain tensors and
  numbers and reloaded with ``torch.load(weights_only=True)``;
* run files no other run can take: the best model goes to
  ``<checkpoint_dir>/<model>-<time>-<token>.pth``, claimed by exclusive creation when the
  trainer is built (RecBole's ``<model>-<time>.pth`` is shared by runs started in the
  same second), and a run only ever reloads the file it wrote;
* resumable training: after every evaluation the full training state (model, optimizer,
  early-stopping state, RNG states of torch and of the training dataloader) is written to
  ``<saved_model_file>-last.pth``; ``resume_checkpoint(path)`` continues from it and gives the
  same result as an uninterrupted run with the same seed;
* checkpoints that know their data: the dataset's name and numbers of users and items are
  stored, and resuming or loading a checkpoint on other data is a clear error instead of a
  tensor size mismatch (or, worse, a silent run on the wrong items);
* the evaluation option ``eval_mask_history`` (docs/metrics.md): in sequential full ranking,
  the items of the input sequence are excluded from the ranking (STOSA's and PAtt's protocol).
  RecBole does not do this; it is off by default;
* the console's lines of a training (:class:`recbole_attn.engine.logs.EpochLines`).

:class:`LoadedTrainer` evaluates a loaded checkpoint (evaluate, recommend, viz): it
writes nothing and refuses to train.
"""

import time
from logging import getLogger

import numpy as np
import torch
from recbole.evaluator import Evaluator
from recbole.trainer import AbstractTrainer, Trainer
from recbole.utils import WandbLogger

from recbole_attn.engine import distributed
from recbole_attn.engine.checkpoint import (
    load_weights,
    non_finite_parameters,
    save_checkpoint,
    training_state,
)
from recbole_attn.evaluator import CategoryCollector
from recbole_attn.errors import ConfigError, TrainingError
from recbole_attn.files import (
    claim_file,
    release_if_empty,
    remove_stale_temporaries_in,
    run_stem,
)
from recbole_attn.engine.logs import EpochLines, epoch_lines_on_console


def check_learner(config, model):
    """``learner: sparse_adam`` (torch's ``SparseAdam``, which RecBole's trainer offers)
    only where every trained parameter is a sparse embedding: a dense gradient was a
    torch traceback in the first step."""
    if str(config["learner"]).lower() != "sparse_adam":
        return
    sparse = {
        id(m.weight)
        for m in model.modules()
        if isinstance(m, torch.nn.Embedding) and m.sparse
    }
    dense = [
        n
        for n, p in model.named_parameters()
        if p.requires_grad and id(p) not in sparse
    ]
    if dense:
        raise ConfigError(
            f"learner sparse_adam (torch's SparseAdam) trains sparse embeddings only, "
            f"and {config['model']} has dense parameters ({dense[0]}, {len(dense)} in "
            "all): use --learner=adam (or adamw)"
        )


class AttnTrainer(Trainer):
    r"""RecBole's Trainer with safe, resumable checkpoints and optional history masking."""

    def __init__(self, config, model, data=None):
        """``data``: :func:`~recbole_attn.engine.checkpoint.data_signature` of the run's
        dataset, stored in every checkpoint and checked when one is loaded (None: not
        recorded, not checked)."""
        check_learner(config, model)
        with distributed.wrapping_on_cpu(self, config):
            super().__init__(config, model)
        self.evaluator = distributed.exact_evaluator(self.evaluator, config)
        # a name no concurrent run can take, claimed by process 0 and shared by every
        # process (RecBole's name holds the second of each process's clock)
        if distributed.is_main_process(config):
            # what the writers of killed runs left half-written there
            remove_stale_temporaries_in(self.checkpoint_dir)
            self.saved_model_file = claim_file(
                self.checkpoint_dir, run_stem(config["model"]), ".pth"
            )
        self.saved_model_file = distributed.broadcast(self.saved_model_file, config)
        self.resume_file = self.saved_model_file[: -len(".pth")] + "-last.pth"
        self._init_evaluation(config, data)
        self._train_generator = None
        self._pending_generator_state = None
        self.last_valid_result = None
        self.epoch = None  # the epoch being trained
        # the last epoch's training losses and seconds of training and validation
        self.last_losses = None
        self.last_epoch_seconds = {"train": 0.0, "valid": 0.0}
        self.resume_epoch = None  # the epoch whose state the resume file holds
        self.last_evaluated_epoch = None  # of the last fit, None before its first

    def _init_evaluation(self, config, data):
        """What evaluation adds to RecBole's trainer: the data a loaded checkpoint must
        match, the category collector (CC / ILD / F1) and the history mask."""
        self.data_signature = data
        self.eval_collector = CategoryCollector(config)
        self.eval_mask_history = bool(config["eval_mask_history"])
        self._announced_file = None  # the checkpoint whose loading was last said

    # ------------------------------------------------------------------ checkpoints
    def _state(self, epoch):
        return training_state(self, epoch)

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
        self.resume_epoch = epoch

    def load_model_file(self, path):
        """Load the model weights of checkpoint ``path`` (its model and data checked
        against this run: :func:`~recbole_attn.engine.checkpoint.load_weights`); returns the
        checkpoint."""
        return load_weights(
            self.model, path, self.config["model"], self.data_signature, self.device
        )

    def use_model_file(self, path):
        """Make ``path`` (a checkpoint written by an earlier run) this trainer's model
        file; the file this trainer claimed is released if nothing was written to it."""
        if str(path) != self.saved_model_file:
            release_if_empty(self.saved_model_file)
        self.saved_model_file = str(path)

    def release(self):
        """Remove this trainer's claimed model file if no model was saved into it."""
        release_if_empty(self.saved_model_file)

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
        self.use_model_file(checkpoint.get("saved_model_file", str(resume_file)))
        self.resume_file = str(resume_file)
        self.optimizer.load_state_dict(checkpoint["optimizer"])
        if "rng_torch" in checkpoint:
            torch.set_rng_state(checkpoint["rng_torch"])
        self._pending_generator_state = checkpoint.get("rng_train_dataloader")
        # the console counts epochs from 1: the next one trained is start_epoch + 1
        self.logger.info(
            f"checkpoint {resume_file} loaded: training continues with epoch "
            f"{self.start_epoch + 1}/{self.epochs}"
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
                "evaluate its best model with recbole-attn evaluate "
                f"--model_file={self.saved_model_file}"
            )
        self._train_generator = getattr(train_data, "generator", None)
        if self._pending_generator_state is not None and self._train_generator:
            self._train_generator.set_state(self._pending_generator_state)
            self._pending_generator_state = None

        lines = EpochLines(self)
        self.last_evaluated_epoch = None

        def on_evaluated(epoch_idx, valid_score):
            self.last_evaluated_epoch = epoch_idx
            lines.evaluated(epoch_idx)
            if saved:
                self._save_resume_state(epoch_idx)
            if verbose:
                self.logger.info(lines.epoch_line(epoch_idx, valid_score))
            if callback_fn is not None:
                callback_fn(epoch_idx, valid_score)

        if verbose and valid_data:
            self.logger.info(lines.budget_line())
        with epoch_lines_on_console():
            result = super().fit(
                train_data,
                valid_data,
                verbose=verbose,
                saved=saved,
                show_progress=show_progress,
                callback_fn=on_evaluated,
            )
        if verbose and lines.last_epoch is not None:
            self.logger.info(lines.closing_line())
        return result

    def _train_epoch(self, train_data, epoch_idx, *args, **kwargs):
        self.epoch = epoch_idx
        started = time.monotonic()
        losses = super()._train_epoch(train_data, epoch_idx, *args, **kwargs)
        self._check_weights(epoch_idx)
        self.last_epoch_seconds["train"] = time.monotonic() - started
        self.last_losses = losses
        return losses

    def _check_nan(self, loss):
        """A non-finite training loss stops the run with what to change (RecBole raises
        a ValueError for NaN only)."""
        if not bool(torch.isfinite(loss).all()):
            raise TrainingError(
                f"the training loss became {float(loss.detach())} in epoch "
                f"{self.epoch + 1} "
                f"(learning_rate {self.config['learning_rate']}): lower --learning_rate "
                f"(or check the data); {self.saved_state_text()}"
            )

    def _check_weights(self, epoch_idx):
        """Weights that are no longer finite stop the run like a non-finite loss: an
        infinite step can leave a finite-looking loss and a model of NaN weights, whose
        metrics and recommendations would be numbers of nothing."""
        bad = non_finite_parameters(self.model)
        if bad:
            raise TrainingError(
                f"the model's weights became NaN or infinite in epoch {epoch_idx + 1} "
                f"({bad}; learning_rate {self.config['learning_rate']}): lower "
                f"--learning_rate (or check the data); {self.saved_state_text()}"
            )

    def saved_state_text(self):
        """What an interrupted or failed run leaves to resume from, epochs counted from
        1 as on the console."""
        if self.resume_epoch is None:
            return "nothing was saved (no evaluation had finished)"
        return (
            f"the state after epoch {self.resume_epoch + 1}/{self.epochs} is saved: "
            "continue with the same command and "
            f"--resume_checkpoint={self.resume_file}"
        )

    def interrupted_text(self, testing=False, saved=True):
        """One line for a run stopped by Ctrl-C or SIGTERM: where, what is saved and the
        command that continues or evaluates it (epochs counted as on the console)."""
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

    # ------------------------------------------------------------------ evaluation
    def _valid_epoch(self, valid_data, show_progress=False):
        started = time.monotonic()
        valid_score, valid_result = super()._valid_epoch(valid_data, show_progress)
        self.last_epoch_seconds["valid"] = time.monotonic() - started
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
            scores.scatter_(1, item_seq, -np.inf)  # in place: one [B, n_items] block
            scores[positive_u, positive_i] = target_scores
            scores[:, 0] = -np.inf
        return interaction, scores, positive_u, positive_i

    @torch.no_grad()
    def _map_reduce(self, result, num_sample):
        """The mean over every process's users (RecBole's averages rounded values,
        weighted by batches: :func:`recbole_attn.engine.distributed.combine_results`).
        """
        return distributed.gather_results(result, self.evaluator.users, self.config)

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
            if checkpoint_file != self._announced_file:
                # once per file (evaluate: validation, then test)
                self._announced_file = checkpoint_file
                self.logger.info(
                    f"Loading model structure and parameters from {checkpoint_file}"
                )
        return super().evaluate(
            eval_data, load_best_model=False, show_progress=show_progress
        )


class LoadedTrainer(AttnTrainer):
    """The trainer of a loaded checkpoint (evaluate, recommend, viz, per-user files):
    RecBole's ``Trainer.__init__`` as far as evaluation reads it, without its writes (a
    TensorBoard folder, the checkpoint folder) and without an optimizer. It claims no
    model file (:meth:`use_model_file` names the checkpoint) and trains nothing."""

    def __init__(self, config, model, data=None):
        AbstractTrainer.__init__(self, config, model)
        self.logger = getLogger()
        self.wandblogger = WandbLogger(config)
        self.device = config["device"]
        self.gpu_available = torch.cuda.is_available() and config["use_gpu"]
        self.test_batch_size = config["eval_batch_size"]
        self.evaluator = distributed.exact_evaluator(Evaluator(config), config)
        self.item_tensor = self.tot_item_num = None
        self.saved_model_file = self.resume_file = None
        self._init_evaluation(config, data)

    def fit(self, *args, **kwargs):
        raise TrainingError(
            "this trainer evaluates a loaded checkpoint and trains nothing; to continue "
            "the run that wrote it, in that run's own files, run with "
            "--resume_checkpoint=<its -last.pth file>"
        )

    resume_checkpoint = fit
