"""PAtt / DPAtt: closed-form k-DPP quantities vs brute force, causality, padding,
gradients, numerics, the learned category kernel and end-to-end runs (issue 5)."""

import copy
import itertools
import logging
import math

import numpy as np
import pytest
import torch

from experiments.research import (
    ResearchDPPAttention,
    dpp_pair_probabilities,
    elementary_symmetric,
)
from recbole_attn.plugin import dpatt as dpatt_forms
from recbole_attn.plugin.dpatt import causal_product_numerators
from recbole_attn.model import dpatt, patt
from recbole_attn.model.dpatt import (
    category_kernel,
    distinct_category_counts,
    learn_category_kernel,
)


def _masked(kernel, mask):
    """``kernel`` with the rows and columns of invalid positions 0 (a head axis too)."""
    m = mask.to(kernel.dtype)
    if kernel.dim() == 4:
        m = m.unsqueeze(1)
    return kernel * m.unsqueeze(-1) * m.unsqueeze(-2)


def causal_pair_numerators(kernel, mask, k, category=None, **kwargs):
    """The model files' numerators of a kernel with padding (masked here): PAtt's, or
    DPAtt's with a category kernel."""
    mask = mask.bool()
    masks = patt.causal_masks(mask, k, kernel.dim() == 4, kernel.dtype)
    if category is None:
        return patt.causal_pair_numerators(_masked(kernel, mask), k, masks, **kwargs)
    masks = dpatt.DiversityMasks(*masks, category)
    return dpatt.causal_ratio_numerators(_masked(kernel, mask), k, masks, **kwargs)


def causal_dpp_pair_probabilities(kernel, mask, k, diversity_form="ratio", **kwargs):
    """P = W / Z of the model files' per-prefix k-DPPs (the kernel masked here): PAtt's
    (and DPAtt's ratio form), or DPAtt's product form."""
    mask = mask.bool()
    category = kwargs.pop("category", None)
    if diversity_form == "product" and category is not None:
        num, norm = dpatt_forms.causal_product_numerators(
            _masked(kernel, mask), category, mask, k
        )
    elif category is not None:
        num, norm = causal_pair_numerators(kernel, mask, k, category, **kwargs)
        num, norm = num, patt.floored_normalizer(norm, _masked(kernel, mask), k)
    else:
        num, norm = patt.causal_pair_weights(_masked(kernel, mask), mask, k, **kwargs)
    return num / norm.unsqueeze(-1)


def dependency_attention(probs, mask, lam, row_normalize=True):
    """Reference for eq. 7, written out: D_tr = exp(-lambda P(r, t)) for valid r < t,
    D_tt = 1 for valid t, 0 elsewhere; rows divided by their sum."""
    valid = mask.bool()
    n = valid.size(-1)
    lower = torch.ones(n, n, dtype=torch.bool).tril(-1)
    keys = lower & valid.unsqueeze(-1) & valid.unsqueeze(-2)
    diag = torch.diag_embed(valid)
    if probs.dim() == 4:
        keys, diag = keys.unsqueeze(1), diag.unsqueeze(1)
    weights = torch.exp(-lam * probs) * keys + diag.to(probs.dtype)
    if row_normalize:
        weights = weights / weights.sum(-1, keepdim=True).clamp_min(1.0)
    return weights


def dpp_attention(
    n_heads,
    dim,
    mask,
    category=None,
    k=2,
    lam=1.0,
    triple_samples=0,
    row_normalize=True,
    diversity_form="ratio",
    diagonal="one",
    sampler="linear",
    ground_set="prefix",
):
    """PAtt's attention on ``mask`` [B, T] (value = input), by default with the paper's
    forms (the research wing's attention; the official forms are the product's), and a
    function of the input hidden states returning (output, attention it aggregated
    with)."""
    layer = ResearchDPPAttention(
        n_heads,
        dim,
        0.0,
        0.0,
        1e-12,
        k,
        lam,
        triple_samples,
        0.1,
        diagonal,
        sampler,
        row_normalize,
        ground_set,
    ).double()
    layer.diversity_form = diversity_form  # DPAtt's pair weights

    def run(hidden):
        n = mask.size(1)
        allowed = mask[:, None, None, :] & torch.ones(n, n).bool().tril()
        attention_mask = torch.where(allowed, 0.0, -10000.0)  # RecBole's
        masks = patt.causal_masks(mask, k, dtype=hidden.dtype)
        if category is not None:
            masks = dpatt.DiversityMasks(*masks, category)
        seen = []
        hook = layer.attn_dropout.register_forward_pre_hook(
            lambda m, args: seen.append(args[0])
        )
        out = layer(hidden, attention_mask, mask, masks)
        hook.remove()
        return out, seen[0]

    return layer, run


