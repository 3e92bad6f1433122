"""
recbole_attn.data.categories
############################

A dataset's item categories before it loads (docs/metrics.md), for everything that reads
them: the CC / ILD / F1 metrics and DPAtt's category kernel. The category field is a
``token_seq`` item feature whose name is ``category_field`` (default ``categories``;
``class`` for ml-100k). The table itself and the check of a loaded dataset:
:mod:`recbole_attn.evaluator.collector`.
"""

import os

from recbole_attn.errors import CategoryFieldError
from recbole_attn.evaluator.collector import (
    DEFAULT_CATEGORY_FIELD,
    category_field_name,
    header_columns,
    item_file_columns,
    missing_field_hint,
)


def dataset_folder(dataset, data_path):
    """The folder RecBole reads ``dataset`` from: ``<data_path>/<dataset>``, except ml-100k,
    which RecBole always reads from its bundled copy (``recbole/dataset_example``)."""
    if dataset == "ml-100k":
        import recbole

        root = os.path.join(os.path.dirname(recbole.__file__), "dataset_example")
        return os.path.join(root, dataset)
    return os.path.join(data_path, dataset)


def dataset_has_categories(dataset, data_path, dataset_yaml=None):
    """Whether ``dataset`` has item categories, without building it (for planning runs
    and reports): the ``category_field`` of its yaml (``dataset_yaml``: the shipped
    ``properties/dataset/<dataset>.yaml``, if any; ``~`` there means "none published", as for
    Office) names a column of the dataset's ``.item`` file. Where the dataset's files are
    not on this machine, the yaml's word alone (a report of runs made elsewhere)."""
    field, declared = DEFAULT_CATEGORY_FIELD, False
    if dataset_yaml and os.path.isfile(dataset_yaml):
        import yaml

        with open(dataset_yaml) as f:
            settings = yaml.safe_load(f) or {}
        if "category_field" in settings and not settings["category_field"]:
            return False
        declared = bool(settings.get("category_field"))
        field = settings.get("category_field") or field
    folder = dataset_folder(dataset, data_path)
    path = os.path.join(folder, f"{dataset}.item")
    if not os.path.isfile(path):
        return declared and not os.path.isfile(os.path.join(folder, f"{dataset}.inter"))
    return field in [column.split(":")[0] for column in header_columns(path)]


def loaded_fields(config, source, fields):
    """The ``fields`` of a file (``source``: inter, item, user) that RecBole loads:
    ``load_col[source]`` (``'*'``: all of them; a file ``load_col`` does not name: none;
    no ``load_col``: all), less ``unload_col[source]``."""
    load_col, unload_col = config["load_col"], config["unload_col"]
    names = list(fields)
    if isinstance(load_col, dict) and load_col.get(source) != "*":
        names = [n for n in names if n in (load_col.get(source) or [])]
    if isinstance(unload_col, dict):
        names = [n for n in names if n not in (unload_col.get(source) or [])]
    return names


def check_category_field_loads(config, who, alternative):
    """Before the dataset loads: the ``category_field`` will be loaded as a ``token_seq``
    item feature (it is a ``token_seq`` column of the ``.item`` file, and ``load_col`` /
    ``unload_col`` keep it), or a :class:`CategoryFieldError` saying what to change.
    (:func:`~recbole_attn.evaluator.collector.check_category_field` checks the loaded
    dataset.)"""
    field = category_field_name(config)
    columns, _ = item_file_columns(config)
    types = dict(c.split(":", 1) for c in columns or [] if ":" in c)
    if field not in loaded_fields(config, "item", types):
        inter = os.path.join(config["data_path"] or "", f"{config['dataset']}.inter")
        inter_columns = header_columns(inter) if os.path.isfile(inter) else []
        raise CategoryFieldError(
            f"{who} the item category field {field!r} (category_field), but dataset "
            f"{config['dataset']!r} will not load it (its interaction fields: "
            f"{[c.split(':')[0] for c in inter_columns]}). To fix: "
            + missing_field_hint(config, field, alternative)
        )
    if types[field] != "token_seq":
        raise CategoryFieldError(
            f"category_field {field!r} has type {types[field]}; {who} a token_seq field "
            f"(declare the column as '{field}:token_seq' in the .item header; one "
            "category per item is fine)"
        )
    return field
