"""Tests of the category metrics (CC, ILD, F1), their registration in RecBole, the category
collector hook and the missing-category-field error (docs/metrics.md)."""

import math
import os
import shutil
from itertools import combinations

import numpy as np
import pytest
import torch
from recbole.evaluator.collector import DataStruct

import recbole_attn
from recbole_attn.evaluator import (
    CC,
    F1,
    ILD,
    CategoryCollector,
    CategoryFieldError,
    MetricConfigError,
    category_multi_hot,
    check_metric_options,
    f1_score,
    register_metrics,
)
from recbole_attn.errors import RecboleAttnError
from recbole_attn.engine.quick_start import (
    build,
    load_data_and_model,
    run,
)

# the first Config registers the metrics; tests that build none need them registered too
# (alone, this file failed: F1 found no CC among RecBole's metrics)
register_metrics()

# --------------------------------------------------------------------------- hand-built data
# item -> categories; token 4 is deliberately unused (|C| counts categories that occur:
# {1, 2, 3, 5} -> 4), item 4 is uncategorized, item 6 repeats a token, row 0 = padding
CATS = {0: set(), 1: {1, 2}, 2: {2}, 3: {3}, 4: set(), 5: {1, 2, 5}, 6: {3}}
TABLE = torch.tensor(
    [[0, 0, 0], [1, 2, 0], [2, 0, 0], [3, 0, 0], [0, 0, 0], [1, 2, 5], [3, 3, 0]]
)
N_CATS = 4
# top-5 lists (K = 5 > 4 categories)
REC = torch.tensor([[1, 2, 3, 4, 5], [4, 3, 2, 1, 5], [2, 4, 6, 5, 1]])
# rank of each user's single target item in its list (None = not in the top 5)
TARGET_RANK = [1, 3, None]
TOPK = [1, 2, 3, 5]


def hand_cc(rec, k):
    return np.mean(
        [len(set().union(*(CATS[i] for i in row[:k]))) / N_CATS for row in rec]
    )


def hand_distance(a, b, kind):
    inter = len(a & b)
    if kind == "cosine":
        return 1 - inter / math.sqrt(len(a) * len(b))
    return 1 - inter / len(a | b)


def hand_ild(rec, k, kind="cosine"):
    per_user = []
    for row in rec:
        pairs = [
            hand_distance(CATS[i], CATS[j], kind)
            for i, j in combinations(row[:k], 2)
            if CATS[i] and CATS[j]
        ]
        if pairs:  # users without a valid pair are left out
            per_user.append(np.mean(pairs))
    return float(np.mean(per_user)) if per_user else 0.0


def hand_recall_ndcg(k):
    hits = [r is not None and r <= k for r in TARGET_RANK]
    ndcg = [
        1 / math.log2(r + 1) if r is not None and r <= k else 0 for r in TARGET_RANK
    ]
    return np.mean(hits), np.mean(ndcg)


def datastruct():
    ds = DataStruct()
    ds.set("rec.items", REC.clone())
    ds.set("data.item_categories", TABLE.clone())
    pos = torch.zeros(len(REC), max(TOPK) + 1, dtype=torch.long)
    for u, r in enumerate(TARGET_RANK):
        if r is not None:
            pos[u, r - 1] = 1
    pos[:, -1] = 1  # one positive item per user
    ds.set("rec.topk", pos)
    return ds


@pytest.fixture(autouse=True)
def numpy_aliases():
    """RecBole's own metrics (Recall, NDCG, used by F1) need the numpy aliases (np.float,
    ...) that every RecBole ``Config()`` installs; the dict configs below bypass Config.
    """
    from recbole_attn.host.compat import set_numpy_aliases

    set_numpy_aliases()


def metric_config(**extra):
    return {"topk": TOPK, "metric_decimal_place": 10, **extra}


