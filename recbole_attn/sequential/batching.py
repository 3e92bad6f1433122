"""What a training batch becomes before encoding: trimmed (:func:`trim`), with the
targets and loss mask of the training mode (:func:`training_targets`); and the runs of
equal rows of an evaluation batch (:func:`runs_of_equal_rows`)."""

import torch


def map_output(fn, output):
    if isinstance(output, tuple):
        return tuple(fn(o) for o in output)
    return fn(output)


def at_positions(output, mask):
    """The rows ``[N, ...]`` of ``output`` where ``mask`` holds, by index (cheaper
    backward)."""
    rows = mask.flatten().nonzero().squeeze(1)
    return map_output(lambda o: o.flatten(0, 1).index_select(0, rows), output)


def trim(item_seq, item_seq_len):
    """Cut a right-padded batch ``[B, T]`` to its longest sequence (at least one
    column)."""
    max_len = int(item_seq_len.max()) if item_seq_len.numel() else 1
    return item_seq[:, : max(max_len, 1)]


def training_targets(item_seq, item_seq_len, pos_items, training_mode):
    """Targets ``[B, L]`` (the next item; the target at the last position) and the mask
    of the positions with a loss (``last_position``: the last one only)."""
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
    """``(first row of every run, every row's run)`` of equal consecutive rows, or None."""
    key = torch.cat([c.unsqueeze(1) if c.dim() == 1 else c for c in columns], dim=1)
    unique, inverse = torch.unique_consecutive(key, dim=0, return_inverse=True)
    if len(unique) == len(key):
        return None
    rows = torch.arange(len(key), device=key.device)
    first = torch.full((len(unique),), len(key), device=key.device)
    return first.scatter_reduce(0, inverse, rows, reduce="amin"), inverse
