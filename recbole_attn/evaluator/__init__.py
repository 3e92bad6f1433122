"""Category-diversity metrics (CC, ILD, F1) in the plugin. ``base_metric``, ``metrics``
and ``item_categories`` hold what RecBole's evaluator would (``recbole-attn
export-upstream`` copies them); this module adds what only the plugin does: the
registration (with the options' defaults and ``F1``, the name PAtt gives ``AccDivF1``),
the collector hook under every trainer, and the metrics' checks as one-line errors
(docs/metrics.md)."""

from recbole.evaluator import register
from recbole.evaluator.collector import Collector

from recbole_attn.errors import CategoryFieldError, MetricConfigError
from recbole_attn.evaluator.base_metric import ITEM_CATEGORIES, CategoryMetric  # noqa
from recbole_attn.evaluator.collector import (  # noqa: F401 (the package's API)
    WITHOUT_CATEGORIES,
    category_field_name,
    check_metrics_category_field,
    collected_item_categories,
    item_category_table,
    metrics_who,
    needs_item_categories,
)
from recbole_attn.evaluator import metrics as _metrics
from recbole_attn.evaluator.metrics import (  # noqa: F401 (the package's API)
    category_multi_hot,
    coverage_per_user,
    f1_score,
    ild_per_user,
)

#: the defaults of the metrics' options (RecBole's ``overall.yaml`` in the export; the
#: plugin's metrics read them where the configuration lacks the key)
METRIC_DEFAULTS = {
    "category_field": "categories",
    "ild_distance": "cosine",
    "accdivf1_accuracy_metrics": ["Recall", "NDCG"],
    "accdivf1_diversity_metrics": ["CC", "ILD"],
}
#: the plugin's earlier names of AccDivF1's options (read where the new ones are unset)
METRIC_ALIASES = {
    "accdivf1_accuracy_metrics": "f1_accuracy_metrics",
    "accdivf1_diversity_metrics": "f1_diversity_metrics",
}


class _WithDefaults:
    """A configuration whose metric options default to :data:`METRIC_DEFAULTS`."""

    def __init__(self, config):
        self.config = config

    def _get(self, key):
        try:
            return self.config[key]
        except KeyError:
            return None

    def __getitem__(self, key):
        value = self._get(key)
        if value is None and key in METRIC_ALIASES:
            value = self._get(METRIC_ALIASES[key])
        return METRIC_DEFAULTS.get(key) if value is None else value

    def __contains__(self, key):
        return key in METRIC_DEFAULTS or key in self.config


def with_metric_defaults(config):
    return config if isinstance(config, _WithDefaults) else _WithDefaults(config)


class CC(_metrics.CC):
    __doc__ = _metrics.CC.__doc__


class ILD(_metrics.ILD):
    __doc__ = _metrics.ILD.__doc__

    def __init__(self, config):
        super().__init__(with_metric_defaults(config))


class AccDivF1(_metrics.AccDivF1):
    __doc__ = _metrics.AccDivF1.__doc__

    def __init__(self, config):
        super().__init__(with_metric_defaults(config))


class F1(AccDivF1):
    """``AccDivF1`` under the name PAtt's tables give it (``f1@K``)."""


#: the metrics registered in RecBole by :func:`register_metrics`
METRICS = (CC, ILD, AccDivF1, F1)


def register_metrics():
    """Register CC, ILD and F1 in RecBole's registry, its dicts updated in place
    (idempotent)."""
    for cls in METRICS:
        name = cls.__name__.lower()
        register.metrics_dict[name] = cls
        register.metric_types[name] = cls.metric_type
        register.metric_information[name] = list(cls.metric_need)
        if cls.smaller and name not in register.smaller_metrics:
            register.smaller_metrics.append(name)


def check_metric_options(config):
    """Check ``ild_distance`` and F1's components; ``(who needs them, what to do
    instead)`` when a metric needs categories."""
    metrics = needs_item_categories(config["metrics"])
    need = (metrics_who(metrics), WITHOUT_CATEGORIES) if metrics else None
    lowered = [m.lower() for m in metrics]
    config = with_metric_defaults(config)
    try:
        f1 = {"f1", "accdivf1"} & set(lowered)
        components = sum(_metrics.f1_components(config), []) if f1 else []
        if "ild" in lowered + components:
            _metrics.ild_distance(config)
    except ValueError as error:
        raise MetricConfigError(str(error)) from None
    return need


def _dataset_of(data):
    dataset = getattr(data, "_dataset", None)
    return getattr(data, "dataset", data) if dataset is None else dataset


def collect_item_categories(collector, data, hint=None):
    """Store the item→category table in a ``Collector`` when one of its metrics needs
    it (``hint``: how to fix a missing field, from the dataset's files)."""
    if collector.register.need(ITEM_CATEGORIES):
        try:
            table = collected_item_categories(collector.config, _dataset_of(data), hint)
        except ValueError as error:
            raise CategoryFieldError(str(error)) from None
        collector.data_struct.set(ITEM_CATEGORIES, table)


class CategoryCollector(Collector):
    """RecBole's Collector that can also collect the table without ``fit``."""

    def ensure_item_categories(self, data):
        if ITEM_CATEGORIES not in self.data_struct:
            collect_item_categories(self, data)
