"""The losses every model takes (``loss_type``: CE, BPR, BCE, SSM) and their negatives
(``neg_sample_num``, ``neg_sample_distribution``):

* each sampled loss against a direct loop over its formula (float64), and its gradient
  (gradcheck); the sampled softmax's expectation against the full softmax as the number
  of negatives grows (the log-Q correction is what makes it so);
* the negatives: never one of the user's items when excluded (the positive included),
  drawn from exactly :math:`Q_b` by both ways of drawing (frequencies against the brute
  force distribution), with the log probabilities the correction uses;
* every model trains with every loss: the loss it computes equals the formula applied to
  its own full-ranking scores (``all_item_scores``) and the drawn negatives, so a
  factorized CE (STOSA's :math:`-W_2^2` as a dot product) ranks as its evaluation does.
"""

import math

import pytest
import torch
import torch.nn.functional as F

from recbole_attn.data.histories import item_counts
from recbole_attn.plugin import MODELS
from recbole_attn.sequential import negatives
from recbole_attn.sequential.batching import at_positions, training_targets
from recbole_attn.sequential.losses import (
    LINEAR_CE_CHUNK,
    LOSS_TYPES,
    LinearCrossEntropy,
    linear_cross_entropy,
    sampled_loss,
)
from test_model_contract import assert_trains, model_builder


# ---------------------------------------------------------------- the formulas
def _direct(pos, neg, loss_type, log_q=None, mask=None):
    """The loss by a loop over positions and negatives, in Python floats."""
    total = 0.0
    for n in range(len(pos)):
        s, negs = float(pos[n]), [float(v) for v in neg[n]]
        m = len(negs)
        if loss_type == "BPR":
            total += sum(-math.log(1 / (1 + math.exp(-(s - v)))) for v in negs) / m
        elif loss_type == "BCE":
            total += -math.log(1 / (1 + math.exp(-s)))
            total += sum(-math.log(1 - 1 / (1 + math.exp(-v))) for v in negs)
        else:  # SSM: -s + log(e^s + sum_k e^(v_k - log(M Q_k)))
            z = math.exp(s)
            for k, v in enumerate(negs):
                if mask is None or bool(mask[n][k]):
                    z += math.exp(v - math.log(m * math.exp(float(log_q[n][k]))))
            total += -s + math.log(z)
    return total / len(pos)


@pytest.mark.parametrize("loss_type", ["BPR", "BCE", "SSM"])
def test_sampled_losses_are_their_formulas(loss_type):
    g = torch.Generator().manual_seed(0)
    pos = torch.randn(7, generator=g, dtype=torch.float64)
    neg = torch.randn(7, 5, generator=g, dtype=torch.float64)
    log_q = torch.log(torch.rand(7, 5, generator=g, dtype=torch.float64) / 10)
    mask = torch.rand(7, 5, generator=g) > 0.2
    got = sampled_loss(pos, neg, loss_type, log_q, mask if loss_type == "SSM" else None)
    want = _direct(pos, neg, loss_type, log_q, mask if loss_type == "SSM" else None)
    assert abs(float(got) - want) < 1e-12
    # one negative as a [N] vector: the SASRec / STOSA losses of before
    one = sampled_loss(pos, neg[:, 0], loss_type, log_q[:, :1])
    assert abs(float(one) - _direct(pos, neg[:, :1], loss_type, log_q[:, :1])) < 1e-12


@pytest.mark.parametrize("loss_type", ["BPR", "BCE", "SSM"])
def test_sampled_loss_gradients(loss_type):
    g = torch.Generator().manual_seed(1)
    pos = torch.randn(4, generator=g, dtype=torch.float64, requires_grad=True)
    neg = torch.randn(4, 3, generator=g, dtype=torch.float64, requires_grad=True)
    log_q = torch.log(torch.rand(4, 3, generator=g, dtype=torch.float64))
    assert torch.autograd.gradcheck(
        lambda p, n: sampled_loss(p, n, loss_type, log_q), (pos, neg)
    )


