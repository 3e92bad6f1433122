r"""The losses of our models: one sampled negative per position (:func:`sampled_loss`,
BCE or BPR), and cross-entropy over all items at every training position, under a memory
budget (:func:`chunked_cross_entropy`).

``F.cross_entropy(hidden @ E^T, targets)`` materializes the ``[N, n_items]`` logits and
keeps their log-softmax for the backward: with a loss at every position (N = the batch's
valid positions, a few thousand) and a large catalogue that is gigabytes.
:func:`chunked_cross_entropy` computes the same loss as

.. math::
    \frac{1}{N} \sum_n \mathrm{logsumexp}_j(h_n \cdot e_j) - h_n \cdot e_{y_n},

the target logits as N dot products, the log-sum-exp over chunks of positions whose logits
fit the budget (``ce_logits_budget_mb``), in a custom autograd function that saves only
the per-position log-sum-exp and recomputes a chunk's logits in the backward (one chunk
alive at a time in either pass). Same loss and gradients as ``F.cross_entropy`` on the
full logits (tested in float64); one extra ``[chunk, n_items]`` matmul per chunk.
"""

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

#: default of ``ce_logits_budget_mb`` (properties/overall.yaml)
DEFAULT_CE_LOGITS_BUDGET_MB = 512
#: losses with one sampled negative per position, and CE (softmax over all items): the
#: loss types of our item-embedding models
SAMPLED_LOSS_TYPES = ("BCE", "BPR")
LOSS_TYPES = SAMPLED_LOSS_TYPES + ("CE",)


def sampled_loss(pos_score, neg_score, loss_type):
    r"""Loss of one positive and one sampled negative score per position: ``BCE``
    (:math:`-\log\sigma(s^+) - \log(1-\sigma(s^-))`, the SASRec and PAtt papers') or
    ``BPR`` (:math:`-\log\sigma(s^+ - s^-)`), averaged over positions."""
    if loss_type == "BPR":
        return F.softplus(neg_score - pos_score).mean()
    if loss_type == "BCE":
        return (F.softplus(-pos_score) + F.softplus(neg_score)).mean()
    raise ValueError(f"sampled_loss: loss_type must be BCE or BPR, got {loss_type!r}")


def chunk_rows(n_items, element_size, budget_mb):
    """Positions per chunk: the most whose ``[rows, n_items]`` logits fit the budget
    (at least one)."""
    return max(1, int(budget_mb * 2**20) // (n_items * element_size))


def chunk_logits(hidden, weight):
    """The logits ``[c, n_items]`` of one chunk of positions (the one place the chunked
    loss materializes logits; tests count the elements alive through it)."""
    return hidden @ weight.transpose(0, 1)


class ChunkedLogSumExp(torch.autograd.Function):
    """``logsumexp(hidden @ weight^T, -1)`` ``[N]``, ``rows`` positions at a time; the
    backward recomputes each chunk's logits (saved: ``hidden``, ``weight`` and the
    ``[N]`` result only)."""

    @staticmethod
    def forward(ctx, hidden, weight, rows):
        lse = hidden.new_empty(hidden.size(0))
        for start in range(0, hidden.size(0), rows):
            logits = chunk_logits(hidden[start : start + rows], weight)
            top = logits.amax(-1, keepdim=True)
            lse[start : start + rows] = (
                logits.sub_(top).exp_().sum(-1).log_() + top[:, 0]
            )
            del logits, top
        ctx.save_for_backward(hidden, weight, lse)
        ctx.rows = rows
        return lse

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        hidden, weight, lse = ctx.saved_tensors
        rows = ctx.rows
        grad_hidden = torch.empty_like(hidden) if ctx.needs_input_grad[0] else None
        grad_weight = torch.zeros_like(weight) if ctx.needs_input_grad[1] else None
        for start in range(0, hidden.size(0), rows):
            stop = start + rows
            chunk = hidden[start:stop]
            # softmax(logits) * grad, in place: one [c, n_items] tensor alive
            probs = chunk_logits(chunk, weight)
            probs.sub_(lse[start:stop, None]).exp_().mul_(grad[start:stop, None])
            if grad_hidden is not None:
                grad_hidden[start:stop] = probs @ weight
            if grad_weight is not None:
                grad_weight.addmm_(probs.transpose(0, 1), chunk)
            del probs
        return grad_hidden, grad_weight, None


def chunked_cross_entropy(hidden, weight, targets, budget_mb):
    """Mean cross-entropy of the softmax over all rows of ``weight`` ``[n_items, d]``
    at every row of ``hidden`` ``[N, d]``, targets ``[N]``; no tensor of logits above
    ``budget_mb`` megabytes. When the logits and their log-softmax (2 N n_items
    elements) fit the budget, this is ``F.cross_entropy`` itself; otherwise the
    log-sum-exp runs by chunks (:class:`ChunkedLogSumExp`)."""
    n_items = weight.size(0)
    rows = chunk_rows(n_items, hidden.element_size(), budget_mb)
    if 2 * hidden.size(0) <= rows:
        return F.cross_entropy(chunk_logits(hidden, weight), targets)
    lse = ChunkedLogSumExp.apply(hidden, weight, rows)
    target_logits = (hidden * weight[targets]).sum(-1)
    return (lse - target_logits).mean()