# --------------------------------------------------------------------------- pure metrics
def test_hand_values_are_what_was_computed_on_paper():
    # guards the reference implementation above against a shared mistake
    assert hand_cc(REC.tolist(), 3) == pytest.approx((3 / 4 + 2 / 4 + 2 / 4) / 3)
    assert hand_cc(REC.tolist(), 5) == 1.0
    # ILD@2: only user 0 has a pair (items 1, 2): 1 - 1/sqrt(2)
    assert hand_ild(REC.tolist(), 2) == pytest.approx(1 - 1 / math.sqrt(2))
    assert hand_ild(REC.tolist(), 1) == 0.0


def test_multi_hot_counts_occurring_categories_and_dedups():
    hot = category_multi_hot(TABLE)
    assert hot.shape == (7, N_CATS)
    assert hot.sum(dim=1).tolist() == [len(CATS[i]) for i in range(7)]


def test_cc_matches_hand_computation():
    result = CC(metric_config()).calculate_metric(datastruct())
    assert set(result) == {f"cc@{k}" for k in TOPK}
    for k in TOPK:
        assert result[f"cc@{k}"] == pytest.approx(hand_cc(REC.tolist(), k), abs=1e-9)
    assert result["cc@5"] == 1.0  # K larger than the number of categories: capped


@pytest.mark.parametrize("kind", ["cosine", "jaccard"])
def test_ild_matches_hand_computation(kind):
    result = ILD(metric_config(ild_distance=kind)).calculate_metric(datastruct())
    for k in TOPK:
        expected = hand_ild(REC.tolist(), k, kind)
        assert result[f"ild@{k}"] == pytest.approx(expected, abs=1e-9), k
    assert result["ild@1"] == 0.0  # no pairs at all


def test_ild_jaccard_differs_from_cosine_and_bad_distance_is_an_error():
    cos = ILD(metric_config()).calculate_metric(datastruct())["ild@5"]
    jac = ILD(metric_config(ild_distance="jaccard")).calculate_metric(datastruct())
    assert jac["ild@5"] == pytest.approx(0.75)  # (.5 + 1 + 1/3 + 1 + 2/3 + 1) / 6
    assert cos != pytest.approx(jac["ild@5"])
    # the metric is RecBole's kind: a ValueError; the plugin's check says it in one line
    with pytest.raises(ValueError, match="ild_distance"):
        ILD(metric_config(ild_distance="euclid"))
    with pytest.raises(MetricConfigError, match="ild_distance must be one of"):
        check_metric_options(metric_config(metrics=["ILD"], ild_distance="euclid"))


def test_f1_from_the_collected_data():
    result = F1(metric_config()).calculate_metric(datastruct())
    for k in TOPK:
        recall, ndcg = hand_recall_ndcg(k)
        a = (recall + ndcg) / 2
        d = (hand_cc(REC.tolist(), k) + hand_ild(REC.tolist(), k)) / 2
        expected = 2 * a * d / (a + d)
        assert result[f"f1@{k}"] == pytest.approx(expected, abs=1e-9), k


def test_f1_components_are_configurable():
    config = metric_config(f1_accuracy_metrics=["NDCG"], f1_diversity_metrics=["CC"])
    result = F1(config).calculate_metric(datastruct())
    _, ndcg = hand_recall_ndcg(3)
    cc = hand_cc(REC.tolist(), 3)
    assert result["f1@3"] == pytest.approx(2 * ndcg * cc / (ndcg + cc), abs=1e-9)
    for bad in (["GAUC"], ["NoSuchMetric"], ["F1"]):
        with pytest.raises(ValueError, match="F1 component"):
            F1(metric_config(f1_accuracy_metrics=bad))
        with pytest.raises(MetricConfigError, match="F1 component"):
            check_metric_options(metric_config(metrics=["F1"], f1_accuracy_metrics=bad))
    for bad in ([], 0, True, 3.5):  # a one-line error, not a TypeError
        with pytest.raises(MetricConfigError, match="f1_accuracy_metrics must"):
            check_metric_options(metric_config(metrics=["F1"], f1_accuracy_metrics=bad))