@pytest.mark.parametrize("loss_type", ["BPR", "BCE", "SSM"])
def test_half_precision_scores_are_taken_in_float32(loss_type):
    """Mixed precision: bf16 scores give the float32 loss of the same (rounded) values."""
    g = torch.Generator().manual_seed(4)
    pos = torch.randn(6, generator=g).bfloat16()
    neg = torch.randn(6, 2, generator=g).bfloat16()
    log_q = torch.log(torch.rand(6, 2, generator=g))
    got = sampled_loss(pos, neg, loss_type, log_q)
    assert got.dtype == torch.float32
    want = sampled_loss(pos.float(), neg.float(), loss_type, log_q)
    assert float(got) == float(want)


def test_the_loss_positions_are_the_masked_rows_with_their_gradients():
    """``at_positions`` takes, by index, the rows ``o[mask]`` takes, of a tensor and of
    a tuple, and passes back the same gradients."""
    g = torch.Generator().manual_seed(5)
    mask = torch.rand(4, 6, generator=g) > 0.4
    leaves = [torch.randn(4, 6, 3, generator=g, requires_grad=True) for _ in range(2)]
    upstream = torch.randn(int(mask.sum()), 3, generator=g)
    got = at_positions(tuple(leaves), mask)
    for part, leaf in zip(got, leaves):
        assert torch.equal(part, leaf[mask])
        (want,) = torch.autograd.grad((leaf[mask] * upstream).sum(), leaf)
        (grad,) = torch.autograd.grad((part * upstream).sum(), leaf)
        assert torch.equal(grad, want)
    assert torch.equal(at_positions(leaves[0], mask), leaves[0][mask])


