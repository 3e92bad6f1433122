"""The one reader of atomic-file headers, and the category field's checks with hints
from the dataset's files, before the data loads and after."""

import os

from recbole_attn.errors import CategoryFieldError
from recbole_attn.evaluator import check_metric_options
from recbole_attn.evaluator.collector import (
    NOT_LOADED,
    category_field_name,
    check_metrics_category_field,
    needs_item_categories,
)


def header_columns(path, separator="\t", encoding="utf-8"):
    with open(path, encoding=encoding) as f:
        return f.readline().rstrip("\r\n").split(separator)


def file_columns(config, source):
    path = os.path.join(config["data_path"] or "", f"{config['dataset']}.{source}")
    if not os.path.isfile(path):
        return None, path
    sep, encoding = config["field_separator"] or "\t", config["encoding"] or "utf-8"
    return [c for c in header_columns(path, sep, encoding) if c], path


def loaded_fields(config, source, fields):
    """The ``fields`` of a file that ``load_col`` and ``unload_col`` let RecBole load."""
    load_col, unload_col = config["load_col"], config["unload_col"]
    names = list(fields)
    if isinstance(load_col, dict) and load_col.get(source) != "*":
        names = [n for n in names if n in (load_col.get(source) or [])]
    if isinstance(unload_col, dict):
        names = [n for n in names if n not in (unload_col.get(source) or [])]
    return names


def missing_field_hint(config, field, alternative):
    """How to make ``field`` a loaded item feature (``alternative``: what to do instead)."""
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
    return NOT_LOADED


def check_category_field_loads(config, who, alternative, headers):
    """Before the data loads: ``category_field`` will load as a ``token_seq`` item
    feature, or a :class:`CategoryFieldError`."""
    field = category_field_name(config)
    types = headers.get("item", {})
    if field not in loaded_fields(config, "item", types):
        raise CategoryFieldError(
            f"{who} the item category field {field!r} (category_field), but dataset "
            f"{config['dataset']!r} will not load it (its interaction fields: "
            f"{list(headers.get('inter', []))}). To fix: "
            + missing_field_hint(config, field, alternative)
        )
    if types[field] != "token_seq":
        raise CategoryFieldError(
            f"category_field {field!r} has type {types[field]}; {who} a token_seq field "
            f"(declare the column as '{field}:token_seq' in the .item header; one "
            "category per item is fine)"
        )
    return field


def check_loaded_categories(config, dataset):
    """After the data loads: the metrics' category field holds categories."""
    metrics = needs_item_categories(config["metrics"])
    if metrics:
        try:
            check_metrics_category_field(config, dataset, metrics, missing_field_hint)
        except ValueError as error:
            raise CategoryFieldError(str(error)) from None


def validate_dataset(config, dataset):
    check_metric_options(config)
    check_loaded_categories(config, dataset)
