"""Category-diversity metrics of the top-K lists as RecBole metrics (docs/metrics.md), on
the item→category table ``data.item_categories``; exported into RecBole's ``metrics.py``.

Notation: ``R_u^K`` = the top-K items of user ``u``; ``c_i`` = the multi-hot category vector
of item ``i``; ``C`` = the set of distinct categories that occur in the item table.

* ``CC@K``  (category coverage) = mean_u |∪_{i ∈ R_u^K} c_i| / |C|.
* ``ILD@K`` (intra-list distance) = mean_u of mean_{i<j ∈ R_u^K} (1 − sim(c_i, c_j)), where
  ``sim`` is the cosine ``|c_i ∩ c_j| / sqrt(|c_i| |c_j|)`` (``ild_distance: cosine``,
  default) or Jaccard ``|c_i ∩ c_j| / |c_i ∪ c_j|`` (``jaccard``), over pairs of categorized
  items; a user without one (always at K = 1) is left out of the mean, ILD@K = 0 if all are.
* ``AccDivF1@K`` = 2·a·d / (a + d), the harmonic mean (not of precision and recall) of the
  dataset-level means a of the accuracy metrics (``accdivf1_accuracy_metrics``, default ``[Recall,
  NDCG]``) and d of the diversity metrics (``accdivf1_diversity_metrics``, default ``[CC, ILD]``)
  at the same K, which AccDivF1 computes itself (they need not be in ``metrics``)."""

import numpy as np
import torch
from recbole.evaluator.base_metric import AbstractMetric
from recbole.utils import EvaluatorType

from recbole_attn.evaluator.base_metric import ITEM_CATEGORIES, CategoryMetric

ILD_DISTANCES = ("cosine", "jaccard")

#: upper bound on the number of floats of one ``[users, K, categories]`` block
_BLOCK_FLOATS = 1 << 24


def category_multi_hot(item_categories):
    """Zero-padded token ids ``[n_items, max_categories]`` -> bool multi-hot ``[n_items,
    n_categories]`` over the categories that occur."""
    table = torch.as_tensor(item_categories, dtype=torch.long).cpu()
    if table.dim() == 1:
        table = table.unsqueeze(1)
    width = int(table.max()) + 1 if table.numel() else 1
    hot = torch.zeros(table.shape[0], width, dtype=torch.bool)
    hot.scatter_(1, table, True)
    hot = hot[:, 1:]  # token 0 is padding
    return hot[:, hot.any(dim=0)]


