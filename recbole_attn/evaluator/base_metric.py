"""The base of the category metrics and the name of the item→category table in RecBole's
``DataStruct``; exported into RecBole's ``base_metric.py``."""

import numpy as np
from recbole.evaluator.base_metric import AbstractMetric
from recbole.utils import EvaluatorType

#: where the collector stores the item→category table (``[n_items, max_categories]``)
ITEM_CATEGORIES = "data.item_categories"


class CategoryMetric(AbstractMetric):
    """Base of the category metrics: a top-K RANKING metric on ``rec.items`` and the item
    category table; bigger is better."""

    metric_type = EvaluatorType.RANKING
    metric_need = ["rec.items", ITEM_CATEGORIES]
    smaller = False

    def __init__(self, config):
        super().__init__(config)
        self.topk = config["topk"]  # a list: RecBole's Config makes an int one

    def used_info(self, dataobject):
        return dataobject.get("rec.items"), dataobject.get(ITEM_CATEGORIES)

    def per_user(self, rec_items, item_categories):
        """``[n_users, max(topk)]`` values for k = 1..max(topk) (NaN = user left out)."""
        raise NotImplementedError

    def values(self, dataobject):
        """Unrounded dataset-level values ``{k: value}`` for every k in ``topk``."""
        rec_items, item_categories = self.used_info(dataobject)
        per_user = self.per_user(rec_items[:, : max(self.topk)], item_categories)
        result = {}
        for k in self.topk:
            column = per_user[:, k - 1]
            column = column[~np.isnan(column)]
            result[k] = float(column.mean()) if column.size else 0.0
        return result

    def calculate_metric(self, dataobject):
        name = type(self).__name__.lower()
        return {
            f"{name}@{k}": round(v, self.decimal_place)
            for k, v in self.values(dataobject).items()
        }