@pytest.mark.parametrize("rows", [1, 3, 7, 50])
def test_linear_cross_entropy_is_the_cross_entropy_of_the_logits(rows):
    """The fused CE (chunks of ``rows`` rows, the last one shorter) equals
    ``F.cross_entropy(hidden @ weight^T)``: its value, its gradients for both inputs
    under any upstream gradient, and gradcheck's finite differences."""
    g = torch.Generator().manual_seed(2)
    hidden = torch.randn(7, 5, generator=g, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(11, 5, generator=g, dtype=torch.float64, requires_grad=True)
    targets = torch.randint(0, 11, (7,), generator=g)
    got = LinearCrossEntropy.apply(hidden, weight, targets, rows)
    want = F.cross_entropy(hidden @ weight.T, targets)
    assert abs(float(got) - float(want)) < 1e-12
    (got * 3.0).backward()
    fused = hidden.grad.clone(), weight.grad.clone()
    hidden.grad = weight.grad = None
    (want * 3.0).backward()
    torch.testing.assert_close(fused[0], hidden.grad, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(fused[1], weight.grad, rtol=1e-12, atol=1e-14)
    assert torch.autograd.gradcheck(
        lambda h, w: LinearCrossEntropy.apply(h, w, targets, rows), (hidden, weight)
    )


def test_linear_cross_entropy_chunks_within_the_budget():
    """Chunks of at most LINEAR_CE_CHUNK logits and at most the budget's rows (a 1 MB
    budget over 100 000 items: one row per chunk), the value of the unchunked CE."""
    g = torch.Generator().manual_seed(3)
    hidden = torch.randn(6, 4, generator=g, dtype=torch.float64)
    weight = torch.randn(100_000, 4, generator=g, dtype=torch.float64)
    targets = torch.randint(0, 100_000, (6,), generator=g)
    calls = []
    original = LinearCrossEntropy.apply

    def spy(h, w, t, rows):
        calls.append(rows)
        return original(h, w, t, rows)

    LinearCrossEntropy.apply = spy
    try:
        got = linear_cross_entropy(hidden, weight, targets, budget_mb=1)
        small = linear_cross_entropy(hidden[:, :2], weight[:50, :2], targets % 50, 1024)
    finally:
        LinearCrossEntropy.apply = original
    assert calls == [1, LINEAR_CE_CHUNK // 50]
    assert abs(float(got) - float(F.cross_entropy(hidden @ weight.T, targets))) < 1e-10
    want = F.cross_entropy(hidden[:, :2] @ weight[:50, :2].T, targets % 50)
    assert abs(float(small) - float(want)) < 1e-12


def test_sampled_softmax_approaches_the_full_softmax():
    """With log-Q correction the sampled softmax estimates the softmax over all items,
    whatever the sampling distribution; without it, a popularity sample does not."""
    torch.manual_seed(0)
    n_items, m = 40, 20000
    logits = torch.randn(3, n_items, dtype=torch.float64)
    logits[:, 0] = -math.inf  # the padding item is never a candidate
    targets = torch.tensor([3, 17, 29])
    full = F.cross_entropy(logits, targets)
    counts = torch.arange(n_items).double() ** 2  # a skewed "popularity"
    for q in (None, negatives.popularity_distribution(counts)):
        neg = negatives.sample_negatives(targets[:, None], n_items, num=m, q=q)[:, 0]
        log_q = negatives.log_sampling_probability(neg[:, None], None, q, n_items)
        scores = logits.gather(1, neg)
        pos = logits.gather(1, targets[:, None])[:, 0]
        hits = neg != targets[:, None]  # accidental hits of the positive, left out
        ssm = sampled_loss(pos, scores, "SSM", log_q[:, 0], hits)
        assert abs(float(ssm - full)) < 0.02, (q is None, float(ssm), float(full))
    plain = sampled_loss(pos, scores, "SSM", torch.full_like(scores, -math.log(m)))
    assert abs(float(plain - full)) > 0.2  # the popularity sample, uncorrected


# ---------------------------------------------------------------- the negatives
def _exact_q(n_items, excluded_row, q):
    """Q_b over 0..n-1 by brute force: q on the allowed items, renormalized."""
    base = (
        torch.full((n_items,), 1.0 / (n_items - 1), dtype=torch.float64)
        if q is None
        else q.double()
    )
    allowed = torch.tensor(
        [j > 0 and j not in set(excluded_row) for j in range(n_items)]
    )
    out = base * allowed
    return out / out.sum()


@pytest.mark.parametrize("popularity", [False, True])
@pytest.mark.parametrize("budget", [negatives.DENSE_BUDGET, 0])  # matrix / rejection
def test_negatives_follow_q_restricted_to_the_unseen_items(popularity, budget):
    torch.manual_seed(2)
    n_items = 30
    q = None
    if popularity:
        q = negatives.popularity_distribution(torch.arange(n_items) % 7 * 5)
    item_seq = torch.tensor([[1, 2, 3, 0], [5, 5, 9, 12], [7, 0, 0, 0]])
    targets = torch.tensor([[2, 3, 4, 0], [5, 9, 12, 13], [8, 0, 0, 0]])
    neg = negatives.sample_negatives(
        targets,
        n_items,
        num=5000,
        excluded=negatives.excluded_items(item_seq, targets),
        q=q,
        dense_budget=budget,
    )
    assert neg.shape == (3, 4, 5000)
    for b in range(3):
        excluded = item_seq[b].tolist() + targets[b].tolist()
        draws = neg[b].flatten()
        assert not any(int(j) in excluded for j in draws.unique())  # positive too
        freq = torch.bincount(draws, minlength=n_items).double() / draws.numel()
        want = _exact_q(n_items, excluded, q)
        assert (freq - want).abs().max() < 0.01, b
        # the log probabilities of the draws are those of Q_b
        log_q = negatives.log_sampling_probability(
            neg[b : b + 1, :1, :20],
            negatives.excluded_items(item_seq[b : b + 1], targets[b : b + 1]),
            q,
            n_items,
        )
        torch.testing.assert_close(
            log_q.double().flatten(),
            want[neg[b, 0, :20]].log(),
            rtol=1e-5,
            atol=1e-6,
        )


def test_rejection_sampling_falls_back_for_users_who_saw_most_of_the_mass():
    """A user whose items hold 99.9 % of q: redrawing rarely succeeds, the row takes the
    matrix way and its draws still avoid every excluded item."""
    torch.manual_seed(3)
    n_items = 20
    counts = torch.ones(n_items)
    counts[1:4] = 1e6
    q = negatives.popularity_distribution(counts)
    seq = torch.tensor([[1, 2, 3], [4, 0, 0]])
    excluded = negatives.excluded_items(seq, seq)
    neg = negatives.sample_negatives(
        seq, n_items, num=200, excluded=excluded, q=q, dense_budget=0
    )
    assert not torch.isin(neg[0], torch.tensor([0, 1, 2, 3])).any()
    assert not torch.isin(neg[1], torch.tensor([0, 4])).any()


def test_a_user_who_saw_everything_falls_back_to_q():
    everything = torch.arange(1, 10).repeat(2, 1)
    for budget in (negatives.DENSE_BUDGET, 0):
        neg = negatives.sample_negatives(
            everything, 10, num=3, excluded=everything, dense_budget=budget
        )
        assert neg.min() >= 1 and neg.max() < 10
    log_q = negatives.log_sampling_probability(neg, everything, None, 10)
    torch.testing.assert_close(log_q, torch.full_like(log_q, -math.log(9)))


def test_popularity_beyond_the_multinomial_limit_says_what_to_do():
    """torch.multinomial draws from at most 2^24 categories: a larger catalogue with
    popularity negatives is a configuration error naming the way out, not torch's."""
    from recbole_attn.errors import ConfigError

    too_many = torch.zeros(negatives.MULTINOMIAL_MAX_ITEMS + 1, dtype=torch.int8)
    with pytest.raises(ConfigError, match="neg_sample_distribution: uniform"):
        negatives.popularity_distribution(too_many)
    q = negatives.popularity_distribution(torch.zeros(5, dtype=torch.int8))
    torch.testing.assert_close(q, torch.tensor([0.0, 0.25, 0.25, 0.25, 0.25]))


def test_popularity_counts_the_training_interactions(tiny_config, tiny_data_path):
    """The popularity of negatives: every item's training interactions (each user's
    sequence without its validation and test items), read from the .inter file."""
    from conftest import raw_sequences
    from recbole_attn.engine.quick_start import build

    _, net, _, (train, _, _) = build(
        "SASRecAP",
        "tiny",
        config_dict={
            **tiny_config,
            "loss_type": "SSM",
            "neg_sample_distribution": "popularity",
        },
    )
    want = torch.zeros(net.n_items, dtype=torch.long)
    for items in raw_sequences(tiny_data_path).values():
        for token in items[:-2]:
            want[train.dataset.token2id("item_id", token)] += 1
    assert torch.equal(item_counts(train.dataset, net.n_items), want)
    torch.testing.assert_close(
        net.neg_distribution, negatives.popularity_distribution(want)
    )


# ---------------------------------------------------------------- every model, every loss
#: loss settings checked on every model
LOSSES = [{"loss_type": t} for t in LOSS_TYPES if t != "SSM"] + [
    {"loss_type": "BCE", "neg_sample_num": 3},
    {"loss_type": "SSM", "neg_sample_num": 4},
    {
        "loss_type": "SSM",
        "neg_sample_num": 4,
        "neg_sample_distribution": "popularity",
        "neg_exclude_seen": False,
    },
]
MODEL_CASES = [(name, {}) for name in MODELS if name != "AWRSR"] + [
    ("AWRSR", {"backbone": "SASRec", "refinement": "simp"}),
    ("AWRSR", {"backbone": "STOSA", "refinement": "stoc"}),
]


@pytest.fixture(scope="module")
def built_train(tiny_data_path, tmp_path_factory):
    work = tmp_path_factory.mktemp("losses")
    return model_builder(tiny_data_path, work, lambda net: net, length_groups=1)


def _position_scores(net, batch):
    """Targets, negatives (drawn as ``calculate_loss`` draws them) and the model's
    full-ranking scores at every training position."""
    seq_len = batch[net.ITEM_SEQ_LEN]
    seq = net.trim(batch[net.ITEM_SEQ], seq_len)
    targets, mask = training_targets(
        seq, seq_len, batch[net.POS_ITEM_ID], net.training_mode
    )
    users = batch[net.USER_ID]
    neg = net.sample_negatives(seq, targets, users) if net.needs_negatives else None
    out = net._encode(seq, seq_len, users)
    out = tuple(o[mask] for o in out) if isinstance(out, tuple) else out[mask]
    scores = net.all_item_scores(out)
    excluded = None
    if net.neg_exclude_seen:
        excluded = negatives.excluded_items(seq, targets)
    return targets, mask, neg, excluded, scores


@pytest.mark.parametrize("loss", LOSSES, ids=lambda c: "-".join(map(str, c.values())))
@pytest.mark.parametrize("name,extra", MODEL_CASES, ids=lambda v: str(v))
def test_every_model_trains_with_every_loss(built_train, name, extra, loss):
    _, net, (train_data, _, _) = built_train(name, {**extra, **loss})
    assert net.loss_type == loss["loss_type"]
    batch = next(iter(train_data))
    net.eval()  # no dropout: the loss is a function of the drawn negatives only
    torch.manual_seed(5)
    losses = net.calculate_loss(batch)
    losses = losses if isinstance(losses, tuple) else (losses,)
    torch.manual_seed(5)
    with torch.no_grad():
        targets, mask, neg, excluded, scores = _position_scores(net, batch)
    pos = scores.gather(1, targets[mask][:, None])[:, 0]
    if loss["loss_type"] == "CE":
        want = F.cross_entropy(scores, targets[mask])
    else:
        neg = neg[mask]
        assert neg.shape[1] == loss.get("neg_sample_num", 1)
        if net.neg_exclude_seen:  # never the positive, never a training item
            assert not (neg == targets[mask][:, None]).any()
        q = net.neg_distribution
        log_q = None
        if loss["loss_type"] == "SSM":
            rows = mask.nonzero()[:, 0]
            log_q = torch.stack(
                [
                    _exact_q(
                        net.n_items,
                        [] if excluded is None else excluded[r].tolist(),
                        q,
                    )[neg[i]].log()
                    for i, r in enumerate(rows.tolist())
                ]
            )
        want = _direct(
            pos.double(),
            scores.gather(1, neg).double(),
            loss["loss_type"],
            log_q,
            None if net.neg_exclude_seen else neg != targets[mask][:, None],
        )
    got = float(losses[0].detach())
    assert abs(got - float(want)) < 2e-5 * max(1.0, abs(float(want)))
    assert_trains(net, batch)


def test_stosa_item_scores_are_its_full_ranking(built_train):
    """STOSA's scores of given items are its full-ranking scores there (float64)."""
    _, net, _ = built_train("STOSA", {"loss_type": "CE"})
    net = net.double()
    g = torch.Generator().manual_seed(0)
    mean = torch.randn(5, 16, generator=g, dtype=torch.float64)
    cov = torch.rand(5, 16, generator=g, dtype=torch.float64) + 0.1
    full = net.all_item_scores((mean, cov))
    items = torch.randint(1, net.n_items, (5, 3), generator=g)
    torch.testing.assert_close(
        net.item_scores((mean, cov), items), full.gather(1, items)
    )
    torch.testing.assert_close(
        net.item_scores((mean, cov), items[:, 0]), full.gather(1, items[:, :1])[:, 0]
    )
    net.float()
