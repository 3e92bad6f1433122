"""The losses every model of ours trains with (``loss_type``): cross-entropy over all
items under a memory budget (:func:`cross_entropy`, :func:`linear_cross_entropy`), and
``BPR``, ``BCE`` and the log-Q corrected sampled softmax ``SSM`` on ``M`` negatives per
position (:func:`sampled_loss`; docs/models.md)."""

import math

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

#: losses on sampled negatives, and CE (softmax over all items): the loss types of every
#: model of ours
SAMPLED_LOSS_TYPES = ("BCE", "BPR", "SSM")
LOSS_TYPES = SAMPLED_LOSS_TYPES + ("CE",)
LOSS_TYPE_HINT = (
    "CE: softmax over all items; BCE (the SASRec and PAtt papers'), BPR (STOSA's) and "
    "SSM (sampled softmax, log-Q corrected): neg_sample_num sampled negatives per "
    "position, from neg_sample_distribution (uniform or popularity)"
)


def sampled_loss(pos_score, neg_score, loss_type, neg_log_q=None, neg_mask=None):
    """The mean over positions of BPR, BCE or SSM (with ``neg_log_q``; ``neg_mask``
    False: a draw left out) of scores ``[N]`` against ``[N, M]``, in float32."""
    low = (torch.float16, torch.bfloat16)
    if pos_score.dtype in low or neg_score.dtype in low:
        pos_score, neg_score = pos_score.float(), neg_score.float()
    if neg_score.dim() == pos_score.dim():
        neg_score = neg_score.unsqueeze(-1)
    if loss_type == "BPR":
        return F.softplus(neg_score - pos_score.unsqueeze(-1)).mean()
    if loss_type == "BCE":
        return (F.softplus(-pos_score) + F.softplus(neg_score).sum(-1)).mean()
    if loss_type == "SSM":
        if neg_log_q is None:
            raise ValueError("sampled_loss: SSM needs the negatives' log Q")
        corrected = neg_score - neg_log_q - math.log(neg_score.size(-1))
        if neg_mask is not None:
            corrected = corrected.masked_fill(~neg_mask, float("-inf"))
        logits = torch.cat([pos_score.unsqueeze(-1), corrected], dim=-1)
        return (torch.logsumexp(logits, dim=-1) - pos_score).mean()
    raise ValueError(
        f"sampled_loss: loss_type must be one of {list(SAMPLED_LOSS_TYPES)}, "
        f"got {loss_type!r}"
    )


def chunk_rows(n_items, element_size, budget_mb):
    """Positions per chunk whose logits and log-softmax fit the budget (at least one)."""
    return max(1, int(budget_mb * 2**20) // (2 * n_items * element_size))


def _chunk_loss(all_item_scores, targets, *output):
    output = output[0] if len(output) == 1 else output
    return F.cross_entropy(all_item_scores(output), targets, reduction="sum")


def cross_entropy(all_item_scores, output, targets, n_items, budget_mb):
    """Mean cross-entropy over all items: whole within ``budget_mb``, else by
    checkpointed chunks."""
    parts = output if isinstance(output, tuple) else (output,)
    rows = chunk_rows(n_items, parts[0].element_size(), budget_mb)
    if targets.numel() <= rows:
        return F.cross_entropy(all_item_scores(output), targets)
    total = 0.0
    for start in range(0, targets.numel(), rows):
        chunk = tuple(p[start : start + rows] for p in parts)
        total = total + checkpoint(
            _chunk_loss,
            all_item_scores,
            targets[start : start + rows],
            *chunk,
            use_reentrant=False,
        )
    return total / targets.numel()


#: the logits of one chunk of :class:`LinearCrossEntropy`: about this many elements (4 MB
#: in float32, which the CPU's cache holds while the chunk's three matmuls read them)
LINEAR_CE_CHUNK = 2**20


class LinearCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy of ``hidden @ weight^T`` by chunks, each chunk's gradients
    computed with its loss."""

    @staticmethod
    def forward(ctx, hidden, weight, targets, rows):
        n = targets.numel()
        grad_hidden = torch.empty_like(hidden)
        grad_weight = torch.zeros_like(weight)
        total = hidden.new_zeros((), dtype=torch.float64)
        for start in range(0, n, rows):
            h, t = hidden[start : start + rows], targets[start : start + rows]
            logits = (h @ weight.transpose(0, 1)).to(grad_weight.dtype)  # [c, n_items]
            lse = torch.logsumexp(logits, dim=-1)
            total += (lse - logits.gather(1, t.unsqueeze(1)).squeeze(1)).sum().double()
            probs = logits.sub_(lse.unsqueeze(1)).exp_()  # the softmax, in place
            probs[torch.arange(len(t), device=t.device), t] -= 1.0
            grad_hidden[start : start + rows] = probs @ weight
            grad_weight += probs.transpose(0, 1) @ h.to(probs.dtype)
        ctx.save_for_backward(grad_hidden, grad_weight)
        ctx.n = n
        return (total / n).to(grad_weight.dtype)

    @staticmethod
    def backward(ctx, grad):
        grad_hidden, grad_weight = ctx.saved_tensors
        scale = grad / ctx.n
        return grad_hidden * scale, grad_weight * scale, None, None


def linear_cross_entropy(hidden, weight, targets, budget_mb):
    """Mean cross-entropy over the rows of ``weight``, by chunks within ``budget_mb``."""
    n_items = weight.size(0)
    rows = min(
        max(1, LINEAR_CE_CHUNK // n_items),
        chunk_rows(n_items, hidden.element_size(), budget_mb),
    )
    return LinearCrossEntropy.apply(hidden, weight, targets, rows)
