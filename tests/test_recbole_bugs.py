"""RecBole 1.2.1's own bugs that a run through recbole_attn, or RecBole's API after
``import recbole_attn``, can reach (issue 53; docs/environment.md lists each with its
upstream issue): each test runs RecBole's unpatched code to show the bug, then the
fixed code. A test that could hang (a sampler drawing forever) runs under an alarm, so
that a regression fails instead of hanging the suite."""

import contextlib
import functools
import logging
import os
import random
import signal
import sys

import numpy as np
import pytest
import recbole  # noqa: F401  (``import recbole_attn`` installs its fixes with RecBole)
import torch

from conftest import TINY_MODEL
from generator_collate import collate_with_generator
from recbole_attn.host import recbole_bugs
from recbole_attn.cli import main as cli_main
from recbole_attn.errors import DataError

N_ITEMS = 8


def write_full_dataset(root, name="full", extra_items=0):
    """A dataset of ``N_ITEMS`` items where user u1 has interacted with every item (and
    then with i1..i3 again), the others with 5 each; with ``extra_items``, a .item file
    lists that many more items nobody interacted with."""
    folder = os.path.join(root, name)
    os.makedirs(folder, exist_ok=True)
    rows, t = [], 0
    for i in list(range(1, N_ITEMS + 1)) + [1, 2, 3]:
        rows.append(("u1", i, t))
        t += 1
    rng = random.Random(0)
    for u in range(2, 30):
        for i in rng.sample(range(1, N_ITEMS + 1), 5):
            rows.append((f"u{u}", i, t))
            t += 1
    with open(os.path.join(folder, f"{name}.inter"), "w") as f:
        f.write("user_id:token\titem_id:token\ttimestamp:float\n")
        f.writelines(f"{u}\ti{i}\t{t}\n" for u, i, t in rows)
    if extra_items:
        with open(os.path.join(folder, f"{name}.item"), "w") as f:
            f.write("item_id:token\tcategories:token_seq\n")
            for i in range(1, N_ITEMS + extra_items + 1):
                f.write(f"i{i}\tc{i % 3}\n")
    return root


@pytest.fixture(scope="module")
def full_data_path(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("full"))
    write_full_dataset(root)
    write_full_dataset(root, "fullx", extra_items=1)
    return root


class Endless(Exception):
    """What a draw counter raises once a loop has drawn far more than it could need."""


def counting(draw, limit=20000):
    """``draw`` that raises :class:`Endless` after ``limit`` calls."""
    calls = [0]

    @functools.wraps(draw)
    def counted(*args, **kwargs):
        calls[0] += 1
        if calls[0] > limit:
            raise Endless(f"{calls[0] - 1} draws")
        return draw(*args, **kwargs)

    counted.calls = calls
    return counted


@contextlib.contextmanager
def deadline(seconds):
    """An alarm that turns a hang into a failure."""

    def expired(signum, frame):
        raise TimeoutError(f"still running after {seconds} s: a sampler loops")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def main(argv, capsys):
    try:
        code = cli_main(argv)
    except SystemExit as exit:
        code = exit.code
    logging.getLogger().handlers.clear()
    return code, capsys.readouterr().err


def _run_args(data_path, *extra, model="BERT4Rec", dataset="full"):
    base = {
        "--model": model,
        "--dataset": dataset,
        "--data_path": data_path,
        "--epochs": "1",
        "--train_batch_size": "16",
        "--topk": "[1,3]",
        "--valid_metric": "NDCG@3",
        "--state": "ERROR",
        "--show_progress": "False",
        **{f"--{k}": str(v) for k, v in TINY_MODEL.items()},
    }
    base.update(a.split("=", 1) for a in extra)
    return [f"{k}={v}" for k, v in base.items()]


def _one_line(code, err, fragment):
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    assert fragment in err, err


# ---------------------------------------------------------------------- RecBole #2193


class _Transform:
    def __init__(self, loss_type):
        self.config = {"loss_type": loss_type}


def test_bert4rec_masking_draws_forever_in_recbole_and_ends_here(monkeypatch):
    """MaskItemSequence._neg_sample on a sequence that holds every item: RecBole's
    draws forever (here: until the counter stops it), the fix ends at once: the
    padding item where the loss never reads the negative (CE), an error for BPR."""
    from recbole.data.transform import MaskItemSequence

    every = list(range(1, N_ITEMS + 1)) + [0, 0]
    n_items = N_ITEMS + 1
    recboles = recbole_bugs.recbole_original(MaskItemSequence, "_neg_sample")
    assert recboles is not MaskItemSequence._neg_sample
    randint = random.randint
    monkeypatch.setattr(random, "randint", counting(randint))
    with pytest.raises(Endless):
        recboles(_Transform("CE"), every, n_items)
    monkeypatch.setattr(random, "randint", counting(randint))
    assert MaskItemSequence._neg_sample(_Transform("CE"), every, n_items) == 0
    assert random.randint.calls[0] == recbole_bugs.SAMPLING_ROUNDS
    with pytest.raises(DataError, match="BERT4Rec with loss_type BPR draws a negative"):
        MaskItemSequence._neg_sample(_Transform("BPR"), every, n_items)
    # an item left (the last): found, by RecBole's own draws
    random.seed(3)
    assert MaskItemSequence._neg_sample(_Transform("BPR"), every[1:], n_items) == 1
    random.seed(3)
    assert recboles(_Transform("BPR"), every[1:], n_items) == 1


