"""The same functions as ``nn.Dropout`` and RecBole's ``FeedForward.gelu`` at a fraction
of their CPU cost, swapped in when the plugin builds a model (:func:`speed_up`): a
dropout mask from ``torch.rand`` (not ``bernoulli_``: other random numbers, the same
distribution) and ``F.gelu`` (docs/models.md, "Training")."""

import torch
import torch.nn.functional as F
from recbole.model.layers import FeedForward
from torch import nn


class _Dropout(torch.autograd.Function):
    """``x * mask``, the mask drawn in float32 (a bf16 draw would round p)."""

    @staticmethod
    def forward(ctx, x, p):
        mask = torch.rand(x.shape, device=x.device).ge_(p).mul_(1.0 / (1.0 - p))
        mask = mask.to(x.dtype)  # a copy only under mixed precision
        ctx.save_for_backward(mask)
        return x * mask

    @staticmethod
    def backward(ctx, grad):
        (mask,) = ctx.saved_tensors
        return grad * mask, None


class FastDropout(nn.Dropout):

    def forward(self, x):
        if not self.training or self.p == 0.0:
            return x
        if self.p >= 1.0 or self.inplace:
            return super().forward(x)
        return _Dropout.apply(x, self.p)


def speed_up(model):
    for module in model.modules():
        if type(module) is nn.Dropout:
            module.__class__ = FastDropout
        elif isinstance(module, FeedForward):
            act = module.intermediate_act_fn
            if getattr(act, "__func__", None) is FeedForward.gelu:
                module.intermediate_act_fn = F.gelu
    return model
