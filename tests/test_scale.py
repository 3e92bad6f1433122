"""What large catalogues rely on: the synthetic Zipf datasets of the scale benchmark
(``experiments.synthetic.write_zipf_dataset``) and the memory bound of full-ranking
evaluation (``eval_scores_budget_mb``), which changes batch sizes, never results."""

import collections
import os

import numpy as np
import pytest

from experiments import synthetic
from recbole_attn.engine.quick_start import build, train_and_evaluate


def _read(path):
    with open(path) as f:
        header = next(f).rstrip("\n").split("\t")
        return header, [line.rstrip("\n").split("\t") for line in f]


def test_zipf_dataset_has_its_shape(tmp_path):
    folder = synthetic.write_zipf_dataset(
        str(tmp_path), "z", n_users=3000, n_items=500, exponent=1.0, n_categories=7
    )
    header, rows = _read(os.path.join(folder, "z.inter"))
    assert header == ["user_id:token", "item_id:token", "timestamp:float"]
    per_user = collections.defaultdict(list)
    for user, item, time in rows:
        per_user[user].append((float(time), item))
    lengths = np.array([len(v) for v in per_user.values()])
    assert len(per_user) == 3000 and lengths.min() >= 5
    assert abs(lengths.mean() - synthetic.BEAUTY_MEAN_LENGTH) < 0.3
    for events in per_user.values():  # distinct items, strictly increasing times
        assert len({i for _, i in events}) == len(events)
        times = [t for t, _ in events]
        assert times == sorted(set(times))
    # the most drawn items are the most probable (each user draws an item once, so the
    # head is flatter than the Zipf probabilities themselves, tested below)
    counts = collections.Counter(i for _, i, _ in rows)
    top = [int(i[1:]) - 1 for i, _ in counts.most_common(5)]
    rng = np.random.default_rng(0)  # the generator's draws, in its order (seed 0)
    synthetic.sequence_lengths(3000, rng)
    probabilities = synthetic.zipf_popularity(500, 1.0, rng)
    assert set(top) <= set(np.argsort(-probabilities)[:10].tolist())
    header, items = _read(os.path.join(folder, "z.item"))
    assert header == ["item_id:token", "categories:token_seq"]
    assert [r[0] for r in items] == [f"i{k}" for k in range(1, 501)]
    assert all(1 <= len(set(r[1].split())) == len(r[1].split()) <= 3 for r in items)


def test_zipf_dataset_loads_with_its_whole_catalogue(tmp_path, tiny_config):
    synthetic.write_zipf_dataset(str(tmp_path), "z", n_users=200, n_items=3000)
    _, _, _, (train, _, _) = build(
        "SASRecAP",
        "z",
        config_dict={
            **tiny_config,
            "data_path": str(tmp_path),
            "load_col": {
                "inter": ["user_id", "item_id", "timestamp"],
                "item": ["item_id"],
            },
            "epochs": 1,
        },
    )
    assert train.dataset.item_num == 3001  # every listed item, drawn or not; padding
    assert train.dataset.user_num == 201


def test_zipf_popularity_is_zipf():
    p = synthetic.zipf_popularity(1000, 1.2, np.random.default_rng(3))
    assert abs(p.sum() - 1) < 1e-12
    ranked = np.sort(p)[::-1]
    ratios = ranked[0] / ranked[[1, 9, 99]]
    np.testing.assert_allclose(ratios, np.array([2, 10, 100]) ** 1.2)
    assert not np.all(np.diff(p) <= 0)  # ranks are shuffled over the ids


def test_impossible_lengths_are_refused(tmp_path):
    with pytest.raises(ValueError, match="need more than"):
        synthetic.write_zipf_dataset(str(tmp_path), "z", 10, 4, min_length=5)


def test_the_evaluation_budget_changes_batches_not_results(tiny_config):
    """A budget of a few users per batch: eval_batch_size is lowered, the metrics of the
    same trained model are those of one batch of every user."""
    config = {**tiny_config, "epochs": 1, "metrics": ["Recall", "NDCG", "MRR"]}
    results = {}
    for budget in (512, 0.001):
        cfg, net, trainer, data = build(
            "SASRecAP", "tiny", config_dict={**config, "eval_scores_budget_mb": budget}
        )
        done = train_and_evaluate(cfg, trainer, *data, saved=False)
        results[budget] = (cfg["eval_batch_size"], done)
    n_items = net.n_items
    small = max(1, int(0.001 * 2**20) // (4 * n_items))
    assert results[512][0] == config["eval_batch_size"] and results[0.001][0] == small
    assert small < 64
    assert results[512][1]["test_result"] == results[0.001][1]["test_result"]
