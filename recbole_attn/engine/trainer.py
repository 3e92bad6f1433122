"""RecBole's ``Trainer`` with safe checkpoints, resuming, NaN checks, ``eval_mask_history``
and a line per epoch; :class:`LoadedTrainer` evaluates a loaded checkpoint."""

import time
from logging import getLogger

import numpy as np
import torch
from recbole.evaluator import Evaluator
from recbole.trainer import AbstractTrainer, Trainer
from recbole.utils import WandbLogger

from recbole_attn.engine import distributed
from recbole_attn.engine.checkpoint import CheckpointMixin, non_finite_parameters
from recbole_attn.evaluator import CategoryCollector
from recbole_attn.errors import ConfigError, TrainingError
from recbole_attn.files import claim_file, remove_stale_temporaries_in, run_stem
from recbole_attn.engine.logs import EpochLines, console_off


def check_learner(config, model):
    """``learner: sparse_adam`` only where every trained parameter is sparse."""
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


class AttnTrainer(CheckpointMixin, Trainer):
    """RecBole's Trainer with safe, resumable checkpoints and history masking."""

    def __init__(self, config, model, data=None):
        """``data``: the run's data signature, checked against checkpoints."""
        check_learner(config, model)
        with distributed.wrapping_on_cpu(self, config):
            super().__init__(config, model)
        self.evaluator = distributed.exact_evaluator(self.evaluator, config)
        # a name no concurrent run can take, claimed by process 0 and shared by all
        if distributed.is_main_process(config):
            # what killed runs' writers left half-written there
            remove_stale_temporaries_in(self.checkpoint_dir)
            self.saved_model_file = claim_file(
                self.checkpoint_dir, run_stem(config["model"]), ".pth"
            )
        self.saved_model_file = distributed.broadcast(self.saved_model_file, config)
        self.resume_file = self.saved_model_file[: -len(".pth")] + "-last.pth"
        self._init_evaluation(config, data)
        self._train_generator = self._pending_generator_state = None
        self.last_valid_result = None
        self.epoch = None  # the epoch being trained
        # the last epoch's training losses and seconds of training and validation
        self.last_losses = None
        self.last_epoch_seconds = {"train": 0.0, "valid": 0.0}
        self.resume_epoch = None  # the epoch whose state the resume file holds
        self.best_valid_epoch = None  # 0-based; kept by checkpoints for a resume
        self.last_evaluated_epoch = None  # of the last fit, None before its first

    def _init_evaluation(self, config, data):
        """The data signature, category collector and history mask."""
        self.data_signature = data
        self.eval_collector = CategoryCollector(config)
        self.eval_mask_history = bool(config["eval_mask_history"])
        self._announced_file = None  # the checkpoint whose loading was last said

    def fit(
        self,
        train_data,
        valid_data=None,
        verbose=True,
        saved=True,
        show_progress=False,
        callback_fn=None,
    ):
        self.check_epochs_left()
        self._train_generator = getattr(train_data, "generator", None)
        if self._pending_generator_state is not None and self._train_generator:
            self._train_generator.set_state(self._pending_generator_state)
            self._pending_generator_state = None

        lines = EpochLines(self)
        self.last_evaluated_epoch = None

        def on_evaluated(epoch_idx, valid_score):
            self.last_evaluated_epoch = epoch_idx
            if self.cur_step == 0:  # RecBole's early stopping: a new best
                self.best_valid_epoch = epoch_idx
            lines.evaluated(epoch_idx)
            if saved:
                self._save_resume_state(epoch_idx)
            if verbose:
                self.logger.info(lines.epoch_line(epoch_idx, valid_score))
            if callback_fn is not None:
                callback_fn(epoch_idx, valid_score)

        if verbose and valid_data:
            self.logger.info(lines.budget_line())
        try:
            with console_off("epochs"):
                result = super().fit(
                    train_data,
                    valid_data,
                    verbose=verbose,
                    saved=saved,
                    show_progress=show_progress,
                    callback_fn=on_evaluated,
                )
        finally:  # RecBole never closes it; a later write reopens it
            self.tensorboard.close()
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
        if not bool(torch.isfinite(loss).all()):
            raise TrainingError(
                f"the training loss became {float(loss.detach())} in epoch "
                f"{self.epoch + 1} (learning_rate {self.config['learning_rate']}): "
                f"lower --learning_rate (or check the data); {self.saved_state_text()}"
            )

    def _check_weights(self, epoch_idx):
        if bad := non_finite_parameters(self.model):
            raise TrainingError(
                f"the model's weights became NaN or infinite in epoch {epoch_idx + 1} "
                f"({bad}; learning_rate {self.config['learning_rate']}): lower "
                f"--learning_rate (or check the data); {self.saved_state_text()}"
            )

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
            # every input item excluded but the target (a repeat stays a reachable hit)
            target_scores = scores[positive_u, positive_i].clone()
            item_seq = interaction[self.model.ITEM_SEQ].to(scores.device)
            scores.scatter_(1, item_seq, -np.inf)  # in place: one [B, n_items] block
            scores[positive_u, positive_i] = target_scores
            scores[:, 0] = -np.inf
        return interaction, scores, positive_u, positive_i

    @torch.no_grad()
    def _map_reduce(self, result, num_sample):
        """The exact mean over every process's users."""
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
    """A loaded checkpoint's trainer: evaluates, writes and trains nothing."""

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