def test_bert4rec_on_a_user_with_every_item_trains_or_says_why(
    full_data_path, tmp_path, monkeypatch, capsys
):
    """The issue's hang: BERT4Rec with repeated interactions kept (the documented
    rm_dup_inter: ~), a user whose training sequence holds every item."""
    monkeypatch.chdir(tmp_path)
    with deadline(120):
        code, err = main(_run_args(full_data_path, "--rm_dup_inter=None"), capsys)
        assert code == 0, err
        code, err = main(
            _run_args(
                full_data_path,
                "--rm_dup_inter=None",
                "--loss_type=BPR",
                "--train_neg_sample_args={'distribution':'uniform','sample_num':1}",
            ),
            capsys,
        )
    _one_line(code, err, "a training sequence holds every one of the 8 items")


# ---------------------------------------------------------------------- the samplers


class _PopularSampler:
    """The state RecBole's samplers keep: key 0 has used every item the popularity
    table can draw (items 1..3 of 5)."""

    distribution = "popularity"
    item_num = 5
    phase = None

    def __init__(self):
        self.prob = {1: 1.0, 2: 1.0, 3: 1.0}
        self.used_ids = np.array([{1, 2, 3}, {1}], dtype=object)
        self.sampling = counting(
            lambda n: np.random.choice([1, 2, 3], size=n), limit=100000
        )


def test_recboles_sampler_draws_forever_for_a_user_with_every_drawable_item():
    from recbole.sampler.sampler import AbstractSampler

    recboles = recbole_bugs.recbole_original(AbstractSampler, "sample_by_key_ids")
    assert recboles is not AbstractSampler.sample_by_key_ids
    for keys in ([0, 0], [0, 1]):
        with pytest.raises(Endless):
            recboles(_PopularSampler(), keys, 1)
        sampler = _PopularSampler()
        with pytest.raises(DataError, match="0 already has every one of the 3 items"):
            AbstractSampler.sample_by_key_ids(sampler, keys, 1)
        assert sampler.sampling.calls[0] <= recbole_bugs.SAMPLING_ROUNDS
    # where an item is left, the draws are RecBole's
    sampler, other = _PopularSampler(), _PopularSampler()
    np.random.seed(0)
    got = AbstractSampler.sample_by_key_ids(sampler, [1, 1, 1], 2)
    np.random.seed(0)
    assert torch.equal(got, recboles(other, [1, 1, 1], 2))
    assert set(got.tolist()) <= {2, 3}


def test_a_sampled_run_on_a_user_with_every_item_is_one_line(
    full_data_path, tmp_path, monkeypatch, capsys
):
    """BPR (RecBole's sampler, uniform): RecBole's ValueError traceback before; a
    popularity-sampled evaluation (pop3) where the user has every item the popularity
    table holds (the catalogue has one more): RecBole drew forever."""
    monkeypatch.chdir(tmp_path)
    uniform = "--train_neg_sample_args={'distribution':'uniform','sample_num':1}"
    with deadline(120):
        code, err = main(_run_args(full_data_path, uniform, model="BPR"), capsys)
        _one_line(code, err, "user u1 has interacted with every one of the 8 items")
        assert '--user_inter_num_interval="[0,8)"' in err
        code, err = main(
            _run_args(
                full_data_path,
                "--train_neg_sample_args={'distribution':'popularity','sample_num':1}",
                "--eval_args={'mode':'pop3'}",
                "--load_col={'inter':['user_id','item_id','timestamp'],"
                "'item':['item_id','categories']}",
                model="BPR",
                dataset="fullx",
            ),
            capsys,
        )
    _one_line(code, err, "popularity negative sampler (test phase): u1 already has")


# ---------------------------------------------------------------------- RecBole #2198


def _pop_counts(tiny_config, batch_size, calculate_loss=None):
    """Pop's item counts after one pass over the training data (RecBole's API), and
    the true counts of the training interactions."""
    from recbole.config import Config
    from recbole.data import create_dataset, data_preparation
    from recbole.model.general_recommender.pop import Pop

    config = Config(
        model="Pop",
        dataset="tiny",
        config_dict={
            **tiny_config,
            "train_batch_size": batch_size,
            "eval_args": {"split": {"LS": "valid_and_test"}, "order": "TO"},
        },
    )
    logging.getLogger().handlers.clear()
    dataset = create_dataset(config)
    train, _, _ = data_preparation(config, dataset)
    # RecBole's default: a sampled negative (labelled 0) beside every training row
    assert config["train_neg_sample_args"]["distribution"] == "uniform"
    model = Pop(config, train.dataset)
    for batch in train:
        (calculate_loss or Pop.calculate_loss)(model, batch)
    items = train.dataset.inter_feat[dataset.iid_field].numpy()
    true = np.bincount(items, minlength=dataset.item_num)
    return model.item_cnt.squeeze(1).numpy(), true


