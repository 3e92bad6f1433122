"""AWRSR: every refinement against a direct loop over the paper's equation, the refined
matrices the layers aggregate with, STOSA's covariance stream, configuration errors and
end-to-end runs of the seven backbone/refinement combinations."""

import logging
import math

import pytest
import torch

from types import SimpleNamespace

from recbole_attn.model.awrsr import BACKBONES, REFINERS, RefinedSASRec
from recbole_attn.engine.quick_start import build, run

#: every valid (backbone, refinement): stoc needs STOSA
COMBINATIONS = [
    (backbone, refinement)
    for backbone in BACKBONES
    for refinement in REFINERS
    if refinement != "stoc" or backbone == "STOSA"
]


def _context(lengths, length, max_length, alignment):
    """The allowed (query, key) pairs and the models' additive mask ``[B, 1, L, L]``
    (RecBole's: 0 or -10000), position ids and valid positions of a batch."""
    lengths = torch.tensor(lengths)
    valid = torch.arange(length).unsqueeze(0) < lengths.unsqueeze(1)
    model = SimpleNamespace(position_alignment=alignment, max_seq_length=max_length)
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    return SimpleNamespace(
        allowed=valid[:, None, None, :] & causal,
        attention_mask=torch.where(valid[:, None, None, :] & causal, 0.0, -10000.0),
        positions=RefinedSASRec.position_ids(model, lengths, length),
        valid=valid,
    )


def _attention(context, heads, gen):
    """A random normalized, causally masked attention matrix [B, h, L, L]."""
    mask = context.allowed
    logits = torch.randn(*mask.shape[:1], heads, *mask.shape[2:], generator=gen)
    logits = logits.double().masked_fill(~mask, -math.inf)
    return torch.softmax(logits, -1).nan_to_num(0.0) * mask


def _direct(name, a, w, pos, allowed, scale):
    """The refined weights of one head by loops over eq. 2-4 (and M_stoc), then the
    masked softmax; ``a [L, L]``, ``w``: the refiner's matrices, ``pos``: key positions.
    """
    n_len = a.size(0)

    def row(k, mat):  # A_k: W, with W's rows at the key positions
        return sum(a[k, j] * mat[pos[j]] for j in range(n_len))

    b = torch.zeros(n_len, n_len, dtype=torch.float64)
    for k in range(n_len):
        for t in range(n_len):
            if name == "simp":
                b[k, t] = row(k, w["W_RQ"]) @ row(t, w["W_RK"]) / scale
            elif name == "add":
                b[k, t] = (row(k, w["W_RK"]) @ row(t, w["W_RQ"]) / scale + a[k, t]) / 2
            elif name == "stoc":
                mu_k, mu_t = row(k, w["W_mu"]), row(t, w["W_mu"])
                cov_k = torch.nn.functional.elu(row(k, w["W_sigma"])) + 1
                cov_t = torch.nn.functional.elu(row(t, w["W_sigma"])) + 1
                dist = ((mu_k - mu_t) ** 2).sum()
                dist += ((cov_k.sqrt() - cov_t.sqrt()) ** 2).sum()
                b[k, t] = -dist / scale
    if name == "value":
        # softmax over allowed t of (A_k W^RQ).(A_t W^RK)/sqrt(d_h), times the values
        # V[t, j'] = sum_j A[t, j] W^RV[pos_j, pos_j']
        for k in range(n_len):
            keys = [t for t in range(n_len) if allowed[k, t]]
            logits = torch.stack(
                [row(k, w["W_RQ"]) @ row(t, w["W_RK"]) / scale for t in keys]
            )
            weights = torch.softmax(logits, 0)
            for j2 in range(n_len):
                values = [
                    sum(a[t, j] * w["W_RV"][pos[j], pos[j2]] for j in range(n_len))
                    for t in keys
                ]
                b[k, j2] = sum(wt * v for wt, v in zip(weights, values))
    out = torch.zeros_like(b)
    for k in range(n_len):
        keys = allowed[k]
        if keys.any():
            out[k, keys] = torch.softmax(b[k, keys], 0)
    return out


@pytest.mark.parametrize("name", ["simp", "value", "add", "stoc"])
@pytest.mark.parametrize("alignment", ["first", "last"])
def test_refiners_match_the_papers_equations(name, alignment):
    gen = torch.Generator().manual_seed(0)
    n, heads, head_size = 7, 2, 4
    context = _context([5, 3], 5, n, alignment)
    refiner = REFINERS[name](n, head_size, 0.3, alignment).double()
    a = _attention(context, heads, gen)
    got = refiner(a, context.attention_mask, context.positions)
    weights = dict(refiner.named_parameters())
    for b in range(2):
        allowed = context.allowed[b, 0]
        pos = context.positions[b].tolist()
        for h in range(heads):
            want = _direct(name, a[b, h], weights, pos, allowed, math.sqrt(head_size))
            valid = context.valid[b]
            torch.testing.assert_close(
                got[b, h][valid], want[valid], rtol=1e-10, atol=1e-12
            )


