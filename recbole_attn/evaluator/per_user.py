"""Per-user results of one evaluation (``recbole-attn evaluate --per_user=FILE``, the
input of ``compare``; docs/compare.md): every evaluated user's token, target rank and
value of every metric that has one, computed by the evaluation's own metric objects, so
that each column's mean is the printed metric (file format:
:mod:`recbole_attn.per_user_file`)."""

import contextlib

import numpy as np
import torch

from recbole_attn.errors import ConfigError


class PerUserRecorder:
    """Records every full-ranking batch's users and target ranks, then the metrics'
    per-user values."""

    def __init__(self, trainer):
        self.trainer = trainer
        self.users, self.ranks, self.values = [], [], {}

    @contextlib.contextmanager
    def recording(self):
        collector, evaluator = self.trainer.eval_collector, self.trainer.evaluator
        collect, evaluate = collector.eval_batch_collect, evaluator.evaluate
        uid = self.trainer.config["USER_ID_FIELD"]

        def eval_batch_collect(scores, interaction, positive_u, positive_i):
            if len(positive_u) != len(scores) or not torch.equal(
                positive_u.cpu(), torch.arange(len(scores))
            ):
                raise ConfigError(
                    "per-user results need one target per user (a leave-one-out split, "
                    "eval_args split {'LS': 'valid_and_test'})"
                )
            target = scores[positive_u, positive_i].unsqueeze(1)
            self.ranks.append((1 + (scores > target).sum(dim=1)).cpu())
            self.users.append(interaction[uid].cpu())
            return collect(scores, interaction, positive_u, positive_i)

        def evaluate_struct(struct):
            self.values = per_user_values(evaluator, struct)
            return evaluate(struct)

        collector.eval_batch_collect = eval_batch_collect
        evaluator.evaluate = evaluate_struct
        try:
            yield self
        finally:
            collector.eval_batch_collect = collect
            evaluator.evaluate = evaluate

    def rows(self, dataset):
        users = torch.cat(self.users).numpy() if self.users else np.zeros(0, int)
        ranks = torch.cat(self.ranks).numpy() if self.ranks else np.zeros(0, int)
        tokens = dataset.field2id_token[dataset.uid_field][users]
        names = list(self.values)
        header = ["user", "rank"] + names
        rows = [
            [str(token), int(rank)] + [_cell(self.values[name][i]) for name in names]
            for i, (token, rank) in enumerate(zip(tokens, ranks))
        ]
        return header, rows


def _cell(value):
    return "" if np.isnan(value) else repr(float(value))


def per_user_values(evaluator, struct):
    """``{metric@k: [users] array}`` of every metric of ``evaluator`` with per-user
    values."""
    from recbole.evaluator.base_metric import TopkMetric

    out = {}
    for name, metric in evaluator.metric_class.items():
        topk = getattr(metric, "topk", None)
        if topk is None:
            continue
        topk = [topk] if isinstance(topk, int) else list(topk)
        if hasattr(metric, "per_user"):  # our category metrics
            rec_items, categories = metric.used_info(struct)
            matrix = metric.per_user(rec_items[:, : max(topk)], categories)
        elif isinstance(metric, TopkMetric):  # RecBole's top-K metrics
            pos_index, pos_len = metric.used_info(struct)
            takes = metric.metric_info.__code__.co_argcount - 1  # Hit, MRR: no pos_len
            matrix = metric.metric_info(*(pos_index, pos_len)[:takes])
        elif hasattr(metric, "get_pop") or hasattr(metric, "get_tail"):
            # RecBole's AveragePopularity, TailPercentage: a value per list position
            item_matrix, counts = metric.used_info(struct)
            convert = getattr(metric, "get_pop", None) or metric.get_tail
            matrix = metric.metric_info(convert(item_matrix, counts))
        else:
            continue  # dataset-level (ItemCoverage, GiniIndex, ShannonEntropy, ...)
        matrix = np.asarray(matrix, dtype=np.float64)
        for k in topk:
            out[f"{name}@{k}"] = matrix[:, k - 1]
    return out
