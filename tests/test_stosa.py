"""STOSA: Wasserstein distances, ranking, loss, the legacy flag (docs/models.md, "STOSA")."""

import itertools
import math

import numpy as np
import pytest
import torch

from experiments import research
from recbole_attn.model.stosa import (
    elu_plus_one,
    pairwise_wasserstein2_squared,
    scaled_wasserstein2_squared,
    wasserstein2_squared,
)
from recbole_attn.plugin.stosa import (
    SquaredWeightsAggregate,
    triplet_wasserstein2_squared,
)
from recbole_attn.engine.quick_start import build
from recbole_attn.sequential.losses import sampled_loss


def w2_squared_direct(mu1, s1, mu2, s2):
    """Paper eq. 5 for diagonal covariances, written out per dimension."""
    total = 0.0
    for a, b, c, d in zip(mu1, s1, mu2, s2):
        # trace(S1 + S2 - 2 (S1^1/2 S2 S1^1/2)^1/2) for 1x1 blocks
        total += (a - c) ** 2 + b + d - 2.0 * math.sqrt(math.sqrt(b) * d * math.sqrt(b))
    return total


def test_pairwise_w2_matches_direct_formula():
    gen = torch.Generator().manual_seed(0)
    mu1 = torch.randn(2, 5, 7, generator=gen, dtype=torch.float64)
    mu2 = torch.randn(2, 4, 7, generator=gen, dtype=torch.float64)
    s1 = torch.rand(2, 5, 7, generator=gen, dtype=torch.float64) * 3 + 0.01
    s2 = torch.rand(2, 4, 7, generator=gen, dtype=torch.float64) * 3 + 0.01
    got = pairwise_wasserstein2_squared(mu1, s1, mu2, s2)
    assert got.shape == (2, 5, 4)
    for b, i, j in itertools.product(range(2), range(5), range(4)):
        want = w2_squared_direct(
            mu1[b, i].tolist(), s1[b, i].tolist(), mu2[b, j].tolist(), s2[b, j].tolist()
        )
        assert got[b, i, j].item() == pytest.approx(want, rel=1e-10, abs=1e-10)
        elementwise = wasserstein2_squared(mu1[b, i], s1[b, i], mu2[b, j], s2[b, j])
        assert elementwise.item() == pytest.approx(want, rel=1e-10, abs=1e-10)
    # against a plain item table [M, d] (the full-ranking form)
    table = pairwise_wasserstein2_squared(mu1[0], s1[0], mu2[0], s2[0])
    torch.testing.assert_close(table, got[0])


@pytest.fixture
def stosa(tiny_config):
    config, net, trainer, data = build(
        "STOSA", "tiny", config_dict={**tiny_config, "hidden_dropout_prob": 0.0}
    )
    net.eval()
    return net, data


def _seq(net, rows):
    length = net.max_seq_length
    seq = torch.zeros(len(rows), length, dtype=torch.long)
    for r, items in enumerate(rows):
        seq[r, : len(items)] = torch.tensor(items)
    return seq, torch.tensor([len(r) for r in rows])


def test_ranks_by_ascending_distance(stosa):
    net, _ = stosa
    d = net.hidden_size
    with torch.no_grad():
        mean = torch.zeros(1, d)
        cov = torch.ones(1, d)
        # item 4 is the sequence's own Gaussian: cov row with ELU(x) + 1 = 1 -> x = 0
        net.mean_item_embedding.weight[4] = 0.0
        net.cov_item_embedding.weight[4] = 0.0
        # items 5 and 6 are further away, 6 more than 5
        net.mean_item_embedding.weight[5] = 0.5
        net.cov_item_embedding.weight[5] = 0.0
        net.mean_item_embedding.weight[6] = 1.0
        net.cov_item_embedding.weight[6] = 2.0
        scores = net.all_item_scores((mean, cov))[0]
        # item 0 is padding (RecBole's trainer sets its score to -inf)
        order = torch.argsort(scores[1:], descending=True) + 1
        assert order[0].item() == 4
        assert scores[4].item() == pytest.approx(0.0, abs=1e-5)
        assert (order == 5).nonzero().item() < (order == 6).nonzero().item()
        # the whole ranking is ascending distance
        items_cov = elu_plus_one(net.cov_item_embedding.weight)
        dist = torch.tensor(
            [
                w2_squared_direct(
                    mean[0].tolist(),
                    cov[0].tolist(),
                    net.mean_item_embedding.weight[j].tolist(),
                    items_cov[j].tolist(),
                )
                for j in range(net.n_items)
            ]
        )
        torch.testing.assert_close(scores, -dist.float(), rtol=1e-4, atol=1e-4)