# ------------------------------------------------------------------ brute force
def brute_pair_probs(kernel, valid, k, category=None):
    """P[r, t] = sum over k-subsets Y of the valid items containing r, t of w(Y) / sum w,
    w(Y) = det L_Y (/ det C_Y); also returns the normalizer."""
    n = kernel.size(0)
    idx = [i for i in range(n) if valid[i]]
    probs = torch.zeros(n, n, dtype=kernel.dtype)
    norm = torch.zeros((), dtype=kernel.dtype)
    for subset in itertools.combinations(idx, k):
        y = list(subset)
        w = torch.linalg.det(kernel[y][:, y])
        if category is not None:
            w = w / torch.linalg.det(category[y][:, y])
        norm = norm + w
        for r, t in itertools.permutations(subset, 2):
            probs[r, t] += w
    if len(idx) >= k:
        probs = probs / norm
    return probs, norm


def random_kernels(batch, length, rank, seed, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    s = torch.randn(batch, length, rank, generator=gen, dtype=dtype)
    return s @ s.transpose(-1, -2)


PAD_MASKS = [
    [1, 1, 1, 1, 1, 1, 1],
    [1, 1, 1, 1, 1, 0, 0],  # right padding
    [0, 1, 1, 0, 1, 1, 1],  # arbitrary holes
]


@pytest.mark.parametrize("k", [2, 3])
def test_pair_probabilities_match_brute_force(k):
    kernel = random_kernels(3, 7, 5, seed=k)
    mask = torch.tensor(PAD_MASKS, dtype=torch.bool)
    # padding content must be irrelevant: garbage in padded rows / columns
    kernel = kernel + 50.0 * (~mask).double().unsqueeze(-1)
    kernel = (kernel + kernel.transpose(-1, -2)) / 2
    probs = dpp_pair_probabilities(kernel, mask, k)
    e_k = elementary_symmetric(kernel, mask, k)
    for b in range(3):
        ref, norm = brute_pair_probs(kernel[b], mask[b], k)
        torch.testing.assert_close(probs[b], ref, rtol=1e-9, atol=1e-12)
        torch.testing.assert_close(e_k[b], norm, rtol=1e-9, atol=1e-12)
        # a k-subset holds k(k-1) ordered pairs
        total = probs[b].sum()
        torch.testing.assert_close(total, torch.tensor(k * (k - 1.0)).double())
    assert probs.diagonal(dim1=-2, dim2=-1).abs().max() == 0
    assert (
        probs[~mask].abs().max() == 0 and probs.transpose(1, 2)[~mask].abs().max() == 0
    )


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("with_category", [False, True])
def test_causal_prefix_forms_match_brute_force(k, with_category):
    kernel = random_kernels(2, 6, 4, seed=10 + k)
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]], dtype=torch.bool)
    category = None
    if with_category:
        gen = torch.Generator().manual_seed(3)
        vec = torch.randn(2, 6, 3, generator=gen, dtype=torch.float64)
        category = category_kernel(vec, 0.1)
    probs = causal_dpp_pair_probabilities(kernel, mask, k, category=category)
    for b in range(2):
        for t in range(6):
            if not mask[b, t]:
                assert probs[b, t].abs().max() == 0
                continue
            prefix = mask[b].clone()
            prefix[t + 1 :] = False
            cat = None if category is None else category[b]
            ref, _ = brute_pair_probs(kernel[b], prefix, k, cat)
            torch.testing.assert_close(
                probs[b, t, :t], ref[t, :t], rtol=1e-9, atol=1e-12
            )
            assert probs[b, t, t:].abs().max() == 0  # causal, zero diagonal


@pytest.mark.parametrize("with_category", [False, True])
def test_sampled_triples_are_unbiased(with_category):
    torch.manual_seed(0)
    kernel = random_kernels(2, 6, 4, seed=7)
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]], dtype=torch.bool)
    category = None
    if with_category:
        category = category_kernel(torch.randn(2, 6, 3, dtype=torch.float64), 0.1)
    exact, _ = causal_pair_numerators(kernel, mask, 3, category=category)
    reps = 2000  # independent draws, as one batch
    big = kernel.repeat(reps, 1, 1)
    cat = None if category is None else category.repeat(reps, 1, 1)
    draws, _ = causal_pair_numerators(
        big, mask.repeat(reps, 1), 3, triple_samples=4, category=cat
    )
    mean = draws.view(reps, *exact.shape).mean(0)
    assert ((mean - exact).abs().max() / exact.abs().max()) < 0.03
    # exact normalizer without C
    _, norm = causal_pair_numerators(kernel, mask, 3, triple_samples=4)
    _, norm_exact = causal_pair_numerators(kernel, mask, 3)
    torch.testing.assert_close(norm, norm_exact)