def test_f1_is_accdivf1_under_the_name_of_patts_tables():
    """RecBole's tree gets the metric as AccDivF1 (a harmonic mean of accuracy and
    diversity, not precision/recall's F1); the plugin registers it under both names,
    with the options' defaults where the configuration lacks them; AccDivF1 is no
    component of itself or of F1."""
    from recbole.evaluator.register import metrics_dict

    from recbole_attn.evaluator import METRIC_DEFAULTS, AccDivF1

    assert metrics_dict["f1"] is F1 and metrics_dict["accdivf1"] is AccDivF1
    config = metric_config(f1_accuracy_metrics=["NDCG"], f1_diversity_metrics=["CC"])
    f1 = F1(config).calculate_metric(datastruct())
    accdiv = AccDivF1(config).calculate_metric(datastruct())
    assert {k.replace("f1@", "accdivf1@"): v for k, v in f1.items()} == accdiv
    bare = metric_config()  # no option set: the defaults
    defaults = metric_config(**METRIC_DEFAULTS)
    assert F1(bare).calculate_metric(datastruct()) == F1(defaults).calculate_metric(
        datastruct()
    )
    for bad in (["AccDivF1"], ["F1"]):
        with pytest.raises(MetricConfigError, match="F1 component"):
            check_metric_options(
                metric_config(metrics=["AccDivF1"], f1_accuracy_metrics=bad)
            )


def test_f1_reproduces_patt_table2():
    # SASRec on Beauty@5 in PAtt's Table 2: Re .1293, ND .0803, CC .0510, ILD .7363 -> .1655
    assert round(f1_score([0.1293, 0.0803], [0.0510, 0.7363]), 4) == 0.1655
    # and not the per-metric harmonic mean or a mean of the four
    assert round(f1_score([0.1293], [0.0510]), 4) != 0.1655
    assert f1_score([0.0], [0.0]) == 0.0


# --------------------------------------------------------------------------- registration
def test_registration_mutates_recboles_own_dicts():
    import recbole.config.configurator as configurator
    import recbole.evaluator as evaluator_pkg
    import recbole.evaluator.evaluator as evaluator_mod
    import recbole.evaluator.register as register

    sizes = [len(register.metrics_dict), len(register.metric_information)]
    register_metrics()  # idempotent
    assert [len(register.metrics_dict), len(register.metric_information)] == sizes
    assert evaluator_mod.metrics_dict is register.metrics_dict
    assert configurator.metric_types is register.metric_types
    assert evaluator_pkg.metric_types is register.metric_types
    for cls in (CC, ILD, F1):
        name = cls.__name__.lower()
        assert register.metrics_dict[name] is cls
        assert "data.item_categories" in register.metric_information[name]
        assert "rec.items" in register.metric_information[name]
        assert not cls.smaller
    assert "rec.topk" in register.metric_information["f1"]


# --------------------------------------------------------------------------- pipeline
def categorized(config, **extra):
    config = dict(config)
    config["load_col"] = {
        "inter": ["user_id", "item_id", "timestamp"],
        "item": ["item_id", "categories"],
    }
    # keep the interactions of uncategorized items (as our dataset yamls do)
    config["filter_inter_by_user_or_item"] = False
    config["epochs"] = 1
    config["train_batch_size"] = 256  # a few steps: only the evaluation matters here
    config.update(extra)
    if "metrics" in extra and "valid_metric" not in extra:
        # the pipeline checks valid_metric against metrics and topk before training
        config["valid_metric"] = f"{extra['metrics'][0]}@{config.get('topk', [10])[0]}"
    return config


def read_item_file(path):
    cats = {}
    with open(path) as f:
        next(f)
        for line in f:
            item, tokens = line.rstrip("\n").split("\t")
            cats[item] = set(tokens.split())
    return cats