def _blocks(n_users, k, n_categories):
    step = max(1, _BLOCK_FLOATS // max(1, k * n_categories))
    for start in range(0, n_users, step):
        yield slice(start, min(n_users, start + step))


def compact_category_table(item_categories):
    """Renumber the category ids of the table to ``1..C`` (0 = padding), ``C`` = number of
    distinct categories that occur; returns ``(table, C)``."""
    table = torch.as_tensor(item_categories, dtype=torch.long).cpu()
    if table.dim() == 1:
        table = table.unsqueeze(1)
    present = torch.unique(table[table > 0])
    compact = torch.searchsorted(present, table) + 1
    return torch.where(table > 0, compact, torch.zeros_like(table)), present.numel()


def coverage_per_user(rec_items, item_categories):
    """CC@k of every user for k = 1..K: a float64 array ``[n_users, K]``."""
    table, n_categories = compact_category_table(item_categories)
    rec_items = torch.as_tensor(rec_items, dtype=torch.long).cpu()
    n_users, k = rec_items.shape
    if n_categories == 0 or n_users == 0:
        return np.zeros((n_users, k))
    top = table[rec_items]  # [U, K, L] category ids of the recommended items
    position = torch.arange(k).view(1, k, 1).expand_as(top)
    user = torch.arange(n_users).view(n_users, 1, 1)
    # rank at which each (user, category) first appears; K = never
    first = torch.full((n_users * (n_categories + 1),), k, dtype=torch.long)
    first.scatter_reduce_(
        0, (user * (n_categories + 1) + top).reshape(-1), position.reshape(-1), "amin"
    )
    first = first.view(n_users, n_categories + 1)[:, 1:]  # drop padding
    new = torch.zeros(n_users, k + 1, dtype=torch.float64)
    new.scatter_add_(1, first, torch.ones(first.shape, dtype=torch.float64))
    # categories that have appeared within the first k items, for every k
    return new[:, :k].cumsum(dim=1).numpy() / n_categories


def ild_per_user(rec_items, item_categories, distance="cosine"):
    """ILD@k of every user for k = 1..K: a float64 array ``[n_users, K]``, NaN where the
    user's top-k has no pair of two categorized items."""
    distance = checked_distance(distance)
    hot = category_multi_hot(item_categories)
    rec_items = torch.as_tensor(rec_items, dtype=torch.long).cpu()
    n_users, k = rec_items.shape
    out = np.full((n_users, k), np.nan)
    if hot.shape[1] == 0:
        return out
    upper = torch.ones(k, k, dtype=torch.bool).triu(diagonal=1)  # pairs i < j
    for rows in _blocks(n_users, k, hot.shape[1]):
        # float32 is exact here: the entries are category counts
        top = hot[rec_items[rows]].float()  # [u, K, C]
        inter = (top @ top.transpose(1, 2)).double()  # |c_i ∩ c_j|
        size = top.sum(dim=2).double()  # |c_i|
        s_i, s_j = size.unsqueeze(2), size.unsqueeze(1)
        valid = (s_i > 0) & (s_j > 0) & upper
        if distance == "cosine":
            denom = torch.sqrt(s_i * s_j)
        else:
            denom = s_i + s_j - inter
        sim = inter / denom.clamp_min(1e-12)
        dist = torch.where(valid, 1.0 - sim, torch.zeros_like(sim))
        # pairs within the first k items: columns j < k of the upper triangle
        total = dist.sum(dim=1).cumsum(dim=1)
        count = valid.sum(dim=1).cumsum(dim=1)
        value = total / count.clamp_min(1).double()
        value[count == 0] = float("nan")
        out[rows] = value.numpy()
    return out


def f1_score(a_values, d_values):
    """F1 = 2·a·d / (a + d) with a = mean(a_values) (accuracy) and d = mean(d_values)
    (diversity); 0 when a + d = 0.

    >>> round(f1_score([0.1293, 0.0803], [0.0510, 0.7363]), 4)  # PAtt Table 2
    0.1655
    """
    a = float(np.mean(list(a_values)))
    d = float(np.mean(list(d_values)))
    return 0.0 if a + d == 0 else 2.0 * a * d / (a + d)


class CC(CategoryMetric):
    r"""Category coverage: the share of the dataset's categories found in the top-K list.

    .. math::
        \mathrm{CC@K} = \frac{1}{|U|} \sum_{u \in U}
        \frac{\left|\bigcup_{i \in R_u^K} c_i\right|}{|C|}
    """

    def per_user(self, rec_items, item_categories):
        return coverage_per_user(rec_items, item_categories)


class ILD(CategoryMetric):
    r"""Intra-list distance of the top-K list on multi-hot category vectors.

    .. math::
        \mathrm{ILD@K} = \frac{1}{|U'|} \sum_{u \in U'} \frac{1}{|P_u|}
        \sum_{(i, j) \in P_u} \left(1 - \mathrm{sim}(c_i, c_j)\right)

    :math:`P_u` = pairs :math:`i<j` of :math:`R_u^K` whose items both have categories,
    :math:`U'` = users with :math:`P_u \neq \emptyset`. ``ild_distance``: ``cosine``
    (default) or ``jaccard``.
    """

    def __init__(self, config):
        super().__init__(config)
        self.distance = ild_distance(config)

    def per_user(self, rec_items, item_categories):
        return ild_per_user(rec_items, item_categories, self.distance)


def ild_distance(config):
    """``ild_distance`` (``cosine``, the default, or ``jaccard``); a ``ValueError``
    for any other."""
    return checked_distance(str(config["ild_distance"]).lower())


def checked_distance(distance):
    """``distance`` if it is one of :data:`ILD_DISTANCES`; a ``ValueError`` else."""
    if distance not in ILD_DISTANCES:
        raise ValueError(
            f"ild_distance must be one of {list(ILD_DISTANCES)}, got {distance!r}"
        )
    return distance


def f1_components(config):
    """``(accuracy, diversity)`` metric names (lower case) AccDivF1 combines; a
    ``ValueError`` for an empty option or a name that is no top-K metric it can compute.
    """
    from recbole.evaluator.register import metric_information, metrics_dict

    def names(key):
        value = config[key]
        if isinstance(value, str):
            value = [value]
        if not value:
            raise ValueError(f"{key} must name at least one metric")
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"{key} must be a metric name or a list of them")
        for name in map(str, value):
            metric = name.lower()
            if metric not in metrics_dict or issubclass(metrics_dict[metric], AccDivF1):
                raise ValueError(
                    f"F1 component {name!r} is not a usable metric; use top-K metrics "
                    "such as Recall, NDCG, Hit, MRR, Precision (accuracy) or CC, ILD "
                    "(diversity)"
                )
            missing = set(metric_information[metric]) - set(AccDivF1.metric_need)
            if missing or metrics_dict[metric].metric_type != EvaluatorType.RANKING:
                raise ValueError(
                    f"F1 component {name!r} needs {sorted(missing)}, which AccDivF1 does "
                    f"not collect; F1 components must be top-K metrics computed from "
                    f"{AccDivF1.metric_need}"
                )
        return [name.lower() for name in map(str, value)]

    return names("accdivf1_accuracy_metrics"), names("accdivf1_diversity_metrics")