def test_the_model_file_refuses_what_it_cannot_compute(tiny_config):
    """RecBole builds the model file without our checks: it refuses a k other than 2
    or 3, a window shorter than k and an unknown diversity form itself."""
    config, _, _, (train, _, _) = build_model_and_config(
        tiny_config | FAST_DPATT | {"load_col": CAT_COLS}, "DPAtt"
    )
    for key, value, message in [
        ("dpp_k", 4, "dpp_k must be 2 or 3"),
        ("MAX_ITEM_LIST_LENGTH", 2, "raise MAX_ITEM_LIST_LENGTH"),
        ("dpp_diversity_form", "sum", "dpp_diversity_form must be"),
    ]:
        changed = copy.deepcopy(config)
        changed[key] = value
        if key == "MAX_ITEM_LIST_LENGTH":
            changed["dpp_k"] = 3
        model = dpatt_forms.DPAttWithForms if key == "dpp_diversity_form" else None
        with pytest.raises(ValueError, match=message):
            (model or dpatt.DPAtt)(changed, train.dataset)


# ------------------------------------------------------------------ numerics, gradients
def attention_fn(k, mask, lam=8.0, category=None):
    def fn(sampler):
        kernel = sampler @ sampler.transpose(-1, -2)
        probs = causal_dpp_pair_probabilities(kernel, mask, k, category=category)
        return dependency_attention(probs, mask, lam)

    return fn


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("with_category", [False, True])
def test_gradcheck_attention(k, with_category):
    gen = torch.Generator().manual_seed(1)
    sampler = torch.randn(2, 5, 3, generator=gen, dtype=torch.float64)
    sampler.requires_grad_(True)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.bool)
    category = None
    if with_category:
        vec = torch.randn(2, 5, 3, generator=gen, dtype=torch.float64)
        category = category_kernel(vec, 0.1)
    assert torch.autograd.gradcheck(
        attention_fn(k, mask, category=category), (sampler,)
    )


