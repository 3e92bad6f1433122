"""Length-bucketed training batches (``train_batch_grouping: bucket``): each epoch the
samples are shuffled, cut into pools of ``bucket_pool_batches`` batches, each pool
sorted by length and cut into batches, and the batches shuffled. It changes what a batch
is (unlike the exact ``length_groups``; docs/results.md)."""

import torch
from recbole.data.dataloader import TrainDataLoader

from recbole_attn.errors import ConfigError

#: ``train_batch_grouping`` values
GROUPINGS = ("random", "bucket")


def bucket_batches(lengths, batch_size, pool_batches, generator):
    """One epoch of batches of sample indices, each from one pool sorted by ``lengths``,
    batch order shuffled."""
    lengths = torch.as_tensor(lengths)
    order = torch.randperm(len(lengths), generator=generator)
    pool = pool_batches * batch_size
    batches = []
    for start in range(0, len(order), pool):
        members = order[start : start + pool]
        # stable sort: equal lengths keep their shuffled order
        members = members[torch.sort(lengths[members], stable=True).indices]
        batches += [
            members[i : i + batch_size].tolist()
            for i in range(0, len(members), batch_size)
        ]
    shuffled = torch.randperm(len(batches), generator=generator).tolist()
    return [batches[i] for i in shuffled]


class LengthBucketBatchSampler(torch.utils.data.Sampler):
    """Batches of :func:`bucket_batches`, new every epoch (``generator``: the
    dataloader's)."""

    def __init__(self, lengths, batch_size, pool_batches, generator):
        self.lengths = torch.as_tensor(lengths)
        self.batch_size = batch_size
        self.pool_batches = pool_batches
        self.generator = generator

    def __iter__(self):
        yield from bucket_batches(
            self.lengths, self.batch_size, self.pool_batches, self.generator
        )

    def __len__(self):
        n, pool = len(self.lengths), self.pool_batches * self.batch_size
        full, rest = divmod(n, pool)
        return full * self.pool_batches + -(-rest // self.batch_size)


def check_grouping(config):
    grouping = config["train_batch_grouping"]
    if grouping not in GROUPINGS:
        raise ConfigError(
            f"train_batch_grouping must be one of {list(GROUPINGS)}, got {grouping!r}"
        )
    if grouping == "bucket":
        pool = config["bucket_pool_batches"]
        if not isinstance(pool, int) or isinstance(pool, bool) or pool < 1:
            raise ConfigError(
                f"bucket_pool_batches must be an integer >= 1, got {pool!r}"
            )
        if not config["single_spec"]:
            raise ConfigError(
                "train_batch_grouping: bucket is not supported with several training "
                "processes (nproc > 1); use train_batch_grouping: random"
            )
    return grouping


def bucket_train_dataloader(config, train_data):
    """``train_data`` drawing length-bucketed batches, or unchanged (``random``)."""
    if check_grouping(config) == "random":
        return train_data
    if type(train_data) is not TrainDataLoader:
        raise ConfigError(
            "train_batch_grouping: bucket needs RecBole's TrainDataLoader (sequential "
            f"models); this run uses {type(train_data).__name__}"
        )
    dataset = train_data._dataset
    loader = BucketTrainDataLoader(config, dataset, train_data._sampler, shuffle=True)
    loader.bucket_sampler = LengthBucketBatchSampler(
        dataset.inter_feat[dataset.item_list_length_field],
        loader.step,
        config["bucket_pool_batches"],
        loader.generator,
    )
    return loader


class BucketTrainDataLoader(TrainDataLoader):
    """RecBole's training dataloader with batches from a
    :class:`LengthBucketBatchSampler`."""

    bucket_sampler = None

    @property
    def _index_sampler(self):
        return self.bucket_sampler
