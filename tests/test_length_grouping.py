"""Exact length grouping (``length_groups``) and the memory-bounded cross-entropy
(``ce_logits_budget_mb``), for every model of ``recbole_attn.plugin.MODELS`` and the
variants of the model-contract tests: in float64 without dropout (RKSA's noise and PAtt's
sampled third items replaced by fixed values that depend on the sequence only), the
grouped loss, every parameter gradient, the negatives and the evaluation scores equal the
ungrouped ones; the planner's groups minimize the cost against brute force; a few Adam
steps end at the same parameters."""

import copy
import itertools
import weakref

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from recbole_attn.errors import ConfigError
from recbole_attn.model import patt, rksa
from recbole_attn.sequential import losses as ce_losses
from recbole_attn.sequential.batching import training_targets
from recbole_attn.sequential.length_groups import (
    combine_group_losses,
    grouping_cost,
    plan_length_groups,
)
from recbole_attn.sequential.length_groups import AuxLoss
from test_model_contract import CASES, model_builder

RTOL, ATOL = 1e-10, 1e-12
#: spread lengths (T = 12): the planner splits them into several groups
LENGTHS = [12, 1, 2, 2, 3, 3, 3, 4, 4, 5, 6, 7, 9, 2, 1, 3]


@pytest.fixture(scope="module")
def built(tiny_data_path, tmp_path_factory):
    """model name, extra config -> (config, float64 model without dropout, data)."""
    work = tmp_path_factory.mktemp("grouping")
    return model_builder(
        tiny_data_path,
        work,
        lambda net: net.double(),
        hidden_dropout_prob=0.0,
        attn_dropout_prob=0.0,
    )


@pytest.fixture
def fixed_noise(monkeypatch):
    """RKSA's eq. 13 noise and PAtt's sampled third items as fixed values: the same for
    a sequence whatever its batch or trimmed length (the Cholesky factor of the padded
    kernel is block-diagonal, so ``chol @ 1`` at a real item depends on its prefix
    only; the third items depend on the positions only)."""

    def msn_sample(xi, omega, delta, chol):
        batch, heads, _, length = xi.shape
        ones = torch.ones(batch, heads, length, 1, dtype=xi.dtype)
        y = (chol.unsqueeze(1) @ ones).transpose(-1, -2)
        return xi + omega * (delta + torch.sqrt(1.0 - delta.square()) * y)

    def sample_third_items(shape, samples, device):
        n = shape[-1]
        u = (torch.arange(samples, device=device) + 0.5) / samples
        u = u.expand(*shape[:-2], n, n, samples)
        t = torch.arange(n, device=device).view(n, 1, 1)
        r = torch.arange(n, device=device).view(1, n, 1)
        avail = (t - 1).clamp_min(1)
        j = (u * avail).long().clamp_max(avail - 1)
        return j + (j >= r).long()

    monkeypatch.setattr(rksa, "msn_sample", msn_sample)
    monkeypatch.setattr(patt, "sample_third_items", sample_third_items)


def make_batch(net, lengths=LENGTHS, seed=0):
    gen = torch.Generator().manual_seed(seed)
    n = net.max_seq_length
    lengths = torch.tensor(lengths)
    seq = torch.randint(1, net.n_items, (len(lengths), n), generator=gen)
    seq = seq * (torch.arange(n).unsqueeze(0) < lengths.unsqueeze(1))
    return {
        net.ITEM_SEQ: seq,
        net.ITEM_SEQ_LEN: lengths,
        net.USER_ID: torch.arange(1, len(lengths) + 1),
        net.POS_ITEM_ID: torch.randint(1, net.n_items, (len(lengths),), generator=gen),
    }


def as_tuple(losses):
    return losses if isinstance(losses, tuple) else (losses,)


def loss_and_grads(net, data, groups, seed=7):
    """Loss terms, gradients and negatives of one training step with at most ``groups``
    length groups, and a draw after it (the RNG state it left)."""
    net.length_groups = groups
    net.zero_grad(set_to_none=True)
    drawn = []
    sample = type(net).sample_negatives

    def record(self, item_seq, targets, users=None):
        drawn.append(sample(self, item_seq, targets, users))
        return drawn[-1]

    net.sample_negatives = record.__get__(net)
    try:
        torch.manual_seed(seed)
        losses = as_tuple(net.calculate_loss(data))
        after = torch.rand(4)
    finally:
        del net.sample_negatives
    sum(losses).backward()
    grads = {
        name: p.grad.clone() for name, p in net.named_parameters() if p.grad is not None
    }
    net.zero_grad(set_to_none=True)
    return losses, grads, drawn, after


