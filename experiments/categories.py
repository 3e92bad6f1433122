"""
recbole_attn.data.categories
############################

Whether a dataset has item categories, without loading it (for planning runs and
reports; docs/metrics.md). The category field is a ``token_seq`` item feature whose name
is ``category_field`` (default ``categories``; ``class`` for ml-100k). The check that it
will load: :func:`recbole_attn.data.checks.check_category_field_loads`; the table itself
and the check of a loaded dataset: :mod:`recbole_attn.evaluator.collector`.
"""

import os

from recbole_attn.evaluator.collector import DEFAULT_CATEGORY_FIELD, header_columns


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
