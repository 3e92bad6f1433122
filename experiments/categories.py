"""Whether a dataset has item categories, without loading it: for planning the studies'
runs (``experiments/runner.py``, ``experiments/speed.py``) and their reports. A run
itself checks its category field before its data loads (docs/metrics.md). The category
field is a ``token_seq`` item feature whose name is ``category_field`` (default
``categories``; ``class`` for ml-100k). The check that it will load:
:func:`recbole_attn.data.fields.check_category_field_loads`, and of a loaded dataset:
:mod:`recbole_attn.data.fields`; the table itself: :mod:`recbole_attn.evaluator.collector`.
"""

import os

from recbole_attn.engine.config import properties_dir
from recbole_attn.data.fields import header_columns
from recbole_attn.evaluator.collector import DEFAULT_CATEGORY_FIELD
from recbole_attn.files import read_yaml


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
        settings = read_yaml(dataset_yaml) or {}
        if "category_field" in settings and not settings["category_field"]:
            return False
        declared = bool(settings.get("category_field"))
        field = settings.get("category_field") or field
    folder = dataset_folder(dataset, data_path)
    path = os.path.join(folder, f"{dataset}.item")
    if not os.path.isfile(path):
        return declared and not os.path.isfile(os.path.join(folder, f"{dataset}.inter"))
    return field in [column.split(":")[0] for column in header_columns(path)]


def has_categories(dataset, data_path):
    """Whether ``dataset`` (read as RecBole reads it from ``data_path``) has item
    categories: the ``category_field`` of the dataset yaml we ship (``~`` for a dataset
    published without categories, as Office) names a column of its ``.item`` file (a
    model with ``needs_item_categories`` cannot run where this is False)."""
    dataset_yaml = os.path.join(properties_dir(), "dataset", f"{dataset}.yaml")
    return dataset_has_categories(dataset, data_path, dataset_yaml)