@pytest.fixture(params=["first", "last"])
def alignment(request):
    return request.param


@pytest.mark.parametrize("name,extra", CASES)
def test_grouped_loss_gradients_and_negatives_equal_ungrouped(
    built, name, extra, alignment, fixed_noise
):
    _, net, _ = built(name, extra)
    net.position_alignment = alignment
    net.length_group_overhead = 0.0
    data = make_batch(net)
    groups = net.split_by_length(data[net.ITEM_SEQ_LEN])
    assert groups is not None and len(groups) == 4
    assert sorted(torch.cat([rows for rows, _ in groups]).tolist()) == list(
        range(len(LENGTHS))
    )
    net.train()
    try:
        plain, plain_grads, plain_neg, plain_after = loss_and_grads(net, data, 1)
        grouped, grads, neg, after = loss_and_grads(net, data, 4)
    finally:
        net.eval()
        net.length_groups = 4
    assert len(grouped) == len(plain)
    for a, b in zip(grouped, plain):
        torch.testing.assert_close(a, b, rtol=RTOL, atol=ATOL)
    assert grads.keys() == plain_grads.keys() and grads
    for key, grad in plain_grads.items():
        torch.testing.assert_close(grads[key], grad, rtol=RTOL, atol=ATOL, msg=key)
    # the negatives: drawn once for the batch, the same, and the RNG left alike
    assert len(neg) == len(plain_neg) == int(net.needs_negatives)
    for a, b in zip(neg, plain_neg):
        assert torch.equal(a, b)
    assert torch.equal(after, plain_after)