def _build(config, backbone, refinement, **extra):
    out = build(
        "AWRSR",
        "tiny",
        config_dict={
            **config,
            "backbone": backbone,
            "refinement": refinement,
            "n_layers": 2,
            **extra,
        },
    )
    logging.getLogger().handlers.clear()
    return out


def test_attention_weights_are_the_refined_matrices(tiny_config):
    _, net, _, _ = _build(tiny_config, "SASRec", "simp")
    net.eval()
    seq = torch.tensor([[3, 5, 7, 2, 9], [4, 6, 8, 0, 0]])
    inter = {net.ITEM_SEQ: seq, net.ITEM_SEQ_LEN: torch.tensor([5, 3])}
    refined = net.attention_weights(inter)
    unrefined = net.attention_weights(inter, refined=False)
    assert len(refined) == len(unrefined) == 2
    context = _context([5, 3], 5, net.max_seq_length, "first")
    for layer, a, b in zip(net.backbone.trm_encoder.layer, unrefined, refined):
        attention = layer.multi_head_attention
        torch.testing.assert_close(
            b, attention.refiner(a, context.attention_mask, context.positions)
        )
        assert not torch.allclose(a, b)
    with pytest.raises(ValueError, match="no attention refiner"):
        _, plain, _, _ = build("SASRecAP", "tiny", config_dict=tiny_config)
        plain.attention_weights(inter, refined=False)


def test_stosa_covariances_aggregate_with_the_squared_refined_weights(tiny_config):
    # the paper's layer means: both streams are aggregated (the official preset's layers
    # aggregate the covariances only)
    _, net, _, _ = _build(
        tiny_config, "STOSA", "simp", n_layers=1, stosa_preset="paper"
    )
    net = net.double().eval()
    seq = torch.tensor([[3, 5, 7, 2, 9], [4, 6, 8, 0, 0]])
    inter = {net.ITEM_SEQ: seq, net.ITEM_SEQ_LEN: torch.tensor([5, 3])}
    layer = net.backbone.trm_encoder.layer[0]
    attention = layer.multi_head_attention
    seen = {}
    # the layer's inputs and the inputs of its two (pre-LN) FFNs' LayerNorms: the
    # attention's outputs
    handles = [
        layer.register_forward_pre_hook(
            lambda _, args: seen.update(mean=args[0], cov=args[1])
        ),
        layer.feed_forward.LayerNorm.register_forward_pre_hook(
            lambda _, args: seen.update(out_cov=args[0])
        ),
        layer.feed_forward_mean.LayerNorm.register_forward_pre_hook(
            lambda _, args: seen.update(out_mean=args[0])
        ),
    ]
    probs = net.attention_weights(inter)[0]
    for handle in handles:
        handle.remove()
    mean, cov = seen["mean"], seen["cov"]
    h = attention.n_heads

    def heads(x):
        return x.view(2, -1, h, x.size(-1) // h).transpose(1, 2)

    def merge(x):
        return x.transpose(1, 2).reshape(2, x.size(2), -1)

    # the value covariances: the reference code's ELU(W_V x) + 1 (STOSA's default)
    z_cov = merge(
        (probs * probs) @ heads(torch.nn.functional.elu(attention.value(cov)) + 1)
    )
    want = attention.LayerNorm(cov + attention.dense(z_cov))
    z_mean = merge(probs @ heads(attention.value_mean(mean)))
    want_mean = attention.LayerNorm_mean(mean + attention.dense_mean(z_mean))
    torch.testing.assert_close(seen["out_cov"], want)
    torch.testing.assert_close(seen["out_mean"], want_mean)


@pytest.mark.parametrize(
    "backbone,refinement,message",
    [
        ("SASRec", "stoc", "use it with backbone: STOSA"),
        ("GRU4Rec", "simp", "backbone must be one of"),
        ("STOSA", "double", "refinement must be one of"),
    ],
)
def test_invalid_combinations_are_clear_errors(
    tiny_config, backbone, refinement, message
):
    with pytest.raises(ValueError, match=message):
        _build(tiny_config, backbone, refinement)


def test_cli_value_refinement_is_not_mangled(tiny_config):
    """RecBole's eval-based conversion turned --refinement=value into another value."""
    config, net, _, _ = _build(tiny_config, "SASRec", "value")
    assert config["refinement"] == "value"
    layer = net.backbone.trm_encoder.layer[0]
    assert type(layer.multi_head_attention.refiner).__name__ == ("ValueRefiner")


#: one combination in the quick suite, every other one with -m slow
END_TO_END = [
    pytest.param(*combination, marks=() if i == 0 else pytest.mark.slow)
    for i, combination in enumerate(COMBINATIONS)
]


@pytest.mark.parametrize("backbone,refinement", END_TO_END)
def test_end_to_end(tiny_config, backbone, refinement):
    assert len(COMBINATIONS) == 7  # 3 on SASRec, 4 on STOSA
    result = run(
        "AWRSR",
        "tiny",
        config_dict={**tiny_config, "backbone": backbone, "refinement": refinement},
    )
    logging.getLogger().handlers.clear()
    values = list(result["test_result"].values())
    assert values and all(math.isfinite(v) for v in values)
