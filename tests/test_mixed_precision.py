"""Mixed precision (RecBole's ``enable_amp``: training under bf16 autocast on CPU, fp16 or
bf16 on GPU): every model trains; the parts that need float32 stay in float32 (STOSA's
Wasserstein distances, the k-DPP minors and normalizers, RKSA's kernels and Cholesky
factor, the losses' normalizers); evaluation is never autocast, so a checkpoint evaluates
to the same metrics with or without it."""

import logging

import pytest
import torch

from recbole_attn.model.patt import causal_masks
from recbole_attn.model.stosa import pairwise_wasserstein2_squared
from recbole_attn.engine.quick_start import evaluate, run
from test_model_contract import CASES, model_builder

BF16 = torch.bfloat16


def test_wasserstein_distances_stay_in_float32_under_autocast():
    """In bf16, |x|^2 + |y|^2 - 2xy cancels: distances of close Gaussians are noise.
    Under autocast the distance is the float32 one of the same (bf16) inputs."""
    gen = torch.Generator().manual_seed(0)
    mean = (10.0 + torch.randn(4, 6, 16, generator=gen)).to(BF16)
    cov = (torch.rand(4, 6, 16, generator=gen) + 0.5).to(BF16)
    near = mean + 0.01
    with torch.autocast("cpu", dtype=BF16):
        got = pairwise_wasserstein2_squared(mean, cov, near, cov)
    want = pairwise_wasserstein2_squared(
        mean.float(), cov.float(), near.float(), cov.float()
    )
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want)
    # what plain bf16 arithmetic would give: far off
    x = torch.cat([mean, cov.sqrt()], -1)
    y = torch.cat([near, cov.sqrt()], -1)
    plain = (x * x).sum(-1, keepdim=True) + (y * y).sum(-1).unsqueeze(-2) - 2 * x @ y.mT
    assert (plain.float() - want).abs().max() > 10 * (got - want).abs().max() + 1.0


def test_dpp_logits_stay_in_float32_under_autocast(tiny_config):
    """The k-DPP minors (d_r d_t - L_rt^2) cancel in bf16; under autocast PAtt's logits
    are float32 and equal those of the float32 sampler."""
    from recbole_attn.engine.quick_start import build

    _, net, _, _ = build("PAtt", "tiny", config_dict={**tiny_config, "dpp_k": 3})
    logging.getLogger().handlers.clear()
    attention = net.trm_encoder.layer[0].multi_head_attention
    gen = torch.Generator().manual_seed(1)
    valid = torch.tensor([[1] * 8, [1] * 5 + [0] * 3]).bool()
    sampler = torch.rand(2, 1, 8, 16, generator=gen).to(BF16)
    masks = causal_masks(valid, 3)
    with torch.autocast("cpu", dtype=BF16):
        got = attention.logits(sampler, valid, masks)
    want = attention.logits(sampler.float(), valid, masks)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want)


@pytest.fixture(scope="module")
def built(tiny_data_path, tmp_path_factory):
    work = tmp_path_factory.mktemp("amp")
    return model_builder(tiny_data_path, work, lambda net: net, hidden_dropout_prob=0.0)


@pytest.mark.parametrize("name,extra", CASES)
def test_every_model_trains_under_bf16_autocast(built, name, extra):
    """One training step under bf16 autocast: finite loss and gradients, and the loss
    within a few percent of the float32 one (same batch, same negatives and noise)."""
    _, net, (train_data, _, _) = built(name, extra)
    batch = next(iter(train_data))
    net.train()
    losses = {}
    try:
        for amp in (False, True):
            net.zero_grad(set_to_none=True)
            torch.manual_seed(3)
            with torch.autocast("cpu", dtype=BF16, enabled=amp):
                loss = net.calculate_loss(batch)
            loss = sum(loss) if isinstance(loss, tuple) else loss
            assert loss.dtype == torch.float32 and torch.isfinite(loss), amp
            loss.backward()
            grads = [p.grad for p in net.parameters() if p.grad is not None]
            assert grads and all(torch.isfinite(g).all() for g in grads), amp
            losses[amp] = loss.item()
    finally:
        net.zero_grad(set_to_none=True)
        net.eval()
    assert losses[True] == pytest.approx(losses[False], rel=0.05), losses


@pytest.mark.parametrize("name", ["SASRecAP", "STOSA", "PAtt", "RKSA"])
def test_amp_trains_and_evaluates_like_fp32(name, tiny_config, tmp_path, monkeypatch):
    """``--enable_amp=True`` trains through RecBole's training loop; evaluating the
    saved model with or without it gives the same metrics (evaluation is exact)."""
    monkeypatch.chdir(tmp_path)
    config = {**tiny_config, "epochs": 1, "enable_amp": True}
    result = run(name, "tiny", config_dict=config)
    logging.getLogger().handlers.clear()
    assert all(torch.isfinite(torch.tensor(v)) for v in result["test_result"].values())
    path = result["saved_model_file"]
    with_amp = evaluate(path, config_dict={"enable_amp": True})
    without = evaluate(path, config_dict={"enable_amp": False})
    logging.getLogger().handlers.clear()
    assert with_amp["test_result"] == without["test_result"]