def test_collector_stores_the_category_table(tiny_config, tiny_data_path):
    config = categorized(tiny_config, metrics=["Recall", "CC"])
    cfg, _, trainer, (train_data, _, _) = build("SASRec", "tiny", config_dict=config)
    collector = trainer.eval_collector
    assert isinstance(collector, CategoryCollector)
    assert collector.register.need("data.item_categories")
    collector.data_collect(train_data)
    collector.data_struct.set("data.num_items", 37)  # a non-tensor, as RecBole collects
    struct = collector.get_data_struct()  # RecBole's .cpu() + deepcopy must survive it
    assert struct.get("data.num_items") == 37
    table = struct.get("data.item_categories")
    dataset = train_data._dataset
    assert table.dtype == torch.long and table.shape[0] == dataset.item_num
    assert "data.item_categories" in collector.data_struct  # kept for the next epoch
    expected = read_item_file(os.path.join(tiny_data_path, "tiny", "tiny.item"))
    item_tokens = dataset.field2id_token["item_id"]
    cat_tokens = dataset.field2id_token["categories"]
    assert table[0].eq(0).all()
    for internal_id in range(1, dataset.item_num):
        token = item_tokens[internal_id]
        got = {cat_tokens[c] for c in table[internal_id].tolist() if c}
        assert got == expected.get(token, set()), token  # every 10th: uncategorized
    assert any(not expected.get(t) for t in item_tokens[1:])


def _record_evaluations(monkeypatch):
    from recbole.evaluator.evaluator import Evaluator

    calls = []
    original = Evaluator.evaluate

    def recording(self, dataobject):
        result = original(self, dataobject)
        calls.append((dataobject, result))
        return result

    monkeypatch.setattr(Evaluator, "evaluate", recording)
    return calls


@pytest.mark.parametrize(
    "model, valid_metric", [("SASRec", "F1@10"), ("STOSA", "NDCG@10")]
)
def test_end_to_end(tiny_config, monkeypatch, model, valid_metric):
    calls = _record_evaluations(monkeypatch)
    config = categorized(
        tiny_config,
        metrics=["Recall", "NDCG", "CC", "ILD", "F1"],
        topk=[5, 10],
        valid_metric=valid_metric,
    )
    result = run(model, "tiny", config_dict=config)
    test = result["test_result"]
    keys = {f"{m}@{k}" for m in ("recall", "ndcg", "cc", "ild", "f1") for k in (5, 10)}
    assert set(test) == keys
    assert all(0.0 <= v <= 1.0 for v in test.values()), test
    assert test["cc@5"] > 0 and test["ild@5"] > 0 and test["f1@10"] > 0
    # recompute CC and F1 from the collected top-K lists and category table
    struct, recorded = calls[-1]
    assert dict(recorded) == dict(test)
    rec = struct.get("rec.items")
    table = struct.get("data.item_categories")
    n_cats = len({c for row in table.tolist() for c in row if c})
    for k in (5, 10):
        cc = np.mean(
            [len({c for i in row[:k] for c in table[i].tolist() if c}) for row in rec]
        )
        assert test[f"cc@{k}"] == pytest.approx(cc / n_cats, abs=1e-4)
        a = (test[f"recall@{k}"] + test[f"ndcg@{k}"]) / 2
        d = (test[f"cc@{k}"] + test[f"ild@{k}"]) / 2
        assert test[f"f1@{k}"] == pytest.approx(2 * a * d / (a + d), abs=2e-4)


def test_f1_needs_no_other_metric_in_the_list(tiny_config):
    config = categorized(tiny_config, metrics=["F1"], topk=[5], valid_metric="F1@5")
    result = run("SASRec", "tiny", config_dict=config)
    assert set(result["test_result"]) == {"f1@5"}
    # evaluating a loaded checkpoint (no fit: the table is collected from eval data)
    _, _, trainer, (_, _, test_data) = load_data_and_model(result["saved_model_file"])
    again = trainer.evaluate(test_data, load_best_model=False)
    assert dict(again) == dict(result["test_result"])


def assert_nothing_trained(config):
    saved = config["checkpoint_dir"]
    assert not os.path.exists(saved) or not os.listdir(saved)


