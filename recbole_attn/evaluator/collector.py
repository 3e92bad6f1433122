"""The category field of a loaded dataset and its item→category table, as the category
metrics' collector needs them (docs/metrics.md); the checks that read the dataset's files,
with hints, are in :mod:`recbole_attn.data.fields`."""

from recbole.utils import FeatureSource, FeatureType

from recbole_attn.evaluator.base_metric import ITEM_CATEGORIES
from recbole_attn.evaluator.item_categories import item_category_table

DEFAULT_CATEGORY_FIELD = "categories"


def category_field_name(config):
    try:
        field = config["category_field"]
    except KeyError:
        field = None
    return field or DEFAULT_CATEGORY_FIELD


#: how to fix a category field where the dataset's files are not read
NOT_LOADED = (
    "check load_col / unload_col and the item file's header; the field was not loaded"
)


def check_category_field(config, dataset, who, alternative, hint=None):
    """The category field of ``dataset``, or a ``ValueError`` saying what ``who`` needs
    and (``hint``) how to fix it."""
    field = category_field_name(config)
    field2type = dataset.field2type
    if field not in field2type:
        item = (FeatureSource.ITEM, FeatureSource.ITEM_ID)
        item_fields = [f for f, src in dataset.field2source.items() if src in item]
        raise ValueError(
            f"{who} the item category field {field!r} (category_field), but dataset "
            f"{config['dataset']!r} has no such field. Loaded item fields: {item_fields}; "
            f"all loaded fields: {list(field2type)}. To fix: "
            + (hint(config, field, alternative) if hint else NOT_LOADED)
        )
    if dataset.field2source.get(field) != FeatureSource.ITEM:
        raise ValueError(
            f"category_field {field!r} is a {dataset.field2source.get(field).value} "
            "field; it must be an item feature (a column of the .item file)"
        )
    if field2type[field] != FeatureType.TOKEN_SEQ:
        raise ValueError(
            f"category_field {field!r} has type {field2type[field].value}; {who} a "
            f"token_seq field (declare the column as '{field}:token_seq' in the .item "
            "header; one category per item is fine)"
        )
    if dataset.num(field) <= 1:
        raise ValueError(
            f"category field {field!r} of dataset {config['dataset']!r} holds no category"
        )
    return field


def needs_item_categories(metric_names):
    from recbole.evaluator.register import metric_information

    return [
        m
        for m in metric_names or []
        if ITEM_CATEGORIES in metric_information.get(str(m).lower(), ())
    ]


def metrics_who(metrics):
    if not metrics:
        return "the collector needs"
    if len(metrics) == 1:
        return f"metric {metrics[0]} needs"
    return f"metrics {', '.join(metrics)} need"


#: what a user without categories does instead
WITHOUT_CATEGORIES = "remove CC, ILD and F1 from metrics"


def check_metrics_category_field(config, dataset, metrics=None, hint=None):
    if metrics is None:
        metrics = needs_item_categories(config["metrics"])
    who = metrics_who(metrics)
    return check_category_field(config, dataset, who, WITHOUT_CATEGORIES, hint)


def collected_item_categories(config, dataset, hint=None):
    """The table stored under ``data.item_categories``, its field checked first
    (``hint``: how to fix it, from the dataset's files)."""
    field = check_metrics_category_field(config, dataset, hint=hint)
    return item_category_table(dataset, field)
