r"""The losses every model of ours can be trained with (``loss_type``, read by the base
class): cross-entropy over all items at every training position, under a memory budget
(``CE``: :func:`chunked_cross_entropy`), and losses of the positive against ``M`` sampled
negatives per position (:func:`sampled_loss`): ``BPR``, ``BCE`` and the sampled softmax
``SSM`` with its log-Q correction.

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
full logits (tested in float64); one extra ``[chunk, n_items]`` matmul per chunk. A model
whose score is not a dot product gives it as one (its ``score_factors`` and
``item_factors``: STOSA's :math:`-W_2^2` is a dot product of augmented vectors).
"""

import math

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

#: default of ``ce_logits_budget_mb`` (properties/overall.yaml)
DEFAULT_CE_LOGITS_BUDGET_MB = 512
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
    r"""Loss of one positive score ``[N]`` against ``M`` negative scores ``[N, M]`` per
    position, averaged over positions:

    * ``BPR``: :math:`\frac{1}{M}\sum_k -\log\sigma(s^+ - s^-_k)`;
    * ``BCE``: :math:`-\log\sigma(s^+) - \sum_k \log(1-\sigma(s^-_k))`, the binary
      cross-entropy of the positive and its M negatives (SASRec's for M = 1);
    * ``SSM``: the sampled softmax of Jean et al. (2015) with the log-Q correction
      (Bengio and Senecal, 2008; Blanc and Rendle, 2018):
      :math:`-s^+ + \log\big(e^{s^+} + \sum_k e^{s^-_k - \log(M Q(k))}\big)`, with
      ``neg_log_q`` :math:`= \log Q(k)` of each draw; its expectation approaches the
      softmax over all items as M grows, whatever the sampling distribution Q.
      ``neg_mask`` ``[N, M]`` (False: a negative that is the positive itself, drawn
      when the user's items are not excluded) leaves such draws out of the sum.
    """
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
