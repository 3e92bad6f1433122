"""
recbole_attn.evaluator
######################

Category-diversity metrics (CC, ILD, F1), their registration in RecBole's metric registry,
the collector hook that hands them the item→category table, and the check that the dataset
has that table before training starts. See ``docs/metrics.md``.
"""

from recbole_attn.errors import CategoryFieldError, MetricConfigError
from recbole_attn.data.categories import category_field_name, item_category_table
from recbole_attn.evaluator.collector import (
    CategoryCollector,
    check_metrics_category_field,
    check_metrics_category_field_loads,
)
from recbole_attn.evaluator.metrics import (
    CC,
    F1,
    ILD,
    ITEM_CATEGORIES,
    METRICS,
    CategoryMetric,
    category_multi_hot,
    coverage_per_user,
    f1_score,
    ild_per_user,
    needs_item_categories,
)


def register_metrics():
    """Register CC, ILD and F1 in RecBole's metric registry (idempotent).

    RecBole builds its registry once, at import, from the classes of
    ``recbole.evaluator.metrics``; ``Config`` (metric names and types), ``Evaluator``
    (metric classes) and the collector's ``Register`` (what to collect) read the dicts of
    ``recbole.evaluator.register``, some of them through names imported elsewhere. The dicts
    are therefore updated in place, never replaced, so that every importer sees the new
    entries. Call before the first ``Config()`` (``import recbole_attn`` does).
    """
    from recbole.evaluator import register

    for cls in METRICS:
        name = cls.__name__.lower()
        register.metrics_dict[name] = cls
        register.metric_types[name] = cls.metric_type
        register.metric_information[name] = list(cls.metric_need)
        if cls.smaller and name not in register.smaller_metrics:
            register.smaller_metrics.append(name)


def _check_metric_options(config):
    """The requested metrics that need item categories, after checking the options of
    ILD (``ild_distance``) and F1 (``f1_accuracy_metrics``, ``f1_diversity_metrics``).
    """
    metrics = needs_item_categories(config["metrics"])
    lowered = [m.lower() for m in metrics]
    if "ild" in lowered:
        ILD(config)  # checks ild_distance
    if "f1" in lowered:
        F1(config)  # checks f1_accuracy_metrics / f1_diversity_metrics
    return metrics


def check_metrics_before_loading(config):
    """What the requested metrics need that can be checked before the data loads, so
    that it fails in seconds: the options of ILD and F1, and a category field that will
    load (:func:`~recbole_attn.evaluator.collector.check_metrics_category_field_loads`).

    Raises:
        MetricConfigError: an invalid ``ild_distance`` or F1 component.
        CategoryFieldError: CC, ILD or F1 is requested and the category field will not
            load as an item feature.
    """
    check_metrics_category_field_loads(config, _check_metric_options(config))


def validate_dataset(config, dataset):
    """Check, before training, that ``dataset`` has what the requested metrics need.

    Raises:
        CategoryFieldError: CC, ILD or F1 is requested and the category field
            (``category_field``) is missing, not loaded, not an item feature or not a
            ``token_seq`` field.
        MetricConfigError: an invalid ``ild_distance`` or F1 component.
    """
    metrics = _check_metric_options(config)
    if metrics:
        check_metrics_category_field(config, dataset, metrics)


__all__ = [
    "CC",
    "ILD",
    "F1",
    "ITEM_CATEGORIES",
    "METRICS",
    "CategoryMetric",
    "CategoryCollector",
    "CategoryFieldError",
    "MetricConfigError",
    "category_field_name",
    "category_multi_hot",
    "check_metrics_before_loading",
    "check_metrics_category_field",
    "coverage_per_user",
    "f1_score",
    "ild_per_user",
    "item_category_table",
    "needs_item_categories",
    "register_metrics",
    "validate_dataset",
]