class AccDivF1(AbstractMetric):
    r"""Harmonic mean of accuracy and diversity, from dataset-level means (PAtt's F1).

    .. math::
        \mathrm{AccDivF1@K} = \frac{2ad}{a+d}, \quad
        a = \mathrm{mean}(\mathrm{Recall@K}, \mathrm{NDCG@K}), \quad
        d = \mathrm{mean}(\mathrm{CC@K}, \mathrm{ILD@K})

    The metrics that enter ``a`` and ``d`` are set by ``accdivf1_accuracy_metrics`` and
    ``accdivf1_diversity_metrics`` (any top-K metric computed from ``rec.topk``, ``rec.items`` or
    the category table, e.g. ``[NDCG]`` and ``[CC]`` for PAtt's Table 3). The components are
    computed here, unrounded, whether or not they are in ``metrics``.
    """

    metric_type = EvaluatorType.RANKING
    metric_need = ["rec.items", "rec.topk", ITEM_CATEGORIES]
    smaller = False

    def __init__(self, config):
        super().__init__(config)
        self.topk = config["topk"]
        accuracy, diversity = f1_components(config)
        self.accuracy = [self._component(config, key) for key in accuracy]
        self.diversity = [self._component(config, key) for key in diversity]

    @staticmethod
    def _component(config, key):
        from recbole.evaluator.register import metrics_dict

        metric = metrics_dict[key](config)
        metric.decimal_place = 15  # F1 uses unrounded component values
        return key, metric

    @staticmethod
    def _component_values(component, dataobject, topk):
        key, metric = component
        if isinstance(metric, CategoryMetric):
            return metric.values(dataobject)
        result = metric.calculate_metric(dataobject)
        return {k: float(result[f"{key}@{k}"]) for k in topk}

    def calculate_metric(self, dataobject):
        acc = [self._component_values(c, dataobject, self.topk) for c in self.accuracy]
        div = [self._component_values(c, dataobject, self.topk) for c in self.diversity]
        name = type(self).__name__.lower()
        result = {}
        for k in self.topk:
            value = f1_score([v[k] for v in acc], [v[k] for v in div])
            result[f"{name}@{k}"] = round(value, self.decimal_place)
        return result
