"""
recbole_attn.data.categories
############################

The item -> category table of a dataset and its validation (docs/metrics.md), for everything that
reads categories: the CC / ILD / F1 metrics (through the evaluation collector) and DPAtt's
category kernel. The category field is a ``token_seq`` item feature whose name is
``category_field`` (default ``categories``; ``class`` for ml-100k).
"""

import os

import numpy as np
import torch
from recbole.utils import FeatureSource, FeatureType

from recbole_attn.errors import CategoryFieldError

DEFAULT_CATEGORY_FIELD = "categories"


def category_field_name(config):
    """``config['category_field']``, ``categories`` if unset."""
    try:
        field = config["category_field"]
    except KeyError:
        field = None
    return field or DEFAULT_CATEGORY_FIELD


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
    return field in [column.split(":")[0] for column in _header_columns(path)]


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


def _header_columns(path, sep="\t", encoding="utf-8"):
    """Column names (``name:type``) in the header line of an atomic file."""
    with open(path, encoding=encoding) as f:
        header = f.readline().rstrip("\r\n")
    return [c for c in header.split(sep) if c]


def _item_file_columns(config):
    """Column names (``name:type``) in the header of the dataset's ``.item`` file, or None
    if there is no such file."""
    dataset = config["dataset"]
    path = os.path.join(config["data_path"] or "", f"{dataset}.item")
    if not os.path.isfile(path):
        return None, path
    sep = config["field_separator"] or "\t"
    return _header_columns(path, sep, config["encoding"] or "utf-8"), path


def _missing_field_hint(config, field, alternative):
    item_fields = config["ITEM_ID_FIELD"] or "item_id"
    columns, path = _item_file_columns(config)
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
    if isinstance(load_col, dict) and field not in (load_col.get("item") or []):
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


def check_category_field_loads(config, who, alternative):
    """Before the dataset loads: the ``category_field`` will be loaded as a ``token_seq``
    item feature (it is a ``token_seq`` column of the ``.item`` file, and ``load_col`` /
    ``unload_col`` keep it), or a :class:`CategoryFieldError` saying what to change.
    (:func:`check_category_field` checks the loaded dataset.)"""
    field = category_field_name(config)
    columns, _ = _item_file_columns(config)
    types = dict(c.split(":", 1) for c in columns or [] if ":" in c)
    if field not in loaded_fields(config, "item", types):
        inter = os.path.join(config["data_path"] or "", f"{config['dataset']}.inter")
        inter_columns = _header_columns(inter) if os.path.isfile(inter) else []
        raise CategoryFieldError(
            f"{who} the item category field {field!r} (category_field), but dataset "
            f"{config['dataset']!r} will not load it (its interaction fields: "
            f"{[c.split(':')[0] for c in inter_columns]}). To fix: "
            + _missing_field_hint(config, field, alternative)
        )
    if types[field] != "token_seq":
        raise CategoryFieldError(
            f"category_field {field!r} has type {types[field]}; {who} a token_seq field "
            f"(declare the column as '{field}:token_seq' in the .item header; one "
            "category per item is fine)"
        )
    return field


def check_category_field(config, dataset, who, alternative):
    """Return the category field of ``dataset`` or raise :class:`CategoryFieldError` with
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
        raise CategoryFieldError(
            f"{who} the item category field {field!r} (category_field), but dataset "
            f"{config['dataset']!r} has no such field. Loaded item fields: {item_fields}; "
            f"all loaded fields: {list(field2type)}. To fix: "
            + _missing_field_hint(config, field, alternative)
        )
    if dataset.field2source.get(field) != FeatureSource.ITEM:
        raise CategoryFieldError(
            f"category_field {field!r} is a {dataset.field2source.get(field).value} "
            "field; it must be an item feature (a column of the .item file)"
        )
    if field2type[field] != FeatureType.TOKEN_SEQ:
        raise CategoryFieldError(
            f"category_field {field!r} has type {field2type[field].value}; {who} a "
            f"token_seq field (declare the column as '{field}:token_seq' in the .item "
            "header; one category per item is fine)"
        )
    if dataset.num(field) <= 1:
        raise CategoryFieldError(
            f"category field {field!r} of dataset {config['dataset']!r} holds no category"
        )
    return field


def item_category_table(dataset, field):
    """LongTensor ``[n_items, max_categories]``: row = internal item id, the item's
    category token ids, zero-padded; all zeros for uncategorized items."""
    iid_field = dataset.iid_field
    n_items = dataset.item_num
    feat = dataset.item_feat
    if feat is None or field not in feat:
        return torch.zeros(n_items, 1, dtype=torch.long)
    if isinstance(feat[field], torch.Tensor):  # Interaction (after dataset.build())
        values = feat[field].long()
        if values.dim() == 1:
            values = values.unsqueeze(1)
        ids = feat[iid_field].long()
    else:  # pandas DataFrame (before build): one array of token ids per row
        rows = [np.asarray(v, dtype=np.int64).reshape(-1) for v in feat[field]]
        width = max([len(r) for r in rows] + [1])
        values = torch.zeros(len(rows), width, dtype=torch.long)
        for r, v in enumerate(rows):
            values[r, : len(v)] = torch.from_numpy(v)
        ids = torch.as_tensor(np.asarray(feat[iid_field], dtype=np.int64))
    table = torch.zeros(n_items, max(1, values.shape[1]), dtype=torch.long)
    table[ids] = values
    return table