@pytest.mark.parametrize(
    "k,form,row_normalize",
    [(2, None, True), (3, None, True), (2, None, False), (2, "ratio", True)]
    + [(3, "ratio", True), (2, "product", True), (3, "product", False)],
)
def test_shared_attention_gives_the_eq7_weights(k, form, row_normalize):
    """The DPP score through the shared attention (masked softmax of -lambda P, or exp
    for raw weights) equals eq. 7 written out, on every valid query row."""
    gen = torch.Generator().manual_seed(3)
    b, h, n, dim = 3, 2, 6, 8
    mask = torch.tensor([[1] * 6, [1, 1, 1, 1, 0, 0], [1, 1, 0, 0, 0, 0]]).bool()
    category = None
    if form is not None:
        vec = torch.randn(b, n, 3, generator=gen, dtype=torch.float64)
        category = category_kernel(vec, 0.1)
    layer, run = dpp_attention(
        h,
        dim,
        mask,
        category,
        k=k,
        lam=8.0,
        row_normalize=row_normalize,
        diversity_form=form or "ratio",
    )
    hidden = torch.randn(b, n, dim, generator=gen, dtype=torch.float64)
    _, attn = run(hidden)
    sampler = layer.query(hidden).view(b, n, h, dim // h).transpose(1, 2)
    sampler = sampler * mask[:, None, :, None]
    probs = causal_dpp_pair_probabilities(
        sampler @ sampler.transpose(-1, -2),
        mask,
        k,
        diversity_form=form or "ratio",
        category=category,
    )
    want = dependency_attention(probs, mask, 8.0, row_normalize)
    rows = mask[:, None, :].expand(b, h, n)
    torch.testing.assert_close(attn[rows], want[rows], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("k,with_category", [(2, False), (2, True), (3, False)])
def test_default_scale_bounds_how_much_the_dpp_reweights_keys(k, with_category):
    """At PAtt's default lambda = 1/sqrt(d_h) = 0.125 (the official scale), P is a
    probability (0 <= P <= 1), so within a query row the weights of the earlier keys
    differ by at most exp(lambda) = 1.13x whatever the kernel: the attention is nearly
    a mean over the prefix with its own self weight exp(-lambda L_tt), and DPAtt's
    category kernel, which only moves P, cannot reweight them by more either
    (docs/patt.md, "Why DPAtt now equals PAtt"). At our earlier lambda 64 the same
    inputs are far from uniform."""
    gen = torch.Generator().manual_seed(12)
    b, n, dim = 3, 8, 8
    mask = torch.tensor([[1] * 8, [1, 1, 1, 1, 1, 0, 0, 0], [1] * 8]).bool()
    category = None
    if with_category:
        category = category_kernel(
            torch.randn(b, n, 3, generator=gen, dtype=torch.float64), 0.1
        )
    hidden = 3.0 * torch.randn(b, n, dim, generator=gen, dtype=torch.float64)
    spread = {}
    for lam in (0.125, 64.0):
        torch.manual_seed(0)  # the same projection for both scales
        _, run = dpp_attention(
            1, dim, mask, category, k=k, lam=lam, diagonal="kernel", sampler="squared"
        )
        _, attn = run(hidden)
        ratios = []
        for x in range(b):
            for t in range(n):
                keys = attn[x, 0, t, :t][mask[x, :t]]
                if mask[x, t] and keys.numel() >= 2:
                    ratios.append((keys.max() / keys.min()).item())
        spread[lam] = max(ratios)
    assert spread[0.125] <= math.exp(0.125) * (1 + 1e-12)
    assert spread[64.0] > 10.0


@pytest.mark.parametrize("k", [2, 3])
def test_float32_degenerate_inputs_stay_finite(k):
    """Rank-1, zero, underflowing and large kernels, repeated items, lengths 0 / 1 / 2:
    finite outputs and gradients, bounded probabilities, D rows are proper weights.
    (float32 overflows for kernel entries beyond ~1e12 with k = 3; the Sampler reads
    LayerNorm'ed inputs, which keeps them O(1).)"""
    torch.manual_seed(0)
    length, dim = 6, 4
    base = torch.randn(1, 1, dim)
    samplers = torch.cat(
        [
            torch.randn(1, length, dim),
            base.expand(1, length, dim) * 1.0,  # repeated item: rank 1
            torch.zeros(1, length, dim),  # zero kernel
            torch.randn(1, length, dim) * 1e-12,  # underflowing kernel
            torch.randn(1, length, dim) * 1e4,  # large kernel (entries ~1e8)
            torch.randn(1, length, dim),
            torch.randn(1, length, dim),
            torch.randn(1, length, dim),
        ]
    ).requires_grad_(True)
    lengths = torch.tensor([6, 6, 6, 6, 6, 0, 1, 2])
    mask = torch.arange(length).unsqueeze(0) < lengths.unsqueeze(1)
    for samples in ([0, 4] if k == 3 else [0]):
        kernel = samplers @ samplers.transpose(-1, -2)
        probs = causal_dpp_pair_probabilities(kernel, mask, k, triple_samples=samples)
        attn = dependency_attention(probs, mask, lam=100.0)
        assert torch.isfinite(probs).all() and torch.isfinite(attn).all()
        assert probs.min() >= 0 and probs.max() <= 2.0 + 1e-5
        rows = attn.sum(-1)
        torch.testing.assert_close(rows[mask], torch.ones_like(rows[mask]))
        assert attn[~mask].abs().max() == 0
        (grad,) = torch.autograd.grad((attn * torch.randn_like(attn)).sum(), samplers)
        assert torch.isfinite(grad).all()
    # prefixes with fewer than k items have no k-subset: their probabilities are exact 0
    assert probs[:, : k - 1].abs().max() == 0


def test_float32_matches_float64_on_learned_scale_kernels():
    """The closed forms in float32 (what the model runs) vs float64 on SASRec-scale
    kernels (S = LN(x) W with W ~ N(0, 0.02)): small relative error."""
    torch.manual_seed(0)
    x = torch.nn.functional.layer_norm(torch.randn(16, 30, 64), (64,))
    w = torch.randn(64, 64) * 0.02
    kernel64 = (x @ w).double() @ (x @ w).double().transpose(-1, -2)
    mask = torch.ones(16, 30, dtype=torch.bool)
    for k in (2, 3):
        p64 = causal_dpp_pair_probabilities(kernel64, mask, k)
        p32 = causal_dpp_pair_probabilities(kernel64.float(), mask, k).double()
        rel = (p32 - p64).abs().max() / p64.abs().max()
        assert rel < 1e-4, (k, rel)


# ------------------------------------------------------------------ category kernel
def test_learned_category_kernel_tracks_category_scope():
    from scipy.stats import spearmanr

    rng = np.random.default_rng(0)
    n_items, n_cats = 60, 8
    item_cat = torch.tensor(
        np.concatenate([[0], rng.integers(1, n_cats + 1, size=n_items)])
    ).unsqueeze(-1)
    histories = torch.stack(
        [
            torch.tensor(rng.choice(np.arange(1, n_items + 1), 15, replace=False))
            for _ in range(80)
        ]
    )
    lengths = torch.full((80,), 15)

    def correlation(vectors):
        sets = torch.stack(
            [
                torch.tensor(rng.choice(np.arange(1, n_items + 1), 4, replace=False))
                for _ in range(400)
            ]
        )
        dets = torch.linalg.det(category_kernel(vectors[sets], 0.1))
        counts = distinct_category_counts(sets, item_cat, n_cats + 1)
        return spearmanr(counts.numpy(), dets.numpy()).statistic

    untrained = learn_category_kernel(
        item_cat, histories, lengths, rank=8, steps=0, seed=1
    )
    learned = learn_category_kernel(
        item_cat, histories, lengths, rank=8, steps=60, seed=1
    )
    before, after = correlation(untrained), correlation(learned)
    assert after > 0.4 and after > before + 0.2, (before, after)


# ------------------------------------------------------------------ the model
CAT_COLS = {
    "inter": ["user_id", "item_id", "timestamp"],
    "item": ["item_id", "categories"],
}
FAST_DPATT = {"dpp_cat_steps": 30, "dpp_cat_rank": 8}


def build_model_and_config(config_dict, model="PAtt", dataset="tiny"):
    """The run built on ``dataset``; a research-wing option (the leaky ground set, the
    paper's forms) builds the research class (experiments/research.py), as the runner
    does."""
    from experiments.research import model_for
    from recbole_attn.engine.quick_start import build

    model = model_for(model, config_dict)
    config, net, trainer, data = build(model, dataset, config_dict=config_dict)
    logging.getLogger().handlers.clear()
    return config, net, trainer, data


def build_model(config_dict, model="PAtt", dataset="tiny"):
    _, net, _, data = build_model_and_config(config_dict, model, dataset)
    return net, data


def test_training_reduces_loss(tiny_config):
    net, (train_data, _, _) = build_model(tiny_config | {"dpp_k": 3}, "PAtt")
    batch = next(iter(train_data))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    torch.manual_seed(0)
    net.train()
    losses = []
    for _ in range(30):
        loss = net.calculate_loss(batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(math.isfinite(v) for v in losses)
    assert np.mean(losses[-5:]) < np.mean(losses[:5])


@pytest.mark.parametrize(
    "model,extra",
    [
        ("PAtt", {}),
        ("PAtt", {"dpp_k": 3}),
        ("PAtt", {"dpp_k": 3, "dpp_triple_samples": 4}),
        ("DPAtt", FAST_DPATT),
        ("DPAtt", {"dpp_k": 3, **FAST_DPATT}),
        ("DPAtt", {"dpp_diversity_form": "product", **FAST_DPATT}),
    ],
)
def test_end_to_end(tiny_config, model, extra):
    from recbole_attn.engine.quick_start import run

    result = run(
        model, "tiny", config_dict=tiny_config | {"load_col": CAT_COLS, **extra}
    )
    logging.getLogger().handlers.clear()
    values = list(result["test_result"].values())
    assert values and all(math.isfinite(v) for v in values)
    assert math.isfinite(result["best_valid_score"])


def test_bad_configs_raise(tiny_config):
    with pytest.raises(
        ValueError, match="DPAtt needs the item category field 'categories'"
    ):
        build_model(tiny_config | FAST_DPATT, "DPAtt", dataset="tiny_nocat")
    with pytest.raises(ValueError, match=r"dpp_k must be one of \[2, 3\]"):
        build_model(tiny_config | {"dpp_k": 4}, "PAtt")
    with pytest.raises(ValueError, match="MAX_ITEM_LIST_LENGTH"):
        build_model(tiny_config | {"dpp_k": 3, "MAX_ITEM_LIST_LENGTH": 2}, "PAtt")
    with pytest.raises(ValueError, match="dpp_triple_samples"):
        build_model(tiny_config | {"dpp_triple_samples": 4}, "PAtt")


# ------------------------------------------------------------------ DPAtt product form
def brute_product_probs(kernel, category, prefix, t, k):
    """Row t of the product form by brute force: T = L_Y inv(C_Y) on the prefix Y (explicit
    inverse), pair quantity q(a, b) = det T_{ab} (k = 2) or sum_x det T_{abx} (k = 3),
    P(r, t) = max(q(r, t), 0) / (sum_{a<b} max(q(a, b), 0) [/ 3]). Also returns the
    number of negative pair quantities."""
    y = [i for i in range(kernel.size(0)) if prefix[i]]
    prod = kernel[y][:, y] @ torch.linalg.inv(category[y][:, y])
    pos = {item: i for i, item in enumerate(y)}

    def det(items):
        ii = [pos[i] for i in items]
        return float(torch.linalg.det(prod[ii][:, ii]))

    quantity = {}
    for a, b in itertools.combinations(y, 2):
        others = [x for x in y if x not in (a, b)]
        quantity[a, b] = det((a, b)) if k == 2 else sum(det((a, b, x)) for x in others)
    norm = sum(max(v, 0.0) for v in quantity.values()) / (3.0 if k == 3 else 1.0)
    row = torch.zeros(kernel.size(0), dtype=torch.float64)
    for r in y:
        if r < t:
            row[r] = max(quantity[r, t], 0.0) / norm
    return row, sum(v < 0 for v in quantity.values())


@pytest.mark.parametrize("k", [2, 3])
def test_product_form_matches_brute_force(k):
    """L_{<=t} C_{<=t}^-1 per prefix (one batched solve) vs an explicit inverse per prefix
    and itertools over subsets, float64, with padding holes; negative minors occur and are
    clamped; extra heads and future positions change nothing they should not."""
    kernel = random_kernels(2, 6, 4, seed=20 + k)
    gen = torch.Generator().manual_seed(5)
    category = category_kernel(
        torch.randn(2, 6, 3, generator=gen, dtype=torch.float64), 0.1
    )
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 0, 1, 1, 1, 0]], dtype=torch.bool)
    probs = causal_dpp_pair_probabilities(
        kernel, mask, k, diversity_form="product", category=category
    )
    negatives = 0
    for b in range(2):
        for t in range(6):
            prefix = mask[b].clone()
            prefix[t + 1 :] = False
            if not mask[b, t] or prefix.sum() < k:
                assert probs[b, t].abs().max() == 0
                continue
            ref, neg = brute_product_probs(kernel[b], category[b], prefix, t, k)
            negatives += neg
            torch.testing.assert_close(probs[b, t], ref, rtol=1e-9, atol=1e-12)
    assert negatives > 0  # the clamp is exercised
    # not the restriction of the full L C^-1: no future item reaches row t
    future = kernel.clone()
    future[:, 4:, :] += 3.0
    future[:, :, 4:] += 3.0
    cat_future = category_kernel(torch.randn(2, 6, 3, dtype=torch.float64), 0.1)
    cat_future[:, :4, :4] = category[:, :4, :4]
    moved = causal_dpp_pair_probabilities(
        future, mask, k, diversity_form="product", category=cat_future
    )
    torch.testing.assert_close(moved[:, :4], probs[:, :4], rtol=1e-9, atol=1e-12)
    # C = I: T = L, every minor >= 0, the exact k-DPP of L (PAtt)
    eye = torch.eye(6, dtype=torch.float64).expand(2, 6, 6)
    torch.testing.assert_close(
        causal_dpp_pair_probabilities(
            kernel, mask, k, diversity_form="product", category=eye
        ),
        causal_dpp_pair_probabilities(kernel, mask, k),
        rtol=1e-9,
        atol=1e-12,
    )
    # a head axis: each head on its own
    heads = torch.stack([kernel, kernel.flip(-1).flip(-2)], 1)
    per_head, _ = causal_product_numerators(heads, category, mask, k)
    for h in range(2):
        alone, _ = causal_product_numerators(heads[:, h], category, mask, k)
        torch.testing.assert_close(per_head[:, h], alone, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("k", [2, 3])
def test_product_form_gradcheck(k):
    gen = torch.Generator().manual_seed(2)
    sampler = torch.randn(2, 5, 3, generator=gen, dtype=torch.float64)
    sampler.requires_grad_(True)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.bool)
    category = category_kernel(
        torch.randn(2, 5, 3, generator=gen, dtype=torch.float64), 0.1
    )

    def fn(s):
        probs = causal_dpp_pair_probabilities(
            s @ s.transpose(-1, -2),
            mask,
            k,
            diversity_form="product",
            category=category,
        )
        return dependency_attention(probs, mask, 8.0)

    assert torch.autograd.gradcheck(fn, (sampler,))


