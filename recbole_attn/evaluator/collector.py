"""
recbole_attn.evaluator.collector
################################

The item→category table that the category metrics (:mod:`recbole_attn.evaluator.
metrics`) read, and the check of its field (docs/metrics.md). RecBole's metrics receive
only the configuration and a ``DataStruct``, so the table reaches them through the
evaluation collector: when a requested metric needs it, the collector stores
``data.item_categories`` (:func:`collected_item_categories`), a LongTensor ``[n_items,
max_categories]``, row = internal item id, category token ids zero-padded (how RecBole
stores a ``token_seq`` feature). The category field is a ``token_seq`` item feature named
by ``category_field`` (default ``categories``; ``class`` for ml-100k).

The table itself is :mod:`recbole_attn.evaluator.item_categories`, what RecBole's
collector gets in the export; this module is the plugin's: the check of the field with
hints from the dataset's files (missing, not loaded by ``load_col``, not ``token_seq``),
called from every collector (:mod:`recbole_attn.evaluator`).
"""

import os

from recbole.utils import FeatureSource, FeatureType

from recbole_attn.evaluator.base_metric import ITEM_CATEGORIES
from recbole_attn.evaluator.item_categories import item_category_table

DEFAULT_CATEGORY_FIELD = "categories"


def category_field_name(config):
    """``config['category_field']``, ``categories`` if unset."""
    try:
        field = config["category_field"]
    except KeyError:
        field = None
    return field or DEFAULT_CATEGORY_FIELD


def header_columns(path, sep="\t", encoding="utf-8"):
    """The column names (``name:type``) in the header line of an atomic file."""
    with open(path, encoding=encoding) as f:
        header = f.readline().rstrip("\r\n")
    return [c for c in header.split(sep) if c]


def file_columns(config, source):
    """``(columns, path)``: the column names (``name:type``) in the header of the
    dataset's ``.<source>`` file (``item``, ``inter``; None if there is no such file),
    read with the dataset's separator and encoding, and its path."""
    dataset = config["dataset"]
    path = os.path.join(config["data_path"] or "", f"{dataset}.{source}")
    if not os.path.isfile(path):
        return None, path
    sep = config["field_separator"] or "\t"
    return header_columns(path, sep, config["encoding"] or "utf-8"), path


def missing_field_hint(config, field, alternative):
    """How to make ``field`` a loaded item feature, from the ``.item`` file's header and
    ``load_col`` / ``unload_col`` (``alternative``: what to do instead)."""
    item_fields = config["ITEM_ID_FIELD"] or "item_id"
    columns, path = file_columns(config, "item")
    load_col = config["load_col"]
    unload_col = config["unload_col"] or {}
    if columns is None:
        return (
            f"the dataset has no item file ({path}). Write one with a token_seq "
            f"category column ('{item_fields}:token' and '{field}:token_seq'), or "
            f"{alternative}."
        )
    names = [c.split(":")[0] for c in columns]
    if field not in names:
        seq = [c.split(":")[0] for c in columns if c.endswith(":token_seq")]
        hint = f"its token_seq columns: {seq}" if seq else "it has no token_seq column"
        return (
            f"{path} has no column {field!r} (columns: {columns}; {hint}). Set "
            "category_field to the item file's category column, e.g. "
            f"--category_field={seq[0] if seq else 'NAME'}"
        )
    if isinstance(load_col, dict) and "item" not in load_col:
        return (
            f"load_col does not load the item file (load_col: {load_col}). Add "
            f"`item: [{item_fields}, {field}]` to load_col (e.g. --load_col=\"{{'inter': "
            f"{load_col.get('inter')}, 'item': ['{item_fields}', '{field}']}}\")"
        )
    item_col = load_col.get("item") if isinstance(load_col, dict) else "*"
    if item_col != "*" and field not in (item_col or []):
        return (
            f"load_col loads the item file without {field!r} "
            f"(load_col['item']: {load_col['item']}). Add {field!r} to load_col['item']"
        )
    if isinstance(unload_col, dict) and field in (unload_col.get("item") or []):
        return f"unload_col['item'] removes {field!r}; remove it from unload_col"
    return (
        "check load_col / unload_col and the item file's header; the field was not "
        "loaded"
    )


def check_category_field(config, dataset, who, alternative):
    """Return the category field of ``dataset`` or raise a ``ValueError`` with
    what was expected, what exists and how to fix it.

    Args:
        who (str): who needs the categories, as the subject of the message (``"metric CC
            needs"``, ``"DPAtt needs"``).
        alternative (str): what the user can do instead (``"remove CC, ILD and F1 from
            metrics"``).
    """
    field = category_field_name(config)
    field2type = dataset.field2type
    if field not in field2type:
        item_fields = [
            f
            for f, src in dataset.field2source.items()
            if src in (FeatureSource.ITEM, FeatureSource.ITEM_ID)
        ]
        raise ValueError(
            f"{who} the item category field {field!r} (category_field), but dataset "
            f"{config['dataset']!r} has no such field. Loaded item fields: {item_fields}; "
            f"all loaded fields: {list(field2type)}. To fix: "
            + missing_field_hint(config, field, alternative)
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
    """The names (as given) of the metrics in ``metric_names`` that need item categories."""
    from recbole.evaluator.register import metric_information

    return [
        m
        for m in metric_names or []
        if ITEM_CATEGORIES in metric_information.get(str(m).lower(), ())
    ]


def metrics_who(metrics):
    """The subject of a category-field message: which ``metrics`` need the field."""
    if not metrics:
        return "the collector needs"
    if len(metrics) == 1:
        return f"metric {metrics[0]} needs"
    return f"metrics {', '.join(metrics)} need"


#: what a user without categories does instead
WITHOUT_CATEGORIES = "remove CC, ILD and F1 from metrics"


def check_metrics_category_field(config, dataset, metrics=None):
    """:func:`check_category_field` for the metrics that
    need categories (``metrics``, default: those of ``config['metrics']``)."""
    if metrics is None:
        metrics = needs_item_categories(config["metrics"])
    who = metrics_who(metrics)
    return check_category_field(config, dataset, who, WITHOUT_CATEGORIES)


def collected_item_categories(config, dataset):
    """What the collector stores under ``data.item_categories`` for the metrics of
    ``config`` that need it: the item→category table of ``dataset``
    (:func:`item_category_table`), its field checked first
    (:func:`check_metrics_category_field`)."""
    field = check_metrics_category_field(config, dataset)
    return item_category_table(dataset, field)
