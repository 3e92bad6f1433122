"""
recbole_attn.model.negatives
############################

One uniform negative item per training position, drawn in one tensor operation for the
whole batch (:func:`sample_negatives`).
"""

import torch

from recbole_attn.errors import ConfigError


def sample_negatives(
    item_seq, targets, n_items, exclude_seen=True, heldout_items=None, users=None
):
    """One negative item per position ``[B, L]``, uniform over ``[1, n_items)``.

    With ``exclude_seen`` the draw is uniform over the items that are NOT in the user's
    training sequence (inputs ``item_seq`` and ``targets``), exactly, in one multinomial
    draw per batch (a ``[B, n_items]`` weight matrix); a user who has seen every item
    falls back to all items. With ``heldout_items`` (``[n_users, W]``, a LEAK of held-out
    data that only the opt-in ``neg_exclude_heldout`` passes) the items of the user's
    validation and test rows (``users [B]``) are excluded too, as the official STOSA and
    PAtt code does.
    """
    batch, length = targets.shape
    if not exclude_seen and heldout_items is None:
        return torch.randint(1, n_items, (batch, length), device=targets.device)
    weights = torch.ones(batch, n_items, device=targets.device)
    if exclude_seen:
        weights.scatter_(1, item_seq, 0.0)
        weights.scatter_(1, targets, 0.0)
    if heldout_items is not None:
        if users is None:
            raise ConfigError(
                "neg_exclude_heldout needs the user id of every training sequence "
                "(the interaction has no user field)"
            )
        weights.scatter_(1, heldout_items[users], 0.0)
    weights[:, 0] = 0.0
    exhausted = weights.sum(1) == 0
    if bool(exhausted.any()):
        weights[exhausted, 1:] = 1.0
    return torch.multinomial(weights, length, replacement=True)