@pytest.mark.parametrize("k", [2, 3])
def test_product_form_float32_near_singular_category_stays_finite(k):
    """float32, C nearly singular (beta = 1e-6, repeated and collinear items: cond ~1e7,
    T's minors are rounding noise), plus zero / rank-1 / large L and short sequences:
    finite attention and gradients, bounded probabilities, proper rows."""
    torch.manual_seed(0)
    b, h, n, dim = 6, 2, 6, 8
    vec = torch.randn(b, n, 3)
    vec[:, 3:] = vec[:, :3]  # repeated items
    vec[1] = vec[1, :1]  # one category for the whole sequence
    category = category_kernel(vec, 1e-6)
    hidden = torch.randn(b, n, dim)
    hidden[2] = 0.0  # zero kernel
    hidden[3] = hidden[3, :1]  # rank 1
    hidden[4] *= 1e3  # large kernel
    hidden.requires_grad_(True)
    lengths = torch.tensor([6, 6, 6, 6, 6, 2])
    mask = torch.arange(n).unsqueeze(0) < lengths.unsqueeze(1)
    layer, run = dpp_attention(
        h, dim, mask, category, k=k, lam=100.0, diversity_form="product"
    )
    layer.float()
    out, attn = run(hidden)
    sampler = layer.query(hidden).view(b, n, h, dim // h).transpose(1, 2)
    sampler = sampler * mask[:, None, :, None]
    probs = causal_dpp_pair_probabilities(
        sampler @ sampler.transpose(-1, -2),
        mask,
        k,
        diversity_form="product",
        category=category,
    )
    assert torch.isfinite(out).all() and torch.isfinite(probs).all()
    assert probs.min() >= 0 and probs.max() <= (1.0 if k == 2 else 3.0) + 1e-5
    (grad,) = torch.autograd.grad((out * torch.randn_like(out)).sum(), hidden)
    assert torch.isfinite(grad).all()
    rows = attn.sum(-1)
    torch.testing.assert_close(rows[:, 0][mask], torch.ones_like(rows[:, 0][mask]))


def test_bad_diversity_form_raises(tiny_config):
    with pytest.raises(ValueError, match="dpp_diversity_form must be"):
        build_model(tiny_config | {"dpp_diversity_form": "prod"}, "DPAtt")
    with pytest.raises(ValueError, match="dpp_triple_samples: 0"):
        build_model(
            tiny_config
            | {"dpp_diversity_form": "product", "dpp_k": 3, "dpp_triple_samples": 4},
            "DPAtt",
        )


# ------------------------------------------------------------------ official-code options
def official_rule_attention(hidden, query, mask, lam, sampler, diagonal, ground_set):
    """Reference for one head, written out from the official code's rule
    (REFERENCE_NOTES §2, docs/patt.md "Against the official code"): S = M W (+ b, then
    squared elementwise for ``squared``), L = S S^T; for every pair (i, j) of the ground
    set, det of the 2x2 block of L; Z = the sum of those dets over pairs i < j of the
    ground set (every position for ``sequence``, the valid prefix of each row
    otherwise); logits -lam det / Z off the diagonal and -lam L_tt (``kernel``) or 0 on
    it; softmax over the keys r <= t that are real items."""
    b, n, _ = hidden.shape
    s = query(hidden)
    s = s * s if sampler == "squared" else s
    out = torch.zeros(b, n, n, dtype=hidden.dtype)
    for x in range(b):
        L = s[x] @ s[x].T
        if ground_set == "prefix":
            L = L * mask[x][:, None] * mask[x][None, :]
        det = torch.zeros(n, n, dtype=hidden.dtype)
        for i, j in itertools.permutations(range(n), 2):
            det[i, j] = torch.linalg.det(L[[i, j]][:, [i, j]])
        for t in range(n):
            if not mask[x, t]:
                continue
            members = range(n) if ground_set == "sequence" else range(t + 1)
            members = [i for i in members if ground_set == "sequence" or mask[x, i]]
            z = sum(det[i, j] for i, j in itertools.combinations(members, 2))
            logits = torch.full((n,), -math.inf, dtype=hidden.dtype)
            for r in range(t + 1):
                if not mask[x, r]:
                    continue
                if r == t:
                    logits[r] = -lam * L[t, t] if diagonal == "kernel" else 0.0
                else:
                    p = det[r, t] / z if len(members) >= 2 else 0.0
                    logits[r] = -lam * p
            out[x, t] = torch.softmax(logits, -1)
    return out


OFFICIAL_OPTIONS = [
    ("linear", "one", "prefix"),
    ("squared", "one", "prefix"),
    ("linear", "kernel", "prefix"),
    ("linear", "one", "sequence"),
    ("squared", "kernel", "sequence"),  # the official attention
]


@pytest.mark.parametrize("sampler,diagonal,ground_set", OFFICIAL_OPTIONS)
def test_official_options_match_a_loop_over_the_official_rule(
    sampler, diagonal, ground_set
):
    """Each official behaviour alone and all together (with lambda = 1/sqrt(d_h), the
    official scale), through the shared attention, equals the rule written as loops over
    pairs with torch.linalg.det, on right-padded rows, float64."""
    gen = torch.Generator().manual_seed(5)
    b, n, dim = 3, 6, 8
    mask = torch.tensor([[1] * 6, [1, 1, 1, 1, 0, 0], [1, 1, 0, 0, 0, 0]]).bool()
    lam = 1.0 / math.sqrt(dim)
    layer, run = dpp_attention(
        1,
        dim,
        mask,
        k=2,
        lam=lam,
        sampler=sampler,
        diagonal=diagonal,
        ground_set=ground_set,
    )
    assert (layer.query.bias is not None) == (sampler == "squared")
    with torch.no_grad():  # a nonzero bias, so that the test sees it
        if layer.query.bias is not None:
            layer.query.bias.normal_(generator=gen)
    hidden = torch.randn(b, n, dim, generator=gen, dtype=torch.float64)
    _, attn = run(hidden)
    want = official_rule_attention(
        hidden, layer.query, mask, lam, sampler, diagonal, ground_set
    )
    rows = mask
    torch.testing.assert_close(attn[:, 0][rows], want[rows], rtol=1e-10, atol=1e-12)


def test_sequence_ground_set_k3_is_the_k_dpp_of_every_position():
    """k = 3 on the whole padded sequence: -lambda times the brute-force triple
    marginals of the k-DPP on all positions (padding included), off the diagonal."""
    gen = torch.Generator().manual_seed(6)
    b, n, dim = 2, 5, 6
    mask = torch.tensor([[1] * 5, [1, 1, 1, 0, 0]]).bool()
    layer, run = dpp_attention(1, dim, mask, k=3, lam=2.0, ground_set="sequence")
    hidden = torch.randn(b, n, dim, generator=gen, dtype=torch.float64)
    masks = patt.causal_masks(mask, 3, dtype=hidden.dtype)
    logits = layer.logits(layer.sampler(hidden), mask, masks)
    for x in range(b):
        s = layer.query(hidden[x])
        probs, _ = brute_pair_probs(s @ s.T, torch.ones(n, dtype=torch.bool), 3)
        torch.testing.assert_close(logits[x, 0], -2.0 * probs, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("sampler,diagonal,ground_set", OFFICIAL_OPTIONS[1:])
def test_gradcheck_official_options(sampler, diagonal, ground_set):
    gen = torch.Generator().manual_seed(8)
    mask = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]).bool()
    layer, run = dpp_attention(
        1,
        4,
        mask,
        k=2,
        lam=0.5,
        sampler=sampler,
        diagonal=diagonal,
        ground_set=ground_set,
    )
    hidden = torch.randn(2, 5, 4, generator=gen, dtype=torch.float64)
    hidden.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda h: run(h)[0], (hidden,))


