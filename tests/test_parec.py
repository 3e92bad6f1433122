"""PARec / FPARec: the positional attention against a direct computation, parameter counts
against the paper's Table 1, the fixed ablation patterns, initialization, end to end."""

import logging
import math
import re

import pytest
import torch

from experiments import research
from recbole_attn.engine.quick_start import build, run


def _build(model, config):
    model = research.model_for(model, config)  # the official forms: research wing
    out = build(model, "tiny", config_dict=config)
    logging.getLogger().handlers.clear()
    return out


@pytest.mark.parametrize("model", ["PARec", "FPARec"])
@pytest.mark.parametrize("alignment", ["first", "last"])
def test_attention_sublayer_matches_direct_computation(tiny_config, model, alignment):
    """F + Mask(softmax(R[pos_t, pos_s] / sqrt(d_h))) (LN(F) W_V + b), per head, by loops."""
    config = {**tiny_config, "n_heads": 2, "position_alignment": alignment}
    _, net, _, _ = _build(model, config)
    net = net.double().eval()
    attention = net.trm_encoder.layer[0].multi_head_attention
    seq = torch.tensor([[3, 5, 7, 2], [4, 6, 0, 0]])
    lengths = torch.tensor([4, 2])
    positions = net.position_ids(lengths, seq.size(1))
    mask = net.get_attention_mask(seq)
    hidden = torch.randn(2, seq.size(1), net.hidden_size).double()
    with torch.no_grad():
        got = attention(hidden, mask, positions, alignment)
        r = attention.score.block(0, attention.score.max_length)  # [h, n, n]
        values = attention.value(attention.LayerNorm(hidden))
    h, d_h, n = net.n_heads, net.hidden_size // net.n_heads, net.max_seq_length
    want = hidden.clone()
    for b in range(2):
        length = int(lengths[b])
        for t in range(length):
            pos = [n - length + i if alignment == "last" else i for i in range(t + 1)]
            for head in range(h):
                logits = torch.stack([r[head, pos[t], p] for p in pos]) / math.sqrt(d_h)
                weights = torch.softmax(logits, 0)
                cols = slice(head * d_h, (head + 1) * d_h)
                want[b, t, cols] += sum(
                    w * values[b, s, cols] for s, w in enumerate(weights)
                )
    valid = seq > 0
    torch.testing.assert_close(got[valid], want[valid], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("model,k", [("PARec", None), ("FPARec", 5)])
def test_parameter_counts_match_table_1(tiny_config, model, k):
    """Per attention layer: d^2 + h n^2 (PARec) or d^2 + 2 h k n (FPARec) weights, plus
    the value bias and the layer norm; no query, key or output projection."""
    config = {**tiny_config, "n_heads": 2}
    if k:
        config["factor_k"] = k
    _, net, _, _ = _build(model, config)
    d, n, h = net.hidden_size, net.max_seq_length, net.n_heads
    attention = net.trm_encoder.layer[0].multi_head_attention
    count = sum(p.numel() for p in attention.parameters())
    core = d * d + (h * n * n if k is None else 2 * h * k * n)
    assert count == core + d + 2 * d  # value bias, LayerNorm
    assert not any(hasattr(attention, n) for n in ("query", "key", "dense"))
    shown = re.sub(r"\x1b\[[0-9;]*m", "", str(net))  # RecBole colours it
    assert f"Trainable parameters: {sum(p.numel() for p in net.parameters())}" in shown


def test_fparec_initialization_gives_product_std_001(tiny_config):
    config = {**tiny_config, "MAX_ITEM_LIST_LENGTH": 60, "factor_k": 20}
    _, net, _, _ = _build("FPARec", config)
    score = net.trm_encoder.layer[0].multi_head_attention.score
    product = score.block(0, score.max_length)
    assert 0.007 < float(product.detach().std()) < 0.013
    _, net, _, _ = _build("PARec", config)
    r = net.trm_encoder.layer[0].multi_head_attention.score.R
    r = r.detach()
    assert 0.007 < float(r.std()) < 0.011 and float(r.abs().max()) <= 0.02


@pytest.mark.parametrize("pattern", ["average", "linear", "exponential"])
def test_fixed_patterns(tiny_config, pattern):
    """Weights proportional to w(t - s) over the valid prefix: 1, (n - D)/n, gamma^D."""
    config = {**tiny_config, "positional_pattern": pattern, "pattern_decay": 0.6}
    _, net, _, _ = _build("PARec", config)
    assert not any(
        "score" in name for name, _ in net.named_parameters()
    ), "fixed patterns are not learned"
    net.eval()
    seq = torch.tensor([[3, 5, 7, 2, 9], [4, 6, 8, 0, 0]])
    lengths = torch.tensor([5, 3])
    weights = net.attention_weights({net.ITEM_SEQ: seq, net.ITEM_SEQ_LEN: lengths})
    n = net.max_seq_length
    w = {
        "average": lambda dist: 1.0,
        "linear": lambda dist: (n - dist) / n,
        "exponential": lambda dist: 0.6**dist,
    }[pattern]
    for layer in weights:
        for b, length in enumerate(lengths.tolist()):
            for t in range(length):
                raw = torch.tensor([w(t - s) for s in range(t + 1)])
                torch.testing.assert_close(
                    layer[b, 0, t, : t + 1], (raw / raw.sum()).float()
                )


def test_bad_options_are_clear_errors(tiny_config):
    with pytest.raises(ValueError, match="ffn_placement must be one of"):
        _build("PARec", {**tiny_config, "ffn_placement": "end"})  # research wing
    with pytest.raises(ValueError, match="ffn_placement is a research-only option"):
        build("PARec", "tiny", config_dict={**tiny_config, "ffn_placement": "after"})
    with pytest.raises(ValueError, match="positional_pattern must be one of"):
        _build("PARec", {**tiny_config, "positional_pattern": "cosine"})
    with pytest.raises(ValueError, match="factor_k must be an integer >= 1"):
        _build("FPARec", {**tiny_config, "factor_k": 0})


@pytest.mark.parametrize(
    "model,extra",
    [
        ("PARec", {}),
        ("FPARec", {}),
        ("PARec", {"add_position_embedding": True, "ffn_placement": "after"}),
        ("PARec", {"positional_pattern": "average"}),
        ("PARec", {"positional_pattern": "linear"}),
        ("PARec", {"positional_pattern": "exponential"}),
    ],
)
def test_end_to_end(tiny_config, model, extra):
    model = research.model_for(model, extra)  # the official forms: research wing
    result = run(model, "tiny", config_dict={**tiny_config, **extra})
    logging.getLogger().handlers.clear()
    values = list(result["test_result"].values())
    assert values and all(math.isfinite(v) for v in values)