def test_loss_is_bpr_plus_pvn_hinge(stosa):
    net, _ = stosa
    d = net.hidden_size
    with torch.no_grad():
        net.mean_item_embedding.weight[1] = 1.0  # positive
        net.cov_item_embedding.weight[1] = 0.0  # -> cov 1
        net.mean_item_embedding.weight[2] = 0.0  # negative
        net.cov_item_embedding.weight[2] = 0.0
    mean = torch.zeros(2, d, requires_grad=True)
    cov = torch.full((2, d), 4.0, requires_grad=True)
    pos, neg = torch.tensor([1, 1]), torch.tensor([2, 2])
    output = (mean, cov)
    bpr = sampled_loss(
        net.item_scores(output, pos), net.item_scores(output, neg), "BPR"
    )
    (pvn,) = net.position_terms(output, pos, neg.unsqueeze(-1))
    # the model file's own loss on RecBole's negatives: the same two terms
    own = net.loss_fct(net.item_scores(output, pos), net.item_scores(output, neg))
    assert own.item() == pytest.approx(bpr.item(), rel=1e-3)  # RecBole: log(1e-10 + .)
    own_pvn = net.pvn_weight * net.pvn_loss(output, pos, neg)
    assert own_pvn.item() == pytest.approx(pvn.item())
    # by hand: d(s, pos) = d*1 + d*(2-1)^2 = 2d; d(s, neg) = 0 + d = d; d(pos, neg) = d
    d_pos, d_neg, d_pn = 2.0 * d, 1.0 * d, 1.0 * d
    want_bpr = -math.log(1.0 / (1.0 + math.exp(-(d_neg - d_pos))))
    want_pvn = net.pvn_weight * max(0.0, d_pos - d_pn)
    assert bpr.item() == pytest.approx(want_bpr, rel=1e-5)
    assert pvn.item() == pytest.approx(want_pvn, rel=1e-5)
    (bpr + pvn).backward()
    assert torch.isfinite(mean.grad).all() and torch.isfinite(cov.grad).all()
    assert mean.grad.abs().sum() > 0


def test_triplet_distances_are_the_direct_ones():
    gen = torch.Generator().manual_seed(3)
    n, m, d = 3, 2, 5
    mean, pos_mean = (
        torch.randn(n, d, generator=gen, dtype=torch.float64) for _ in "ab"
    )
    cov, pos_cov = (
        torch.rand(n, d, generator=gen, dtype=torch.float64) + 0.1 for _ in "ab"
    )
    neg_mean = torch.randn(n, m, d, generator=gen, dtype=torch.float64)
    neg_cov = torch.rand(n, m, d, generator=gen, dtype=torch.float64) + 0.1
    got = triplet_wasserstein2_squared(mean, cov, pos_mean, pos_cov, neg_mean, neg_cov)
    assert [t.shape for t in got] == [(n,), (n, m), (n, m)]
    for i, k in itertools.product(range(n), range(m)):
        s, p, q = (
            (mean[i], cov[i]),
            (pos_mean[i], pos_cov[i]),
            (neg_mean[i, k], neg_cov[i, k]),
        )
        for value, (a, b) in zip(
            (got[0][i], got[1][i, k], got[2][i, k]), ((s, p), (s, q), (p, q))
        ):
            want = w2_squared_direct(*(t.tolist() for t in (*a, *b)))
            assert value.item() == pytest.approx(want, rel=1e-10, abs=1e-10)


