"""Length-bucketed training batches (``train_batch_grouping: bucket``,
recbole_attn/data/bucketing.py): every sample once per epoch, batches of similar length,
deterministic under the dataloader's generator, wired into the pipeline."""

import pytest
import torch

from recbole_attn.data.bucketing import (
    BucketTrainDataLoader,
    LengthBucketBatchSampler,
    bucket_batches,
)
from recbole_attn.errors import ConfigError
from recbole_attn.engine.quick_start import build, run


def _skewed_lengths(n=1000, seed=0):
    """Mostly short sequences and a few long ones, as in the Amazon data."""
    u = torch.rand(n, generator=torch.Generator().manual_seed(seed))
    return torch.clamp(-10.0 * torch.log(u), 1, 100).long()  # exponential, mean 10


@pytest.mark.parametrize("n, batch, pool", [(1000, 64, 4), (97, 10, 3), (5, 8, 2)])
def test_every_sample_once_and_pools_sorted(n, batch, pool):
    lengths = torch.randint(1, 60, (n,), generator=torch.Generator().manual_seed(n))
    batches = bucket_batches(lengths, batch, pool, torch.Generator().manual_seed(1))
    assert sorted(i for b in batches for i in b) == list(range(n))
    assert all(0 < len(b) <= batch for b in batches)
    assert len(batches) == len(LengthBucketBatchSampler(lengths, batch, pool, None))
    # each batch lies within one pool sorted by length: its members' lengths are sorted
    for b in batches:
        assert lengths[b].tolist() == sorted(lengths[b].tolist())


def test_deterministic_given_the_generator_and_new_each_epoch():
    lengths = _skewed_lengths()
    first = bucket_batches(lengths, 64, 4, torch.Generator().manual_seed(3))
    again = bucket_batches(lengths, 64, 4, torch.Generator().manual_seed(3))
    assert first == again
    g = torch.Generator().manual_seed(3)
    sampler = LengthBucketBatchSampler(lengths, 64, 4, g)
    assert list(sampler) == first and list(sampler) != first


def test_bucketing_cuts_the_padded_work():
    """Trimmed attention work (batch size x longest length^2) of bucketed batches is a
    fraction of random batches' on skewed lengths."""
    lengths = _skewed_lengths()
    g = torch.Generator().manual_seed(0)
    bucketed = bucket_batches(lengths, 64, 8, g)
    randomly = torch.randperm(len(lengths), generator=g).split(64)

    def work(batches):
        return sum(len(b) * int(lengths[b].max()) ** 2 for b in batches)

    assert work(bucketed) < 0.5 * work(randomly)


def test_pipeline_draws_bucketed_batches(tiny_config):
    config = {**tiny_config, "train_batch_grouping": "bucket", "bucket_pool_batches": 2}
    config.update(train_batch_size=4)
    _, net, _, (train, _, _) = build("SASRecAP", "tiny", config_dict=config)
    assert isinstance(train, BucketTrainDataLoader)
    users, n_batches = [], 0
    for batch in train:
        users += batch[net.USER_ID].tolist()
        lengths = batch[net.ITEM_SEQ_LEN].tolist()
        assert lengths == sorted(lengths)  # a slice of a pool sorted by length
        n_batches += 1
    assert sorted(users) == sorted(train._dataset.inter_feat[net.USER_ID].tolist())
    assert len(users) == len(set(users))  # all-position: one sample per user
    assert n_batches == len(train)


def test_bucketed_run_trains(tiny_config):
    result = run(
        "SASRecAP",
        "tiny",
        config_dict={**tiny_config, "epochs": 1, "train_batch_grouping": "bucket"},
    )
    assert result["test_result"]


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"train_batch_grouping": "buckets"}, "train_batch_grouping must be one of"),
        (
            {"train_batch_grouping": "bucket", "bucket_pool_batches": 0},
            "bucket_pool_batches must be an integer >= 1",
        ),
    ],
)
def test_invalid_grouping_is_a_clear_error(tiny_config, extra, message):
    with pytest.raises(ConfigError, match=message):
        build("SASRecAP", "tiny", config_dict={**tiny_config, **extra})
