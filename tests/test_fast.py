"""The plugin's faster modules (:mod:`recbole_attn.sequential.fast`) compute the same
functions as the ones they replace: dropout's kept fraction, scale and gradient, and
RecBole's GELU; every model the plugin builds uses them, with its parameters unchanged.
"""

import pytest
import torch
import torch.nn.functional as F
from recbole.model.layers import FeedForward
from torch import nn

from recbole_attn.engine.quick_start import build
from recbole_attn.sequential.fast import FastDropout, speed_up


@pytest.mark.parametrize("p", [0.2, 0.5, 0.9])
def test_fast_dropout_keeps_1_minus_p_scaled_and_its_gradient_is_the_mask(p):
    torch.manual_seed(0)
    x = torch.randn(1000, 1000, dtype=torch.float64, requires_grad=True)
    drop = FastDropout(p)
    y = drop(x)
    kept = y != 0
    # a binomial fraction of 10^6 draws: standard deviation below 5e-4
    assert abs(kept.double().mean().item() - (1 - p)) < 3e-3
    torch.testing.assert_close(y[kept], x[kept] / (1 - p))
    grad = torch.randn_like(x)
    y.backward(grad)
    torch.testing.assert_close(x.grad, grad * kept / (1 - p))
    drop.eval()
    assert drop(x) is x


def test_fast_dropout_keeps_the_dtype_and_the_edge_cases():
    x = torch.randn(64, 32).bfloat16()
    assert FastDropout(0.5)(x).dtype == torch.bfloat16
    assert FastDropout(0.0)(x) is x
    assert (FastDropout(1.0)(x) == 0).all()


def test_recbole_gelu_is_torchs():
    x = torch.linspace(-8, 8, 10001, dtype=torch.float64)
    ffn = FeedForward(4, 8, 0.0, "gelu", 1e-12)
    torch.testing.assert_close(F.gelu(x), ffn.gelu(x), rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("name", ["SASRecAP", "STOSA", "PAtt", "RKSA"])
def test_models_use_the_fast_modules_with_the_same_parameters(tiny_config, name):
    config, net, _, _ = build(name, "tiny", config_dict=tiny_config)
    dropouts = [m for m in net.modules() if isinstance(m, nn.Dropout)]
    assert dropouts and all(type(m) is FastDropout for m in dropouts)
    ffns = [m for m in net.modules() if isinstance(m, FeedForward)]
    assert bool(ffns) == (name != "STOSA")  # STOSA has its own ELU sublayer
    if config["hidden_act"] == "gelu":  # RKSA's is ReLU, left as it is
        assert all(m.intermediate_act_fn is F.gelu for m in ffns)
    before = {k: v.clone() for k, v in net.state_dict().items()}
    speed_up(net)  # idempotent, no parameter touched
    assert before.keys() == net.state_dict().keys()
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