@pytest.mark.parametrize("loss_type", ["BPR", "BCE", "SSM"])
def test_the_sampled_loss_and_hinge_from_shared_distances_equal_the_scores(
    stosa, loss_type
):
    """The plugin's position losses (one set of distances) against the sampled loss of
    ``item_scores`` and the hinge written out, in value and gradient."""
    net, _ = stosa
    net.loss_type = loss_type
    gen = torch.Generator().manual_seed(5)
    n, m, d = 4, 3, net.hidden_size
    pos = torch.randint(1, net.n_items, (n,), generator=gen)
    neg = torch.randint(1, net.n_items, (n, m), generator=gen)
    neg_log_q = torch.rand(n, m, generator=gen).log()
    leaves = (torch.randn(n, d, generator=gen), torch.rand(n, d, generator=gen) + 0.5)

    def run(shared):
        mean, cov = (t.clone().requires_grad_() for t in leaves)
        net.zero_grad()
        if shared:
            loss, pvn = net.position_losses((mean, cov), pos, neg, neg_log_q)
        else:
            pos_score, neg_score = (net.item_scores((mean, cov), i) for i in (pos, neg))
            loss = net.sampled_position_loss(pos_score, neg_score, pos, neg, neg_log_q)
            d_pn = wasserstein2_squared(
                *(g.unsqueeze(1) for g in net.item_gaussians(pos)),
                *net.item_gaussians(neg),
            )
            pvn = net.pvn_weight * torch.relu(-pos_score.unsqueeze(1) - d_pn).mean()
        (loss + pvn).backward()
        grads = [mean.grad, cov.grad, net.cov_item_embedding.weight.grad]
        return [loss.detach(), pvn.detach(), *grads]

    for got, want in zip(run(True), run(False)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_the_model_files_loss_uses_recbole_negatives(stosa):
    """RecBole's path (the model file's ``calculate_loss``, one negative per user,
    ``[B]``): RecBole's BPR on ``item_scores`` and the hinge of eq. 11 written out, in
    value and gradient; the distances' shapes, one row included."""
    from recbole.data.interaction import Interaction

    from recbole_attn.model import stosa as model_file

    net, (train_data, _, _) = stosa
    batch = next(iter(train_data))
    seq, seq_len = batch[net.ITEM_SEQ][:3], batch[net.ITEM_SEQ_LEN][:3]
    pos, neg = torch.tensor([1, 2, 3]), torch.tensor([4, 5, 1])
    interaction = Interaction(
        {
            net.ITEM_SEQ: seq,
            net.ITEM_SEQ_LEN: seq_len,
            net.POS_ITEM_ID: pos,
            net.NEG_ITEM_ID: neg,
        }
    )

    def grads(losses):
        net.zero_grad()
        sum(losses).backward()
        return [p.grad.clone() for p in net.parameters() if p.grad is not None]

    got = model_file.STOSA.calculate_loss(net, interaction)
    got_grads = grads(got)
    output = net.forward(seq, seq_len)
    bpr = net.loss_fct(net.item_scores(output, pos), net.item_scores(output, neg))
    pos_gauss = [g.unsqueeze(-2) for g in net.item_gaussians(pos)]
    pos_neg = wasserstein2_squared(
        *pos_gauss, *(g.unsqueeze(-2) for g in net.item_gaussians(neg))
    )
    hinge = torch.relu(-net.item_scores(output, pos).unsqueeze(-1) - pos_neg).mean()
    want = (bpr, net.pvn_weight * hinge)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
    for a, b in zip(got_grads, grads(want)):
        torch.testing.assert_close(a, b)


def test_squared_weights_aggregate_is_autograds_square_then_product():
    gen = torch.Generator().manual_seed(7)
    weights = torch.rand(2, 3, 5, 5, generator=gen, dtype=torch.float64)
    value = torch.randn(2, 3, 5, 4, generator=gen, dtype=torch.float64)
    inputs = (weights.requires_grad_(), value.requires_grad_())
    assert torch.autograd.gradcheck(SquaredWeightsAggregate.apply, inputs)
    got = SquaredWeightsAggregate.apply(*inputs)
    torch.testing.assert_close(got, (weights**2) @ value)
    # a second derivative is refused, not silently wrong
    (first,) = torch.autograd.grad(got.sum(), weights, create_graph=True)
    with pytest.raises(RuntimeError):
        torch.autograd.grad(first.sum(), value)
    # one input without gradient (the other's still computed)
    ones = torch.ones(2, 3, 5, 4, dtype=torch.float64)
    fixed = SquaredWeightsAggregate.apply(weights.detach(), value)
    (grad,) = torch.autograd.grad(fixed.sum(), value)
    torch.testing.assert_close(grad, (weights.detach() ** 2).transpose(-1, -2) @ ones)
    fixed = SquaredWeightsAggregate.apply(weights, value.detach())
    (grad,) = torch.autograd.grad(fixed.sum(), weights)
    want = 2 * weights.detach() * (ones @ value.detach().transpose(-1, -2))
    torch.testing.assert_close(grad, want)
    # under bf16 autocast: near float32's, gradients in the inputs' dtypes
    w32, v32 = (t.detach().float().requires_grad_() for t in (weights, value))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = SquaredWeightsAggregate.apply(w32, v32)
    assert out.dtype == torch.bfloat16
    exact = (weights.detach() ** 2) @ value.detach()
    torch.testing.assert_close(out.double(), exact, rtol=2e-2, atol=2e-2)
    out.float().sum().backward()
    assert w32.grad.dtype == v32.grad.dtype == torch.float32
    torch.testing.assert_close(w32.grad.double(), want, rtol=2e-2, atol=2e-2)


def test_training_loss_gradients_finite(stosa):
    net, (train_data, _, _) = stosa
    net.train()
    batch = next(iter(train_data))
    losses = net.calculate_loss(batch)
    assert len(losses) == 2 and all(torch.isfinite(l) for l in losses)
    sum(losses).backward()
    grads = [p.grad for p in net.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


def test_official_layer_means_pass_the_input_mean(tiny_config):
    """stosa_layer_means: official (the official encoder) returns the input mean
    embedding unchanged through every layer; paper updates it."""
    for layer_means in ("official", "paper"):
        forms = {"stosa_layer_means": layer_means, "stosa_input": "paper"}
        config, net, _, _ = build(
            research.model_for("STOSA", forms),
            "tiny",
            config_dict={**tiny_config, **forms, "n_layers": 2},
        )
        net.eval()
        seq, lengths = _seq(net, [[3, 5, 7]])
        with torch.no_grad():
            mean, cov = net.encode(seq, lengths)
            positions = net.position_ids(lengths, seq.size(1))
            embedded = net.mean_layer_norm(
                net.mean_item_embedding(seq) + net.mean_position_embedding(positions)
            )
        assert torch.allclose(mean, embedded) == (layer_means == "official")
        assert np.isfinite(cov.numpy()).all()


def test_scaled_distances_are_the_scaled_formula():
    """The attention's logits (eq. 5-6), ``-W_2^2 / sqrt(d)`` of every (query, key) pair,
    by the per-dimension formula."""
    gen = torch.Generator().manual_seed(1)
    mu1, mu2 = (
        torch.randn(2, n, 6, generator=gen, dtype=torch.float64) for n in (3, 4)
    )
    s1, s2 = (
        torch.rand(2, n, 6, generator=gen, dtype=torch.float64) * 2 + 0.05
        for n in (3, 4)
    )
    got = scaled_wasserstein2_squared(mu1, s1, mu2, s2, -1 / math.sqrt(6))
    assert got.shape == (2, 3, 4)
    for b, i, j in itertools.product(range(2), range(3), range(4)):
        args = (t[b, k].tolist() for t, k in ((mu1, i), (s1, i), (mu2, j), (s2, j)))
        want = -w2_squared_direct(*args) / math.sqrt(6)
        assert got[b, i, j].item() == pytest.approx(want, rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("n_layers", [0, 1, 2])
@pytest.mark.parametrize("preset", ["official", "paper"])
def test_the_last_layer_at_the_last_items_is_the_full_encoding_there(
    tiny_config, preset, n_layers
):
    """``forward`` computes only the last items' queries in the last layer: the same
    Gaussians as the full encoding gathered at the last items (causal attention, row-wise
    layers), in either preset and for any depth, and gradients that agree."""
    config, net, _, _ = build(
        "STOSA",
        "tiny",
        config_dict={**tiny_config, "stosa_preset": preset, "n_layers": n_layers},
    )
    net = net.double().eval()
    seq, lengths = _seq(net, [[3, 5, 7, 2, 9], [4, 6], [8]])
    last = lengths - 1
    full = net.encode(seq, lengths)
    want = tuple(net.gather_indexes(x, last) for x in full)
    got = net.forward(seq, lengths)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)
    grads = [
        torch.autograd.grad(sum(x.sum() for x in out), net.cov_item_embedding.weight)[0]
        for out in (got, want)
    ]
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("layer_means", ["official", "paper"])
def test_value_covariances_of_the_reference_code(tiny_config, layer_means):
    """stosa_value_cov: official, the default, aggregates the reference code's value
    covariances, ELU(W_V x) + 1, with A∘A (eq. 7 written out as a loop over keys here);
    paper, the linear W_V x. Same weights, so the two differ only there."""
    outs = {}
    for value_cov in ("paper", "official"):
        forms = {"stosa_value_cov": value_cov, "stosa_layer_means": layer_means}
        _, net, _, _ = build(
            research.model_for("STOSA", forms),
            "tiny",
            config_dict={**tiny_config, **forms},
        )
        net.eval()
        layer = net.trm_encoder.layer[0]
        attention = layer.multi_head_attention
        seq, lengths = _seq(net, [[3, 5, 7, 2], [4, 6, 0, 0]])
        with torch.no_grad():
            positions = net.position_ids(lengths, seq.size(1))
            mean, cov = net.input_gaussians(seq, positions)
            mask = net.get_attention_mask(seq)
            probs = attention.attention_probs(mean, cov, mean, cov, mask)
            value = attention.value(cov)
            if value_cov == "official":
                value = torch.nn.functional.elu(value) + 1.0
            B, L, d = value.shape
            h = probs.size(1)
            heads = value.view(B, L, h, d // h)
            loop = torch.zeros(B, L, h, d // h)
            for b, t, s, k in itertools.product(range(B), range(L), range(L), range(h)):
                loop[b, t, k] += probs[b, k, t, s] ** 2 * heads[b, s, k]
            hidden = attention.dense(loop.reshape(B, L, d)) + cov
            want = elu_plus_one(layer.feed_forward(attention.LayerNorm(hidden)))
            got = layer(mean, cov, mask)[1]
        assert torch.allclose(got, want, atol=1e-5), value_cov
        outs[value_cov] = got
    assert not torch.allclose(outs["paper"], outs["official"], atol=1e-4)


@pytest.mark.parametrize(
    "model,extra", [("STOSA", {}), ("AWRSR", {"backbone": "STOSA"})]
)
def test_the_model_files_own_layers_compute_the_plugins_defaults(
    tiny_config, model, extra
):
    """The model file's class built alone (its own layers, not the plugin's), with the
    plugin's weights, scores every item as the plugin does with its defaults: the
    reference code's value covariances among them."""
    from recbole_attn.model import awrsr, stosa

    config, net, _, (train, _, _) = build(
        model, "tiny", config_dict={**tiny_config, **extra}
    )
    own = {"STOSA": stosa.STOSA, "AWRSR": awrsr.AWRSR}[model](config, train.dataset)
    own.load_state_dict(net.state_dict())
    net.eval()
    own.eval()
    seq, lengths = _seq(net, [[3, 5, 7, 2], [4, 6, 1], [9]])
    data = {net.ITEM_SEQ: seq, net.ITEM_SEQ_LEN: lengths}
    with torch.no_grad():
        torch.testing.assert_close(
            own.full_sort_predict(data), net.full_sort_predict(data)
        )
