"""The fixes of recbole_attn.host.compat, each on the stack it is for (the byte-identical
datasets and metrics across stacks are tests/test_stack_golden.py)."""

import logging
import os
import sys

import numpy as np
import pandas as pd
import pytest

from recbole_attn.host import compat
from recbole_attn.host import pandas3
from recbole_attn.errors import RecboleAttnError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_stack_golden import write_odd_dataset  # noqa: E402

ODD_LOAD_COL = {
    "inter": ["user_id", "item_id", "timestamp"],
    "item": ["item_id", "categories", "price", "brand", "scores"],
}


def test_version_flags_follow_the_installed_stack():
    assert int(np.__version__.split(".")[0]) >= 2  # what pyproject.toml requires
    assert pandas3.PANDAS_3 == (int(pd.__version__.split(".")[0]) >= 3)


def test_numpy_aliases_are_the_ones_recbole_reads():
    """RecBole's metrics, interactions and NaN filling read np.float & co.: after a Config
    (or set_numpy_aliases) they are the types RecBole 1.2.1 gives them."""
    compat.set_numpy_aliases()
    assert np.float is np.float64 and np.int is np.int_ and np.bool is np.bool_
    assert np.complex is np.complex128 and np.object is np.object_
    assert np.unicode is np.str_ and np.str is np.str_ and np.long is np.int_


def test_recboles_config_builds_and_its_metrics_run(tiny_config):
    """A RecBole Config through our pipeline, then RecBole's own NDCG (np.float inside)."""
    from recbole.evaluator.metrics import NDCG

    from recbole_attn.engine.config import make_config

    config = make_config("SASRecAP", "tiny", config_dict=tiny_config)
    logging.getLogger().handlers.clear()
    pos = np.array([[0, 1], [1, 0]], dtype=bool)
    value = NDCG(config).metric_info(pos, np.array([1, 1]))
    assert value.dtype == np.float64 and value.shape == (2, 2)


def test_recboles_dataset_carries_the_fixes_on_pandas_3():
    """recbole_attn.host.install installs the pandas 3 fixes into RecBole's own Dataset (so that
    our dataset classes and RecBole's, through RecBole's API too, get them), on pandas 3
    only."""
    from recbole.data.dataset import Dataset, SequentialDataset

    from recbole_attn.data.dataset import AttnSequentialDataset

    assert issubclass(AttnSequentialDataset, SequentialDataset)
    fixed = Dataset._load_feat is pandas3.load_feat
    assert fixed == pandas3.PANDAS_3
    assert (Dataset._fill_nan is pandas3.fill_nan) == pandas3.PANDAS_3
    assert (Dataset._remap is pandas3.remap) == pandas3.PANDAS_3


def test_a_general_recbole_model_runs_through_the_pipeline(tiny_config):
    """RecBole's BPR (a general model, RecBole's Dataset class with our fixes)."""
    from recbole_attn.engine.quick_start import run

    sampling = {"distribution": "uniform", "sample_num": 1}
    config = {**tiny_config, "epochs": 1, "training_mode": "last_position"}
    result = run(
        "BPR", "tiny", config_dict={**config, "train_neg_sample_args": sampling}
    )
    assert 0 <= result["test_result"]["ndcg@10"] <= 1


def _odd_dataset(tmp_path, **extra):
    from recbole_attn.engine.config import make_config
    from recbole_attn.engine.quick_start import create_dataset

    root = write_odd_dataset(str(tmp_path))
    config = make_config(
        "SASRecAP",
        "odd",
        config_dict={"data_path": root, "load_col": ODD_LOAD_COL, **extra},
    )
    logging.getLogger().handlers.clear()
    return create_dataset(config)


def test_missing_cells_load_as_recbole_fills_them(tmp_path, monkeypatch):
    """Empty token_seq / float_seq cells are empty sequences, a missing float is the
    column's mean, a missing token is padding: RecBole's in-place fills, which pandas 3
    turns into no-ops, on either stack."""
    monkeypatch.chdir(tmp_path)
    data = _odd_dataset(tmp_path)
    item = data.item_feat.set_index(data.iid_field)

    def row(token):
        return item.loc[data.token2id(data.iid_field, token)]

    assert len(row("i2")["categories"]) == 0 and len(row("i2")["scores"]) == 0
    assert list(row("i4")["scores"]) == [1.0, 1.0, 3.0]
    assert len(row("i4")["categories"]) == 3
    mean = (3.5 + 1.0 + 7.25 + 2.0) / 4
    assert row("i2")["price"] == pytest.approx(mean)
    assert row("i3")["brand"] == 0  # the missing token is [PAD]
    assert data.field2seqlen["categories"] == 3 and data.field2seqlen["scores"] == 3


@pytest.mark.skipif(not pandas3.PANDAS_3, reason="the refusal is for pandas >= 3")
def test_normalizing_float_seq_fields_is_refused_on_pandas_3(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RecboleAttnError, match=r"float_seq fields \['scores'\]"):
        _odd_dataset(tmp_path, normalize_all=True)
    # float fields alone are normalized as RecBole does
    data = _odd_dataset(
        tmp_path,
        normalize_field=["price"],
        load_col={**ODD_LOAD_COL, "item": ["item_id", "price"]},
    )
    assert data.item_feat["price"].max() == pytest.approx(1.0)


@pytest.mark.skipif(pandas3.PANDAS_3, reason="RecBole's own normalization: pandas < 3")
def test_float_seq_normalization_is_recboles_on_pandas_2(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = _odd_dataset(tmp_path, normalize_all=True)
    scores = np.concatenate(list(data.item_feat["scores"]))
    assert scores.min() == 0.0 and scores.max() == 1.0


def test_cell_lengths_are_per_cell():
    series = pd.Series([np.array([1, 2]), np.array([]), np.array([3])])
    assert list(pandas3.cell_lengths(series)) == [2, 0, 1]
