"""
recbole_attn.data.cooccurrence
##############################

Item co-occurrence counts from the users' TRAINING histories only
(:func:`~recbole_attn.data.histories.training_histories`): ``P[i, j]`` is the number of
users whose training history holds both i and j, ``P[i, i]`` the number of users who
interacted with i. Validation and test interactions are never counted.

The matrix is built sparse (``scipy.sparse``, memory O(nnz), never O(|V|^2)) as
:math:`X^\\top X` of the binary user x item matrix, and kept as a sorted table of
``(i * |V| + j) -> count`` that :class:`CooccurrenceTable` gathers from in one
``searchsorted`` per batch, on the model's device.
"""

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

from recbole_attn.data.histories import training_histories


def cooccurrence_matrix(histories, n_items):
    """``scipy.sparse.csr_matrix`` ``[n_items, n_items]`` of co-occurrence counts (symmetric;
    the diagonal counts users per item) from :class:`~recbole_attn.data.histories.
    TrainingHistories`; an item repeated in a history counts once."""
    lengths = histories.lengths.numpy()
    rows = np.repeat(np.arange(len(lengths)), lengths)
    users = sp.csr_matrix(
        (np.ones(len(rows), dtype=np.float64), (rows, histories.items.numpy())),
        shape=(len(lengths), n_items),
    )
    users.data[:] = 1.0  # duplicates were summed: binary user x item matrix
    return (users.T @ users).tocsr()


class CooccurrenceTable(nn.Module):
    """Sparse co-occurrence counts on the model's device: ``block(item_seq)`` gathers the
    ``[B, L, L]`` counts between the items of each sequence, ``occurrences(item_seq)`` the
    ``[B, L]`` user counts of the items. Buffers are not saved in checkpoints (they are
    rebuilt from the dataset)."""

    def __init__(self, matrix):
        super().__init__()
        coo = matrix.tocoo()
        n_items = matrix.shape[0]
        keys = coo.row.astype(np.int64) * n_items + coo.col.astype(np.int64)
        order = np.argsort(keys)
        self.n_items = n_items
        self.register_buffer("keys", torch.from_numpy(keys[order]), persistent=False)
        values = torch.from_numpy(coo.data[order].astype(np.float32))
        self.register_buffer("values", values, persistent=False)
        diagonal = torch.from_numpy(matrix.diagonal().astype(np.float32))
        self.register_buffer("diagonal", diagonal, persistent=False)

    @classmethod
    def from_dataset(cls, dataset):
        """The table of a training split (its training histories)."""
        return cls(cooccurrence_matrix(training_histories(dataset), dataset.item_num))

    def lookup(self, rows, cols):
        """Counts of the item pairs ``(rows, cols)`` (same shape), 0 where none."""
        keys = rows.long() * self.n_items + cols.long()
        if self.keys.numel() == 0:
            return torch.zeros(keys.shape, device=keys.device)
        index = torch.searchsorted(self.keys, keys).clamp(max=self.keys.numel() - 1)
        found = self.keys[index] == keys
        return torch.where(found, self.values[index], 0.0)

    def block(self, item_seq):
        """``[B, L, L]`` counts between the items of every sequence (padding: 0)."""
        counts = self.lookup(item_seq.unsqueeze(-1), item_seq.unsqueeze(-2))
        valid = (item_seq > 0).float()
        return counts * valid.unsqueeze(-1) * valid.unsqueeze(-2)

    def occurrences(self, item_seq):
        """``[B, L]`` number of users per item (padding: 0)."""
        return self.diagonal[item_seq] * (item_seq > 0)

    def memory_bytes(self):
        return sum(b.numel() * b.element_size() for b in self.buffers())
