"""RKSA: the skew-normal sampler against its closed-form moments, the correlation
matrix, the two-hop shape ratio against eq. 10, leak-free sparse co-occurrence counts,
near-singular numerics, causality in training and end-to-end runs."""

import logging
import math

import numpy as np
import pytest
import torch

from conftest import raw_sequences
from recbole_attn.model.rksa import (
    CooccurrenceTable,
    counting_kernel,
    cosine_kernel,
    msn_mean,
    msn_sample,
    two_hop_ratio,
)
from recbole_attn.plugin.rksa import rbf_kernel
from recbole_attn.model import rksa
from recbole_attn.engine.quick_start import build, run


def prefix_rows(tiny_config):
    """The training split of RecBole's prefix samples (``last_position``)."""
    _, _, _, (train, _, _) = _build(tiny_config, training_mode="last_position")
    return train.dataset


def _build(config, **extra):
    out = build("RKSA", "tiny", config_dict={**config, **extra})
    logging.getLogger().handlers.clear()
    return out


@pytest.mark.parametrize("skewed", [True, False])
def test_sampler_matches_the_skew_normal_moments(skewed):
    """Stochastic representation of eq. 13: E[z] = xi + omega delta sqrt(2/pi), Cov(z) =
    omega (Omega - 2/pi delta delta^T) omega with Omega = delta delta^T + D psi D,
    D = diag(sqrt(1 - delta^2)) (Azzalini and Capitanio 1999); alpha = 0 gives
    N(xi, omega psi omega)."""
    torch.manual_seed(0)
    n = 200_000
    xi = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    omega = torch.tensor([1.0, 2.0, 0.5], dtype=torch.float64)
    alpha = torch.tensor([3.0, -1.0, 0.5], dtype=torch.float64) * float(skewed)
    psi = torch.tensor(
        [[1.0, 0.6, -0.3], [0.6, 1.0, 0.2], [-0.3, 0.2, 1.0]], dtype=torch.float64
    )
    delta = alpha / torch.sqrt(1 + alpha**2)
    chol = torch.linalg.cholesky(psi).expand(n, 3, 3)
    expand = lambda v: v.view(1, 1, 1, 3).expand(n, 1, 1, 3)  # noqa: E731
    z = msn_sample(expand(xi), expand(omega), expand(delta), chol)[:, 0, 0]
    mean = msn_mean(xi, omega, delta)
    d = torch.sqrt(1 - delta**2)
    corr = torch.outer(delta, delta) + torch.outer(d, d) * psi
    cov = torch.outer(omega, omega) * (corr - 2 / math.pi * torch.outer(delta, delta))
    se = torch.sqrt(torch.diagonal(cov) / n)
    assert ((z.mean(0) - mean).abs() < 4 * se).all()
    emp = torch.cov(z.T)
    assert (emp - cov).abs().max() < 0.03 * cov.abs().max()
    skew = (((z - z.mean(0)) / z.std(0)) ** 3).mean(0)
    if skewed:
        assert skew[0] > 0.3 and skew[1] < -0.05  # the sign of alpha
    else:
        assert skew.abs().max() < 0.03  # normal


def _psd(matrix, tol=1e-10):
    return torch.linalg.eigvalsh(matrix).min() > -tol


def test_kernels_are_correlation_matrices():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(3, 6, 5, generator=gen, dtype=torch.float64)
    x[1, 3] = x[1, 1]  # a repeated item
    valid = torch.tensor([[1] * 6, [1] * 6, [1, 1, 1, 0, 0, 0]]).bool()
    counts = torch.randint(0, 5, (3, 6, 6), generator=gen).double()
    counts = counts + counts.transpose(-1, -2)
    occ = counts.sum(-1) + 1.0
    counts = counts + torch.diag_embed(occ)  # a Gram-like matrix: P_ii = users of i
    user = torch.randn(3, 1, 5, generator=gen, dtype=torch.float64)
    kernels = [
        cosine_kernel(x, valid),
        rbf_kernel(x, valid),
        cosine_kernel(user * x, valid),
    ]
    users = torch.randint(0, 2, (3, 40, 6), generator=gen).double()  # binary X
    gram = users.transpose(-1, -2) @ users
    kernels.append(counting_kernel(gram, torch.diagonal(gram, dim1=-2, dim2=-1), valid))
    mix = sum(w * k for w, k in zip([0.2, 0.3, 0.1, 0.4], kernels))
    for kernel in kernels + [mix]:
        torch.testing.assert_close(kernel, kernel.transpose(-1, -2))
        diag = torch.diagonal(kernel, dim1=-2, dim2=-1)
        torch.testing.assert_close(diag, torch.ones_like(diag))
        assert all(_psd(k) for k in kernel)
        assert (kernel.abs() <= 1 + 1e-12).all()


def test_two_hop_ratio_matches_eq_10_per_prefix():
    gen = torch.Generator().manual_seed(2)
    counts = torch.randint(0, 6, (2, 5, 5), generator=gen).double()
    counts = counts + counts.transpose(-1, -2)
    valid = torch.tensor([[1] * 5, [1, 1, 1, 0, 0]]).bool()
    got = two_hop_ratio(counts, valid)
    for b in range(2):
        for t in range(5):
            prefix = [k for k in range(t + 1) if valid[b, k]]
            if not valid[b, t]:
                continue
            c = counts[b].clone()
            for k in prefix:  # diagonal: mean of the rest of the row in the prefix
                others = [c[k, l] for l in prefix if l != k]
                c[k, k] = sum(others) / max(len(prefix) - 1, 1)
            for j in prefix:
                want = sum(c[j, k] * c[k, t] for k in prefix)
                assert got[b, t, j].item() == pytest.approx(float(want), rel=1e-12)
            assert (got[b, t, t + 1 :] == 0).all()