def test_missing_item_file_is_an_error_before_training(tiny_config):
    config = categorized(tiny_config, metrics=["Recall", "CC"])
    with pytest.raises(CategoryFieldError) as err:
        run("SASRec", "tiny_nocat", config_dict=config)
    message = str(err.value)
    assert "'categories'" in message and "category_field" in message
    assert "no item file" in message and "user_id" in message
    assert isinstance(err.value, RecboleAttnError)
    assert_nothing_trained(config)


def test_item_file_not_loaded_is_an_error_before_training(tiny_config):
    config = categorized(tiny_config, metrics=["ILD"])
    config["load_col"] = {"inter": ["user_id", "item_id", "timestamp"]}
    with pytest.raises(
        CategoryFieldError, match="load_col does not load the item file"
    ):
        run("SASRec", "tiny", config_dict=config)
    assert_nothing_trained(config)
    # the default RecBole behaviour (load_col: None = every column) works
    # (with RecBole's ItemCoverage, whose collected value is not a tensor)
    config = categorized(
        tiny_config, metrics=["CC", "ItemCoverage"], topk=[5], valid_metric="CC@5"
    )
    config["load_col"] = None
    test = run("SASRec", "tiny", config_dict=config, saved=False)["test_result"]
    assert 0 < test["cc@5"] <= 1 and 0 < test["itemcoverage@5"] <= 1


def test_the_category_error_reads_the_files_with_their_separator(
    tiny_config, tiny_data_path, tmp_path
):
    """A dataset whose files are comma-separated (``field_separator``): the message
    names the interaction fields as RecBole reads them (it named one field, the whole
    header line, before)."""
    folder = tmp_path / "data" / "tinycsv"
    folder.mkdir(parents=True)
    for ext in ("inter", "item"):
        with open(os.path.join(tiny_data_path, "tiny", f"tiny.{ext}")) as f:
            text = f.read().replace("\t", ",")
        (folder / f"tinycsv.{ext}").write_text(text)
    config = categorized(
        tiny_config,
        metrics=["CC"],
        data_path=str(tmp_path / "data"),
        field_separator=",",
    )
    config["load_col"] = {"inter": ["user_id", "item_id", "timestamp"]}
    with pytest.raises(CategoryFieldError) as err:
        run("SASRec", "tinycsv", config_dict=config)
    message = str(err.value)
    assert "its interaction fields: ['user_id', 'item_id', 'timestamp']" in message
    assert "load_col does not load the item file" in message


def test_wrong_category_field_is_an_error(tiny_config, tiny_data_path, tmp_path):
    config = categorized(tiny_config, metrics=["F1"], category_field="genre")
    with pytest.raises(CategoryFieldError, match="no column 'genre'.*token_seq"):
        run("SASRec", "tiny", config_dict=config)
    # a category column that is not token_seq
    root = tmp_path / "data"
    folder = root / "tinytok"
    folder.mkdir(parents=True)
    shutil.copy(
        os.path.join(tiny_data_path, "tiny", "tiny.inter"), folder / "tinytok.inter"
    )
    with open(folder / "tinytok.item", "w") as f:
        f.write("item_id:token\tcategories:token\n")
        f.writelines(f"i{i}\tc{i % 3}\n" for i in range(1, 41))
    config = categorized(tiny_config, metrics=["CC"], data_path=str(root))
    with pytest.raises(CategoryFieldError, match="type token; .*token_seq"):
        run("SASRec", "tinytok", config_dict=config)
    assert_nothing_trained(config)


def test_metrics_without_categories_need_no_item_file(tiny_config):
    from recbole_attn.engine.config import make_config
    from recbole_attn.engine.quick_start import create_dataset

    config = dict(tiny_config, metrics=["Recall", "NDCG"], topk=[5])
    config["valid_metric"] = "NDCG@5"
    cfg = make_config("SASRec", "tiny_nocat", config_dict=config)
    recbole_attn.validate_dataset(cfg, create_dataset(cfg))  # no error
    cfg = make_config("SASRec", "tiny_nocat", config_dict=dict(config, metrics=["CC"]))
    with pytest.raises(CategoryFieldError):
        recbole_attn.validate_dataset(cfg, create_dataset(cfg))


