"""Attention masks shared by every model."""

import torch


def causal_padding_mask(item_seq):
    """Boolean mask ``[B, 1, L, L]``: query t may attend to key k iff ``k <= t`` and k is
    not padding (item id 0)."""
    length = item_seq.size(1)
    keys = (item_seq > 0).unsqueeze(1).unsqueeze(2)  # [B, 1, 1, L]
    causal = torch.ones(length, length, dtype=torch.bool, device=item_seq.device).tril()
    return keys & causal


def masked_softmax(scores, mask, dim=-1):
    """Softmax of ``scores`` over ``dim`` with disallowed entries exactly 0.

    Masked entries get the dtype's lowest finite value, so a row whose entries are all
    masked gives zeros instead of NaN. ``scores`` and ``mask`` broadcast against each
    other (scores shared by the batch, ``[1, h, L, L]``, are fine).
    """
    scores = torch.where(mask, scores, torch.finfo(scores.dtype).min)
    return torch.softmax(scores, dim=dim) * mask