def test_bad_official_option_values_raise(tiny_config):
    for extra, word in [
        ({"dpp_diagonal": "zero"}, "dpp_diagonal"),
        ({"dpp_sampler": "cubed"}, "dpp_sampler"),
        ({"dpp_ground_set": "future"}, "dpp_ground_set"),
        (
            {"dpp_k": 3, "dpp_triple_samples": 4, "dpp_ground_set": "sequence"},
            "exact marginals only",
        ),
    ]:
        with pytest.raises(ValueError, match=word):
            build_model(tiny_config | extra, "PAtt")


def _outputs(net, seq, lengths):
    return net.encode(net.trim(seq, lengths), lengths)


def test_sequence_ground_set_is_the_opt_in_leak(tiny_config):
    """With the whole padded sequence as ground set, a row's output changes when a LATER
    item changes (the official normalizer's leak); with the prefix ground set it does
    not. The leaky option keeps batches at full length and numbers the padding
    0 .. T-n-1 (the left-padded official layout), the items keep their ids."""
    config = tiny_config | {"hidden_dropout_prob": 0.0, "dpp_lambda": 8.0}
    torch.manual_seed(0)
    seq = torch.randint(1, 20, (2, 12))
    lengths = torch.tensor([9, 12])
    seq[0, 9:] = 0
    changed = seq.clone()
    changed[:, 7] = torch.tensor([21, 22])  # after position 5 of both rows
    for ground_set, leaks in (("prefix", False), ("sequence", True)):
        net, _ = build_model(config | {"dpp_ground_set": ground_set}, "PAtt")
        net.eval()
        assert net.trim_batch is (ground_set == "prefix")
        with torch.no_grad():
            a = _outputs(net, seq, lengths)[:, :6]
            b = _outputs(net, changed, lengths)[:, :6]
        assert (not torch.allclose(a, b, atol=1e-6)) is leaks, ground_set
    net, _ = build_model(
        config | {"dpp_ground_set": "sequence", "position_alignment": "last"}, "PAtt"
    )
    lengths = torch.tensor([9, 12])
    seq[0, 9:] = 0
    assert net.trim(seq[:, :12], lengths).size(1) == net.max_seq_length == 12
    positions = net.position_ids(lengths, 12)
    assert positions[0].tolist() == [3, 4, 5, 6, 7, 8, 9, 10, 11, 0, 1, 2]
    assert positions[1].tolist() == list(range(12))


def test_official_option_configs(tiny_config):
    with pytest.raises(ValueError, match="dpp_ground_set.*one of"):
        build_model(tiny_config | {"dpp_ground_set": "all"}, "PAtt")
    with pytest.raises(ValueError, match="set dpp_triple_samples: 0"):
        build_model(
            tiny_config
            | {"dpp_ground_set": "sequence", "dpp_k": 3, "dpp_triple_samples": 2},
            "PAtt",
        )
    # DPAtt has no leaky ground set: the product refuses the research-wing option
    with pytest.raises(ValueError, match="dpp_ground_set is a research-only option"):
        build_model(
            tiny_config
            | FAST_DPATT
            | {"load_col": CAT_COLS, "dpp_ground_set": "sequence"},
            "DPAtt",
        )
    net, _ = build_model(tiny_config | {"dpp_sampler": "squared"}, "PAtt")
    attention = net.trm_encoder.layer[0].multi_head_attention
    assert attention.query.bias is not None and not hasattr(attention, "key")
