"""A collate function holding a torch.Generator, for the data-loader worker that
tests/test_recbole_bugs.py starts by spawn (a light module: the worker imports it)."""

import torch


def collate_with_generator(batch, generator=None):
    """The batch, and the seed of the generator the worker received."""
    return torch.tensor(batch), generator.initial_seed()
