"""The item→category table the category metrics read; exported into RecBole's
``collector.py``, whose ``Collector.data_collect`` stores
:func:`collected_item_categories` under ``data.item_categories``."""

import torch
from recbole.utils import FeatureSource, FeatureType


def item_category_table(dataset, field):
    """LongTensor ``[n_items, max_categories]``: row = internal item id, the item's
    category token ids, zero-padded; all zeros for uncategorized items. ``dataset`` is
    a built one (``dataset.build()``, which RecBole's ``data_preparation`` calls): its
    ``item_feat`` an ``Interaction``, as the Trainer's ``train_data.dataset`` is."""
    iid_field = dataset.iid_field
    n_items = dataset.item_num
    feat = dataset.item_feat
    if feat is None or field not in feat:
        return torch.zeros(n_items, 1, dtype=torch.long)
    values = feat[field].long()
    if values.dim() == 1:
        values = values.unsqueeze(1)
    ids = feat[iid_field].long()
    table = torch.zeros(n_items, max(1, values.shape[1]), dtype=torch.long)
    table[ids] = values
    return table


def collected_item_categories(config, dataset):
    """The table of ``category_field``; a ``ValueError`` when it is not a loaded
    ``token_seq`` item feature."""
    field = config["category_field"]
    if (
        dataset.field2source.get(field) != FeatureSource.ITEM
        or dataset.field2type.get(field) != FeatureType.TOKEN_SEQ
    ):
        raise ValueError(
            f"category_field [{field}] must be a token_seq feature of the .item file, "
            "loaded by load_col"
        )
    return item_category_table(dataset, field)
