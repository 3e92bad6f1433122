"""Run by tests/test_upstream.py in a child process whose ``recbole`` package is a copy
with the metric export written into it: the exported CC, ILD and F1 give our values on
random top-K lists, and the exported collector function our item→category table; the
options' defaults are those the export writes into RecBole's overall.yaml.

    python upstream_metrics_equivalence.py DATA_PATH OPTIONS_JSON

RecBole's metrics are computed before ``recbole_attn`` is imported: importing it
registers our classes under the same names, which the exported AccDivF1 would then look
up.
"""

import json
import os
import sys

import torch
import yaml


def random_lists(seed=0, users=60, items=40, k=10):
    g = torch.Generator().manual_seed(seed)
    rec_items = torch.stack(
        [torch.randperm(items, generator=g)[:k] for _ in range(users)]
    )
    categories = torch.randint(0, 6, (items, 3), generator=g)
    categories[torch.rand(items, generator=g) < 0.15] = 0  # uncategorized items
    pos_index = (torch.rand(users, k, generator=g) < 0.15).long()
    pos_len = pos_index.sum(dim=1, keepdim=True) + torch.randint(
        1, 3, (users, 1), generator=g
    )
    return rec_items, categories, torch.cat([pos_index, pos_len], dim=1)


def values(module, data_struct_class):
    rec_items, categories, topk = random_lists()
    data = data_struct_class()
    data.set("rec.items", rec_items)
    data.set("rec.topk", topk)
    data.set("data.item_categories", categories)
    import recbole

    overall = os.path.join(os.path.dirname(recbole.__file__), "properties/overall.yaml")
    with open(overall, encoding="utf-8") as f:
        defaults = {
            k: v
            for k, v in yaml.safe_load(f).items()
            if k
            in (
                "ild_distance",
                "accdivf1_accuracy_metrics",
                "accdivf1_diversity_metrics",
            )
        }
    assert (
        len(defaults) == 3
    ), defaults  # the metrics' options in RecBole's overall.yaml
    base = {"topk": [1, 5, 10], "metric_decimal_place": 12, **defaults}
    variants = {
        "CC": base,
        "ILD cosine": base,
        "ILD jaccard": {**base, "ild_distance": "jaccard"},
        "AccDivF1": base,
        "AccDivF1 NDCG/CC": {
            **base,
            "accdivf1_accuracy_metrics": ["NDCG"],
            "accdivf1_diversity_metrics": ["CC"],
        },
    }
    out = {}
    for label, config in variants.items():
        metric = getattr(module, label.split()[0])(config)
        out[label] = metric.calculate_metric(data)
    return out


def main(data_path, options):
    import numpy as np

    # what RecBole's Config sets (np.float in its NDCG) and numpy 2 lacks; without
    # recbole_attn.host.compat, whose import would register our metrics
    for alias, builtin in (("float", float), ("int", int), ("bool", bool)):
        if not hasattr(np, alias):
            setattr(np, alias, builtin)
    import recbole.evaluator.metrics as theirs_module
    from recbole.evaluator.collector import DataStruct

    theirs = values(theirs_module, DataStruct)
    theirs_file = theirs_module.__file__

    import recbole_attn.evaluator.metrics as ours_module
    from recbole.evaluator import collector as their_collector

    from recbole_attn.evaluator.collector import collected_item_categories
    from recbole_attn.engine.quick_start import build

    ours = values(ours_module, DataStruct)
    config, _, _, (train, _, _) = build(
        "SASRecAP", "tiny", config_dict={"data_path": data_path, **options}
    )
    table_ours = collected_item_categories(config, train.dataset)
    table_theirs = their_collector.collected_item_categories(config, train.dataset)
    print(
        json.dumps(
            {
                "file": theirs_file,
                "collector_file": their_collector.__file__,
                "ours": ours,
                "theirs": theirs,
                "table_equal": bool(torch.equal(table_ours, table_theirs)),
                "table_categories": int((table_ours > 0).sum()),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], json.loads(sys.argv[2]))
