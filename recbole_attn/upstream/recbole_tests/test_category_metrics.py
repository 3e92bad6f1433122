"""CC, ILD and AccDivF1 (recbole.evaluator.metrics) against direct loops over the
recommended lists, and the collector that hands them the item categories
(data.item_categories)."""

import math
import os
import sys
import unittest

sys.path.append(os.getcwd())
import torch
from recbole.config import Config
from recbole.data import create_dataset, data_preparation
from recbole.evaluator.collector import Collector, DataStruct
from recbole.evaluator.register import metric_information, metrics_dict
from recbole.utils import init_seed

current_path = os.path.dirname(os.path.realpath(__file__))
TOPK = [1, 2, 3]
# item -> category ids (0: padding); item 0 is the padding item, item 5 has none
item_categories = torch.tensor(
    [[0, 0], [1, 0], [1, 2], [3, 0], [2, 3], [0, 0], [4, 1], [2, 2]]
)
rec_items = torch.tensor([[1, 2, 3], [2, 4, 6], [5, 1, 6], [3, 5, 7], [5, 5, 5]])
pos_index = torch.tensor(
    [[1, 0, 0], [0, 0, 1], [0, 0, 0], [0, 1, 0], [0, 0, 0]], dtype=torch.long
)
pos_len = torch.tensor([[1], [2], [1], [3], [1]])


def config_with(**options):
    return Config(
        "BPR",
        "ml-1m",
        config_dict={"topk": TOPK, "metric_decimal_place": 12, **options},
    )


def data_struct():
    data = DataStruct()
    data.set("rec.items", rec_items)
    data.set("rec.topk", torch.cat([pos_index, pos_len], dim=1))
    data.set("data.item_categories", item_categories)
    return data


def categories(item):
    return {int(c) for c in item_categories[item] if c > 0}


ALL = set().union(*(categories(i) for i in range(len(item_categories))))


def cc(k):
    return sum(
        len(set().union(*(categories(i) for i in row[:k].tolist()))) / len(ALL)
        for row in rec_items
    ) / len(rec_items)


def ild(k, distance):
    values = []
    for row in rec_items.tolist():
        sets = [categories(i) for i in row[:k]]
        pairs = [(a, b) for x, a in enumerate(sets) for b in sets[x + 1 :] if a and b]
        if not pairs:
            continue  # no pair of two categorized items: the user is left out
        sims = [
            (
                len(a & b) / math.sqrt(len(a) * len(b))
                if distance == "cosine"
                else len(a & b) / len(a | b)
            )
            for a, b in pairs
        ]
        values.append(sum(1 - s for s in sims) / len(pairs))
    return sum(values) / len(values) if values else 0.0


def recall(k):
    return sum(
        sum(hits[:k]) / n for hits, n in zip(pos_index.tolist(), pos_len[:, 0].tolist())
    ) / len(pos_index)


def ndcg(k):
    total = 0.0
    for hits, n in zip(pos_index.tolist(), pos_len[:, 0].tolist()):
        dcg = sum(h / math.log2(r + 2) for r, h in enumerate(hits[:k]))
        idcg = sum(1 / math.log2(r + 2) for r in range(min(n, k)))
        total += dcg / idcg
    return total / len(pos_index)


class TestCategoryMetrics(unittest.TestCase):
    def assert_values(self, name, result, expected):
        for k in TOPK:
            self.assertAlmostEqual(result[f"{name}@{k}"], expected(k), places=10)

    def test_registered_with_the_category_table(self):
        for name in ("cc", "ild", "accdivf1"):
            self.assertIn(name, metrics_dict)
            self.assertIn("data.item_categories", metric_information[name])

    def test_cc(self):
        result = metrics_dict["cc"](config_with()).calculate_metric(data_struct())
        self.assert_values("cc", result, cc)

    def test_ild_cosine_and_jaccard(self):
        for distance in ("cosine", "jaccard"):
            config = config_with(ild_distance=distance)
            result = metrics_dict["ild"](config).calculate_metric(data_struct())
            self.assert_values("ild", result, lambda k: ild(k, distance))

    def test_ild_rejects_an_unknown_distance(self):
        with self.assertRaises(ValueError):
            metrics_dict["ild"](config_with(ild_distance="euclid"))

    def test_the_options_default_in_overall_yaml(self):
        config = config_with()
        self.assertEqual(config["category_field"], "categories")
        self.assertEqual(config["ild_distance"], "cosine")
        self.assertEqual(config["accdivf1_accuracy_metrics"], ["Recall", "NDCG"])
        self.assertEqual(config["accdivf1_diversity_metrics"], ["CC", "ILD"])

    def test_accdivf1(self):
        config = config_with()
        result = metrics_dict["accdivf1"](config).calculate_metric(data_struct())

        def f1(k):
            a = (recall(k) + ndcg(k)) / 2
            d = (cc(k) + ild(k, "cosine")) / 2
            return 2 * a * d / (a + d)

        self.assert_values("accdivf1", result, f1)

    def test_accdivf1_components(self):
        config = config_with(
            accdivf1_accuracy_metrics=["NDCG"], accdivf1_diversity_metrics=["CC"]
        )
        result = metrics_dict["accdivf1"](config).calculate_metric(data_struct())
        self.assert_values(
            "accdivf1", result, lambda k: 2 * ndcg(k) * cc(k) / (ndcg(k) + cc(k))
        )
        with self.assertRaises(ValueError):
            metrics_dict["accdivf1"](config_with(accdivf1_accuracy_metrics=["AUC"]))


def category_config(**options):
    return Config(
        "BPR",
        "test",
        config_dict={
            "data_path": os.path.join(current_path, "../test_data/"),
            "metrics": ["Recall", "CC"],
            "category_field": "class",
            "load_col": {
                "inter": ["user_id", "item_id"],
                "item": ["item_id", "class"],
            },
            "state": "ERROR",
            **options,
        },
    )


def train_data_of(config):
    """The training data RecBole's Trainer hands the collector (``data_collect``):
    that of ``data_preparation``, whose dataset is built."""
    init_seed(config["seed"], config["reproducibility"])
    dataset = create_dataset(config)
    train_data, _, _ = data_preparation(config, dataset)
    return train_data


class TestCategoryCollector(unittest.TestCase):
    def test_collector_gives_every_item_its_categories(self):
        config = category_config()
        train_data = train_data_of(config)
        collector = Collector(config)
        collector.data_collect(train_data)
        table = collector.get_data_struct().get("data.item_categories")
        dataset = train_data.dataset
        self.assertEqual(table.shape[0], dataset.item_num)
        # tests/test_data/test/test.item: 1 Toy Story, 2 GoldenEye
        for token, genres in (
            ("1", {"Animation", "Children's", "Comedy"}),
            ("2", {"Action", "Adventure", "Thriller"}),
        ):
            row = table[dataset.token2id("item_id", token)]
            self.assertEqual(set(dataset.id2token("class", row[row > 0])), genres)
        self.assertFalse(table[0].any())  # the padding item has no category

    def test_a_missing_category_field_is_a_clear_error(self):
        config = category_config(category_field="genre")
        train_data = train_data_of(config)
        with self.assertRaisesRegex(ValueError, "genre"):
            Collector(config).data_collect(train_data)


if __name__ == "__main__":
    unittest.main()