def test_eval_mask_history(tiny_config):
    config = categorized(tiny_config, eval_mask_history=True, metrics=["Recall"])
    _, net, trainer, (_, _, test_data) = build("SASRec", "tiny", config_dict=config)
    net.eval()
    trainer.tot_item_num = test_data._dataset.item_num  # set by Trainer.evaluate
    for batch in test_data:
        interaction, scores, pos_u, pos_i = trainer._full_sort_batch_eval(batch)
        seq = interaction[net.ITEM_SEQ]
        lengths = interaction[net.ITEM_SEQ_LEN]
        assert torch.isfinite(scores[pos_u, pos_i]).all()  # the target stays rankable
        top = torch.topk(scores, 10, dim=1).indices
        for row in range(scores.shape[0]):
            history = set(seq[row, : lengths[row]].tolist())
            target = set(pos_i[pos_u == row].tolist())
            masked = history - target
            assert torch.isinf(scores[row, list(masked)]).all()
            assert not masked & set(top[row].tolist())
            assert scores[row, 0] == -math.inf
    # a target that repeats a history item must stay rankable: force the case
    batch = next(iter(test_data))
    interaction = batch[0]
    target = interaction[net.ITEM_ID][0].item()
    interaction[net.ITEM_SEQ][0, 0] = target
    _, scores, pos_u, pos_i = trainer._full_sort_batch_eval(batch)
    assert torch.isfinite(scores[0, target])


def test_package_import_registers():
    import recbole.evaluator.register as register

    assert recbole_attn.validate_dataset is not None
    assert {"cc", "ild", "f1"} <= set(register.metrics_dict)


def test_dataset_has_categories_answers_from_the_yaml_and_the_item_file(
    tiny_data_path, tmp_path
):
    """The one planning helper (benchmarks skip category models and metrics with it):
    the dataset yaml's ``category_field`` must name a column of the ``.item`` file."""
    from experiments.categories import dataset_has_categories
    from experiments.categories import has_categories

    assert dataset_has_categories("tiny", tiny_data_path)
    assert not dataset_has_categories("tiny_nocat", tiny_data_path)  # no .item file
    assert not dataset_has_categories("absent", tiny_data_path)
    yaml_path = tmp_path / "tiny.yaml"
    yaml_path.write_text("category_field: ~\n")  # Office's: none published
    assert not dataset_has_categories("tiny", tiny_data_path, str(yaml_path))
    yaml_path.write_text("category_field: genre\n")  # a column the file lacks
    assert not dataset_has_categories("tiny", tiny_data_path, str(yaml_path))
    yaml_path.write_text("category_field: categories\n")
    assert dataset_has_categories("tiny", tiny_data_path, str(yaml_path))
    # a dataset not on this machine: the yaml's word (reports of runs made elsewhere);
    # one that is here without an item file has none, whatever the yaml says
    assert dataset_has_categories("elsewhere", str(tmp_path), str(yaml_path))
    assert not dataset_has_categories("tiny_nocat", tiny_data_path, str(yaml_path))
    # RecBole reads ml-100k from its bundled copy whatever data_path says; its genres
    # are the column our shipped yaml names (`class`)
    assert has_categories("ml-100k", str(tmp_path))
    # Office ships without categories (its yaml says so), whatever files exist
    office = tmp_path / "Office"
    office.mkdir()
    (office / "Office.item").write_text("item_id:token\tcategories:token_seq\n1\ta\n")
    assert not has_categories("Office", str(tmp_path))


def test_only_dpatt_needs_item_categories():
    from recbole_attn.plugin import MODELS

    assert {name for name, cls in MODELS.items() if cls.needs_item_categories} == {
        "DPAtt"
    }
