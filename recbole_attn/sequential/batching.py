"""
recbole_attn.sequential.batching
################################

What a training batch becomes before encoding: cut to its longest sequence
(:func:`trim`), and the target and loss mask of every position under the training mode
(:func:`training_targets`); and the runs of equal rows of an evaluation batch
(:func:`runs_of_equal_rows`).
"""

import torch


def map_output(fn, output):
    """Apply ``fn`` to a tensor or to every tensor of a tuple of tensors."""
    if isinstance(output, tuple):
        return tuple(fn(o) for o in output)
    return fn(output)


def at_positions(output, mask):
    """The rows of ``output`` (``[B, L, ...]``, or a tuple of such) where ``mask``
    ``[B, L]`` holds, ``[N, ...]``: those of ``o[mask]``, taken by index (the backward of
    a boolean mask, an accumulating ``index_put_``, costs 3x the CPU on two threads)."""
    rows = mask.flatten().nonzero().squeeze(1)
    return map_output(lambda o: o.flatten(0, 1).index_select(0, rows), output)


def trim(item_seq, item_seq_len):
    """Cut a right-padded batch ``[B, T]`` to its longest sequence (exact: attention is
    causal and positions do not depend on T; at least one column)."""
    max_len = int(item_seq_len.max()) if item_seq_len.numel() else 1
    return item_seq[:, : max(max_len, 1)]


def training_targets(item_seq, item_seq_len, pos_items, training_mode):
    """Targets ``[B, L]`` and the mask of positions that carry a loss.

    ``all_position``: the target of position t is the item at t+1 and, at the last valid
    position, the sample's target item. ``last_position``: only the last valid position.
    """
    batch, length = item_seq.shape
    last = (item_seq_len - 1).clamp(min=0)
    rows = torch.arange(batch, device=item_seq.device)
    if training_mode == "all_position":
        targets = torch.zeros_like(item_seq)
        targets[:, :-1] = item_seq[:, 1:]
        targets[rows, last] = pos_items
        positions = torch.arange(length, device=item_seq.device)
        mask = positions.unsqueeze(0) < item_seq_len.unsqueeze(1)
        targets = targets * mask
    else:
        targets = torch.zeros_like(item_seq)
        targets[rows, last] = pos_items
        mask = torch.zeros_like(item_seq, dtype=torch.bool)
        mask[rows, last] = True
    return targets, mask


def runs_of_equal_rows(columns):
    """The runs of consecutive equal rows of ``columns`` (tensors ``[N, ...]``, compared
    together): None when no two consecutive rows are equal, else ``(first, inverse)``,
    the first row of every run and every row's run (O(N), no sort)."""
    key = torch.cat([c.unsqueeze(1) if c.dim() == 1 else c for c in columns], dim=1)
    unique, inverse = torch.unique_consecutive(key, dim=0, return_inverse=True)
    if len(unique) == len(key):
        return None
    rows = torch.arange(len(key), device=key.device)
    first = torch.full((len(unique),), len(key), device=key.device)
    return first.scatter_reduce(0, inverse, rows, reduce="amin"), inverse
