r"""The losses every model of ours can be trained with (``loss_type``): cross-entropy
over all items at every training position, under a memory budget (``CE``:
:func:`cross_entropy`), and losses of the positive against ``M`` sampled negatives per
position (:func:`sampled_loss`): ``BPR``, ``BCE`` and the sampled softmax ``SSM`` with its
log-Q correction.

``F.cross_entropy`` on the ``[N, n_items]`` logits keeps them and their log-softmax for
the backward: with a loss at every position (N = the batch's valid positions, a few
thousand) and a large catalogue that is gigabytes. When those two tensors would exceed the
budget (``ce_logits_budget_mb``), :func:`cross_entropy` computes the same loss by chunks of
positions, each chunk's logits recomputed in the backward (activation checkpointing: one
chunk's logits alive at a time in either pass). Below the budget it is ``F.cross_entropy``
itself, with nothing recomputed.
"""

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

    Half-precision scores (mixed precision) are taken in float32.
    """
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
    """Positions per chunk: the most whose ``[rows, n_items]`` logits and their
    log-softmax fit the budget (at least one)."""
    return max(1, int(budget_mb * 2**20) // (2 * n_items * element_size))


def _chunk_loss(all_item_scores, targets, *output):
    output = output[0] if len(output) == 1 else output
    return F.cross_entropy(all_item_scores(output), targets, reduction="sum")


def cross_entropy(all_item_scores, output, targets, n_items, budget_mb):
    """Mean cross-entropy of the softmax over all items at every row of ``output`` (a
    tensor ``[N, ...]`` or a tuple of them), ``all_item_scores(output)`` giving the
    ``[N, n_items]`` logits, targets ``[N]``; no logits above ``budget_mb`` megabytes.
    Within the budget this is ``F.cross_entropy`` on the whole logits; above it the sum
    runs over chunks of rows, each checkpointed (recomputed in the backward)."""
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
    """Mean cross-entropy of the softmax of ``hidden @ weight^T`` at every row, targets
    ``[N]``, without the ``[N, n_items]`` logits ever in memory: chunk by chunk of rows,
    the forward computes the loss and its gradients (``softmax - one-hot``, then one
    matmul each for ``hidden`` and ``weight``) while the chunk's logits are in the cache;
    the backward only scales them. The same three matmuls as ``F.cross_entropy`` on the
    logits and its backward, nothing recomputed, no log-softmax stored."""

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
    """Mean cross-entropy of the softmax over all rows of ``weight`` ``[n_items, d]`` at
    every row of ``hidden`` ``[N, d]`` (:class:`LinearCrossEntropy`), chunks of at most
    :data:`LINEAR_CE_CHUNK` logits and never above ``budget_mb``."""
    n_items = weight.size(0)
    rows = min(
        max(1, LINEAR_CE_CHUNK // n_items),
        chunk_rows(n_items, hidden.element_size(), budget_mb),
    )
    return LinearCrossEntropy.apply(hidden, weight, targets, rows)