def test_pop_counts_every_training_interaction_whatever_the_batch_size(tiny_config):
    from recbole.model.general_recommender.pop import Pop

    small, true = _pop_counts(tiny_config, 8)
    large, same = _pop_counts(tiny_config, 4096)
    assert (same == true).all() and true.sum() > 400
    assert (small == true).all() and (large == true).all()
    # RecBole's own counts an item once per batch (fewer the larger the batch), and
    # counts the sampled negatives as interactions (one per training row)
    recboles = recbole_bugs.recbole_original(Pop, "calculate_loss")
    small, _ = _pop_counts(tiny_config, 8, recboles)
    large, _ = _pop_counts(tiny_config, 4096, recboles)
    assert large.sum() < small.sum()
    assert large.sum() < true.sum() < small.sum() <= 2 * true.sum()


# ---------------------------------------------------------------------- RecBole #2194


def test_recboles_own_non_tensor_metrics_evaluate(tiny_config):
    """AveragePopularity, GiniIndex, ItemCoverage (non-tensor values in the collector)
    through RecBole's run_recbole: an AttributeError at the first validation before."""
    from recbole.evaluator.collector import Collector
    from recbole.quick_start import run_recbole

    metrics = ["Recall", "AveragePopularity", "GiniIndex", "ItemCoverage"]
    config = {**tiny_config, "epochs": 1, "metrics": metrics, "topk": [5]}
    config["valid_metric"] = "Recall@5"
    config["train_neg_sample_args"] = None
    try:
        result = run_recbole(model="SASRec", dataset="tiny", config_dict=config)
    finally:
        logging.getLogger().handlers.clear()
    assert 0 < result["test_result"]["itemcoverage@5"] <= 1
    assert result["test_result"]["averagepopularity@5"] > 0
    # RecBole's own get_data_struct on what its data_collect stores
    recboles = recbole_bugs.recbole_original(Collector, "get_data_struct")
    collector = Collector.__new__(Collector)
    from recbole.evaluator.collector import DataStruct

    collector.data_struct = DataStruct()
    collector.data_struct.set("data.num_items", 37)
    with pytest.raises(AttributeError, match="'int' object has no attribute 'cpu'"):
        recboles(collector)
    assert Collector.get_data_struct(collector).get("data.num_items") == 37


# ---------------------------------------------------------------------- RecBole #1684


def _spawned_loader_batches():
    generator = torch.Generator().manual_seed(1234)
    loader = torch.utils.data.DataLoader(
        list(range(6)),
        batch_size=3,
        num_workers=1,
        multiprocessing_context="spawn",
        collate_fn=functools.partial(collate_with_generator, generator=generator),
    )
    return [seed for _, seed in loader]


def test_a_dataloader_worker_started_by_spawn_gets_the_generator():
    """RecBole's dataloaders hold a torch.Generator, and a worker started by spawn
    (every process of a run with nproc > 1) unpickles it: torch's reduction shares its
    state tensor by a file descriptor it frees first, and the worker died ("DataLoader
    worker exited unexpectedly"), or, where the descriptor is closed before the worker
    starts, the start failed ("bad value(s) in fds_to_keep"); with the generator sent as
    bytes it runs."""
    from multiprocessing.reduction import ForkingPickler

    reducers = ForkingPickler._extra_reducers
    assert reducers.get(torch.Generator) is recbole_bugs.reduce_generator
    assert _spawned_loader_batches() == [1234, 1234]
    del reducers[torch.Generator]
    try:
        with pytest.raises((RuntimeError, ValueError), match="DataLoader worker|fds"):
            _spawned_loader_batches()
    finally:
        recbole_bugs.register_generator_pickling()
    # the state itself travels: the rebuilt generator draws what the original draws
    generator = torch.Generator().manual_seed(7)
    torch.rand(3, generator=generator)
    rebuild, args = recbole_bugs.reduce_generator(generator)
    assert torch.equal(
        torch.rand(4, generator=rebuild(*args)), torch.rand(4, generator=generator)
    )


@pytest.mark.slow
def test_two_processes_with_dataloader_workers_train(tiny_config):
    """The issue's run: --nproc=2 --worker=1 died after a minute."""
    from recbole_attn.engine.quick_start import run

    config = {**tiny_config, "epochs": 1, "nproc": 2, "worker": 1}
    result = run("SASRecAP", "tiny", config_dict=config)
    assert result is not None and 0 <= result["test_result"]["ndcg@10"] <= 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__]))
