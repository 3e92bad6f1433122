"""
recbole_attn.evaluator.collector
################################

The category metadata hook (docs/metrics.md): RecBole's metrics only receive the config and a
:class:`~recbole.evaluator.collector.DataStruct`, so the item→category table reaches them
through the evaluation collector. :class:`CategoryCollector` is RecBole's
:class:`~recbole.evaluator.collector.Collector` (patched by :mod:`recbole_attn.host`) that, when a requested metric needs it, also
stores ``data.item_categories``: a LongTensor ``[n_items, max_categories]``, row = internal
item id, category token ids zero-padded (how RecBole stores a ``token_seq`` feature).
:class:`~recbole_attn.trainer.AttnTrainer` uses it for every model, ours or RecBole's.
"""

from recbole.evaluator.collector import Collector

from recbole_attn.data.categories import (
    check_category_field,
    check_category_field_loads,
    item_category_table,
)
from recbole_attn.evaluator.metrics import ITEM_CATEGORIES, needs_item_categories


def _metrics_who(metrics):
    """The subject of a category-field message: which ``metrics`` need the field."""
    if not metrics:
        return "the collector needs"
    if len(metrics) == 1:
        return f"metric {metrics[0]} needs"
    return f"metrics {', '.join(metrics)} need"


#: what a user without categories does instead
_WITHOUT_CATEGORIES = "remove CC, ILD and F1 from metrics"


def check_metrics_category_field(config, dataset, metrics=None):
    """:func:`~recbole_attn.data.categories.check_category_field` for the metrics that
    need categories (``metrics``, default: those of ``config['metrics']``)."""
    if metrics is None:
        metrics = needs_item_categories(config["metrics"])
    who = _metrics_who(metrics)
    return check_category_field(config, dataset, who, _WITHOUT_CATEGORIES)


def check_metrics_category_field_loads(config, metrics=None):
    """Before the dataset loads: the metrics that need categories (``metrics``, default:
    those of ``config['metrics']``) will get them
    (:func:`~recbole_attn.data.categories.check_category_field_loads`)."""
    if metrics is None:
        metrics = needs_item_categories(config["metrics"])
    if metrics:
        who = _metrics_who(metrics)
        check_category_field_loads(config, who, _WITHOUT_CATEGORIES)


def collected_item_categories(config, dataset):
    """What the collector stores under ``data.item_categories`` for the metrics of
    ``config`` that need it: the item→category table of ``dataset``
    (:func:`~recbole_attn.data.categories.item_category_table`), its field checked first
    (:func:`check_metrics_category_field`)."""
    field = check_metrics_category_field(config, dataset)
    return item_category_table(dataset, field)


def _dataset_of(data):
    """The RecBole Dataset of a dataloader (or ``data`` itself)."""
    dataset = getattr(data, "_dataset", None)
    if dataset is None:
        dataset = getattr(data, "dataset", data)
    return dataset


def collect_item_categories(collector, data):
    """Store the item->category table of ``data`` (a dataloader or dataset) in a RecBole
    ``Collector`` as ``data.item_categories`` (a tensor, so that RecBole's
    ``get_data_struct`` can move and copy it) when one of its metrics needs it.
    :mod:`recbole_attn.host` calls it from every ``Collector.data_collect``, RecBole's
    trainers' included."""
    if collector.register.need(ITEM_CATEGORIES):
        table = collected_item_categories(collector.config, _dataset_of(data))
        collector.data_struct.set(ITEM_CATEGORIES, table)


class CategoryCollector(Collector):
    """RecBole's Collector (which collects ``data.item_categories``:
    :func:`collect_item_categories`; its ``get_data_struct`` keeps the non-tensor values
    of RecBole's own metrics: :func:`recbole_attn.recbole_bugs.collector_data_struct`)
    that can also collect it without ``fit``."""

    def ensure_item_categories(self, data):
        """Collect the table from ``data`` (a dataloader or dataset) if a metric needs it
        and it was not collected yet (evaluation without ``fit``)."""
        if ITEM_CATEGORIES not in self.data_struct:
            collect_item_categories(self, data)