def test_cooccurrence_counts_only_training_interactions(tiny_config, tiny_data_path):
    """The table equals X^T X of the training parts (all but the last two items of every
    user) of the raw sequences: no pair with a validation or test interaction."""
    _, net, _, (train, _, _) = _build(tiny_config)
    dataset = train.dataset
    raw = raw_sequences(tiny_data_path)
    n = dataset.item_num
    want = np.zeros((n, n))
    for user, items in raw.items():
        ids = sorted(set(dataset.token2id(dataset.iid_field, items[:-2])))
        want[np.ix_(ids, ids)] += 1
    table = net.cooccurrence
    all_items = torch.arange(n)
    torch.testing.assert_close(
        table.lookup(all_items[:, None], all_items[None, :]),
        torch.from_numpy(want).float(),
    )
    nnz = int((want > 0).sum())
    table_bytes = sum(b.numel() * b.element_size() for b in table.buffers())
    assert table_bytes == nnz * (8 + 4) + n * 4  # O(nnz), not O(n^2)
    # the model file alone (RecBole's prefix rows): the same counts from the rows
    users, items = rksa.RKSA.training_interactions(net, prefix_rows(tiny_config))
    alone = CooccurrenceTable(users, items, n)
    torch.testing.assert_close(
        alone.lookup(all_items[:, None], all_items[None, :]),
        torch.from_numpy(want).float(),
    )


def test_near_singular_correlation_stays_finite(tiny_config):
    """Every item of a sequence the same (psi all ones, rank 1), items never seen in
    training and a length-1 sequence: finite logits, loss and gradients."""
    _, net, _, _ = _build(tiny_config, kernels=["count", "item", "user"], n_layers=2)
    net.train()
    seq = torch.zeros(3, net.max_seq_length, dtype=torch.long)
    seq[0, :8] = 5
    seq[1, :4] = torch.tensor([net.n_items - 1] * 4)
    seq[2, 0] = 7
    lengths = torch.tensor([8, 4, 1])
    inter = {
        net.ITEM_SEQ: seq,
        net.ITEM_SEQ_LEN: lengths,
        net.USER_ID: torch.tensor([1, 2, 3]),
        net.POS_ITEM_ID: torch.tensor([3, 4, 5]),
    }
    losses = net.calculate_loss(inter)
    assert len(losses) == 3  # BCE + one listwise term per layer
    assert all(torch.isfinite(l) for l in losses)
    sum(losses).backward()
    assert all(
        torch.isfinite(p.grad).all() for p in net.parameters() if p.grad is not None
    )


def test_training_samples_stay_causal(tiny_config):
    """With the same noise, changing the items after t leaves outputs <= t unchanged."""
    _, net, _, _ = _build(tiny_config, hidden_dropout_prob=0.0, attn_dropout_prob=0.0)
    net.train()
    n = net.max_seq_length
    gen = torch.Generator().manual_seed(3)
    seq = torch.randint(1, net.n_items, (2, n), generator=gen)
    changed = seq.clone()
    changed[:, 5:] = torch.randint(1, net.n_items, (2, n - 5), generator=gen)
    inter = lambda s: {  # noqa: E731
        net.ITEM_SEQ: s,
        net.ITEM_SEQ_LEN: torch.tensor([n, n]),
        net.USER_ID: torch.tensor([1, 2]),
    }
    outs = []
    for s in (seq, changed):
        torch.manual_seed(11)
        with torch.no_grad():
            outs.append(net.encode(s, torch.tensor([n, n]), torch.tensor([1, 2])))
    torch.testing.assert_close(outs[0][:, :5], outs[1][:, :5], rtol=1e-5, atol=1e-5)
    assert not torch.allclose(outs[0][:, 5:], outs[1][:, 5:])
    net.eval()


@pytest.mark.parametrize(
    "kernels,item_kernel",
    [
        (["count"], "linear"),
        (["item"], "linear"),
        (["user"], "linear"),
        (["count", "item", "user"], "linear"),
        (["item", "user"], "rbf"),
    ],
)
def test_end_to_end(tiny_config, kernels, item_kernel):
    result = run(
        "RKSA",
        "tiny",
        config_dict={**tiny_config, "kernels": kernels, "item_kernel": item_kernel},
    )
    logging.getLogger().handlers.clear()
    values = list(result["test_result"].values())
    assert values and all(math.isfinite(v) for v in values)


def test_bad_options_are_clear_errors(tiny_config):
    with pytest.raises(ValueError, match="kernels must be a non-empty list"):
        _build(tiny_config, kernels=["count", "graph"])
    with pytest.raises(ValueError, match="item_kernel must be one of"):
        _build(tiny_config, item_kernel="poly")


def test_sparse_table_gathers_blocks():
    users = np.array([0, 0, 0, 1, 1, 2, 2])  # user 2 has item 1 twice: counted once
    table = CooccurrenceTable(users, np.array([1, 2, 3, 2, 3, 1, 1]), 5)
    seq = torch.tensor([[1, 2, 3, 0], [3, 4, 0, 0]])
    block = table.block(seq)
    assert block[0].tolist() == [
        [2, 1, 1, 0],
        [1, 2, 2, 0],
        [1, 2, 2, 0],
        [0, 0, 0, 0],
    ]
    assert block[1, 0, 1] == 0 and table.occurrences(seq)[1].tolist() == [2, 0, 0, 0]