@pytest.mark.parametrize("name,extra", CASES)
def test_grouped_evaluation_scores_equal_ungrouped(built, name, extra, alignment):
    _, net, _ = built(name, extra)
    net.position_alignment = alignment
    net.length_group_overhead = 0.0
    data = make_batch(net, seed=1)
    with torch.no_grad():
        net.length_groups = 1
        want = net.full_sort_predict(data)
        data[net.ITEM_ID] = torch.arange(len(LENGTHS)) % (net.n_items - 1) + 1
        want_items = net.predict(data)
        net.length_groups = 4
        assert len(net.split_by_length(data[net.ITEM_SEQ_LEN])) == 4
        got = net.full_sort_predict(data)
        got_items = net.predict(data)
    assert got.shape == (len(LENGTHS), net.n_items)
    torch.testing.assert_close(got, want, rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(got_items, want_items, rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(
        got_items, got[torch.arange(len(LENGTHS)), data[net.ITEM_ID]]
    )


@pytest.mark.parametrize("name,extra", CASES)
def test_position_losses_are_means(built, name, extra):
    """The contract grouping relies on: ``position_loss`` returns means over positions
    (a sum, or anything that depends on how many positions there are, would change when
    every position is repeated)."""
    _, net, _ = built(name, extra)
    data = make_batch(net, seed=2)
    item_seq = net.trim(data[net.ITEM_SEQ], data[net.ITEM_SEQ_LEN])
    targets, mask = training_targets(
        item_seq, data[net.ITEM_SEQ_LEN], data[net.POS_ITEM_ID], net.training_mode
    )
    with torch.no_grad():
        out = net._encode(item_seq, data[net.ITEM_SEQ_LEN], data[net.USER_ID])
        out = out if isinstance(out, tuple) else (out,)
        out = tuple(o[mask] for o in out)
        pos = targets[mask]
        neg = None
        if net.needs_negatives:  # two negatives per position
            neg = torch.randint(1, net.n_items, pos.shape + (2,))
        log_q = None if neg is None else torch.full(neg.shape, -3.0)

        def loss(rep):
            o = tuple(x.repeat(rep, *([1] * (x.dim() - 1))) for x in out)
            return net.position_losses(
                o if len(o) > 1 else o[0],
                pos.repeat(rep),
                None if neg is None else neg.repeat(rep, 1),
                None if log_q is None else log_q.repeat(rep, 1),
            )

        for a, b in zip(loss(3), loss(1), strict=True):
            torch.testing.assert_close(a, b, rtol=RTOL, atol=ATOL)


def test_planner_minimizes_the_cost_against_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(300):
        lengths = rng.integers(1, 30, size=int(rng.integers(1, 14)))
        max_groups = int(rng.integers(1, 6))
        overhead = float(rng.choice([0.0, 5.0, 60.0, 400.0, 1e5]))
        values = np.unique(lengths)
        best = min(
            grouping_cost(lengths, [values[c] for c in cuts] + [values[-1]], overhead)
            for k in range(1, min(max_groups, len(values)) + 1)
            for cuts in itertools.combinations(range(len(values) - 1), k - 1)
        )
        bounds = plan_length_groups(lengths, max_groups, overhead)
        assert 1 <= len(bounds) <= max_groups
        assert bounds == sorted(set(bounds)) and bounds[-1] == lengths.max()
        assert set(bounds) <= set(values.tolist())
        assert grouping_cost(lengths, bounds, overhead) == pytest.approx(best)
    # ties go to fewer groups; a huge overhead keeps one group
    assert plan_length_groups([3, 3, 3], 4) == [3]
    assert plan_length_groups([1, 2, 50], 4, overhead=1e9) == [50]
    assert plan_length_groups([1, 1, 1, 1, 50], 2) == [1, 50]
    assert plan_length_groups([], 4) == []


def test_grouping_respects_the_opt_out(built, tiny_config):
    from recbole_attn.engine.config import make_config

    _, net, _ = built("SASRecAP", {})
    lengths = torch.tensor(LENGTHS)
    net.length_group_overhead = 0.0
    try:
        assert len(net.split_by_length(lengths)) == 4
        net.length_groups = 2
        assert len(net.split_by_length(lengths)) == 2
        net.length_groups = 1
        assert net.split_by_length(lengths) is None
        net.length_groups = 4
        net.length_grouping = False  # a model that mixes the sequences of a batch
        assert net.split_by_length(lengths) is None
        del net.length_grouping
        assert net.split_by_length(torch.tensor([5, 5, 5])) is None
    finally:
        net.length_groups = 4
    # the option is checked with the configuration, before anything is built
    with pytest.raises(ConfigError, match="length_groups must be an integer >= 1"):
        make_config("SASRecAP", "tiny", config_dict={**tiny_config, "length_groups": 0})


@pytest.mark.parametrize("name", ["SASRecAP", "STOSA"])
def test_adam_steps_reach_the_same_parameters(built, name):
    """A few Adam steps on the tiny training data, with a fixed seed, grouped and
    ungrouped: the same parameters (no dropout)."""
    _, net, (train_data, _, _) = built(name, {})
    batches = [b for _, b in zip(range(3), train_data)]
    for b in batches:
        assert net.split_by_length(b[net.ITEM_SEQ_LEN]) is not None
    finals = []
    for groups in (1, 4):
        model = copy.deepcopy(net)
        model.length_groups = groups
        model.train()
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        torch.manual_seed(11)
        for _ in range(2):
            for b in batches:
                opt.zero_grad()
                sum(as_tuple(model.calculate_loss(b))).backward()
                opt.step()
        finals.append(dict(model.named_parameters()))
    for key, value in finals[0].items():
        torch.testing.assert_close(finals[1][key], value, rtol=1e-8, atol=1e-10)


def test_groups_combine_means_weighted_by_their_counts():
    """Position losses weigh by the groups' positions, auxiliary terms by their own
    counts: the means over the whole batch."""
    parts = [
        ((torch.tensor(1.0), torch.tensor(10.0)), 2, [AuxLoss(torch.tensor(4.0), 1)]),
        ((torch.tensor(3.0), torch.tensor(20.0)), 6, [AuxLoss(torch.tensor(8.0), 3)]),
        ((torch.tensor(5.0), torch.tensor(0.0)), 0, [AuxLoss(torch.tensor(0.0), 0)]),
    ]
    loss, extra, aux = combine_group_losses(parts)
    assert loss.item() == pytest.approx((1 * 2 + 3 * 6) / 8)
    assert extra.item() == pytest.approx((10 * 2 + 20 * 6) / 8)
    assert aux.item() == pytest.approx((4 * 1 + 8 * 3) / 4)


# ---------------------------------------------------------------- chunked cross-entropy
def _scores(weight):
    return lambda hidden: hidden @ weight.T


def test_chunked_cross_entropy_matches_full_logits():
    gen = torch.Generator().manual_seed(0)
    hidden = torch.randn(53, 8, dtype=torch.float64, generator=gen, requires_grad=True)
    weight = torch.randn(29, 8, dtype=torch.float64, generator=gen, requires_grad=True)
    targets = torch.randint(0, 29, (53,), generator=gen)
    want = F.cross_entropy(hidden @ weight.T, targets)
    want_grads = torch.autograd.grad(want, (hidden, weight))
    # 29 items x 8 bytes x 2 (logits and log-softmax): 1, 7 and 53 positions per chunk,
    # and no chunking
    for budget in [1e-6, 2 * 7 * 29 * 8 / 2**20, 2 * 53 * 29 * 8 / 2**20, 1.0]:
        got = ce_losses.cross_entropy(_scores(weight), hidden, targets, 29, budget)
        grads = torch.autograd.grad(got, (hidden, weight))
        torch.testing.assert_close(got, want, rtol=RTOL, atol=ATOL)
        for g, w in zip(grads, want_grads):
            torch.testing.assert_close(g, w, rtol=RTOL, atol=ATOL)
    # a tuple output (STOSA's Gaussians): every part cut alike
    pair = (hidden[:, :4], hidden[:, 4:])
    scores = lambda o: torch.cat(o, -1) @ weight.T  # noqa: E731
    got = ce_losses.cross_entropy(scores, pair, targets, 29, 1e-6)
    torch.testing.assert_close(got, want, rtol=RTOL, atol=ATOL)


def test_chunked_cross_entropy_keeps_one_chunk_of_logits_alive():
    """Count the logits elements alive at any time through the scores function (weak
    references: freed tensors leave the count at once)."""
    alive, peak, made = [0], [0], []
    n, n_items, rows = 1000, 50, 64
    weight = torch.randn(n_items, 16, requires_grad=True)

    def counted(hidden):
        logits = hidden @ weight.T
        size = logits.numel()
        alive[0] += size
        peak[0] = max(peak[0], alive[0])
        made.append(size)
        weakref.finalize(logits, lambda: alive.__setitem__(0, alive[0] - size))
        return logits

    budget = 2 * rows * n_items * 4 / 2**20  # float32: 64 positions per chunk
    hidden = torch.randn(n, 16, requires_grad=True)
    targets = torch.randint(0, n_items, (n,))
    loss = ce_losses.cross_entropy(counted, hidden, targets, n_items, budget)
    assert len(made) == -(-n // rows) and max(made) == rows * n_items
    assert alive[0] == 0  # the forward keeps no logits for the backward
    loss.backward()
    assert len(made) == 2 * -(-n // rows)  # recomputed once in the backward
    assert peak[0] <= rows * n_items < n * n_items
    assert alive[0] == 0


def test_model_ce_loss_is_the_same_under_a_small_budget(built):
    _, net, _ = built("SASRecAP", {"loss_type": "CE"})
    data = make_batch(net, seed=3)
    results = []
    for budget in (512.0, 1e-4):  # 1e-4 MB: a few positions per chunk
        net.ce_logits_budget_mb = budget
        net.zero_grad(set_to_none=True)
        loss = net.calculate_loss(data)
        loss.backward()
        results.append((loss, {n: p.grad.clone() for n, p in net.named_parameters()}))
    net.ce_logits_budget_mb = 512.0
    net.zero_grad(set_to_none=True)
    (a, ga), (b, gb) = results
    torch.testing.assert_close(a, b, rtol=RTOL, atol=ATOL)
    for key in ga:
        torch.testing.assert_close(ga[key], gb[key], rtol=RTOL, atol=ATOL)


def test_runs_of_equal_rows_against_a_loop():
    """``batching.runs_of_equal_rows`` (how predict encodes a repeated sequence once) is
    a loop over the rows: a new run wherever a row differs from the one before."""
    from recbole_attn.sequential.batching import runs_of_equal_rows

    generator = torch.Generator().manual_seed(0)
    for _ in range(50):
        n = int(torch.randint(0, 12, (1,), generator=generator))
        seq = torch.randint(0, 3, (n, 2), generator=generator)
        lengths = torch.randint(1, 3, (n,), generator=generator)
        rows = [(tuple(seq[i].tolist()), int(lengths[i])) for i in range(n)]
        first, inverse = [], []
        for i, row in enumerate(rows):
            if i == 0 or row != rows[i - 1]:
                first.append(i)
            inverse.append(len(first) - 1)
        runs = runs_of_equal_rows([seq, lengths])
        if len(first) == n:
            assert runs is None
        else:
            assert runs[0].tolist() == first and runs[1].tolist() == inverse
