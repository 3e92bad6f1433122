"""The contract every model of ``recbole_attn.plugin.MODELS`` keeps (a new model gets
these checks by being in MODELS): causality, padding invariance, exact batch trimming
under both position alignments, the plugin's predictions equal to the model file's own,
the plugin's loss at the last positions equal to the model file's own loss on the same
negatives, ``predict`` == ``full_sort_predict``, ``attention_weights``, a weights-only
checkpoint round trip, deterministic evaluation and finite training gradients."""

import logging
import os

import pytest
import torch
from torch import nn

from experiments import research
from recbole_attn.engine.checkpoint import load_checkpoint, save_checkpoint
from recbole_attn.plugin import MODELS, awrsr_combinations
from recbole_attn.engine.quick_start import build
from recbole_attn.sequential.recommender import AttnSequentialRecommender

CAT_COLS = {
    "inter": ["user_id", "item_id", "timestamp"],
    "item": ["item_id", "categories"],
}
#: model -> the configurations checked (default: the model's yaml alone)
VARIANTS = {
    "STOSA": [
        {},  # the official code's model without its leak
        # experiments/studies.py, STOSA_OFFICIAL (the research class)
        {"neg_exclude_heldout": True},
        {  # the paper's model
            "stosa_layer_means": "paper",
            "stosa_input": "paper",
            "stosa_ffn": "paper",
            "stosa_init": "recbole",
            "position_alignment": "first",
        },
        {"stosa_layer_means": "paper"},
        {"stosa_input": "paper"},
        {"stosa_ffn": "paper"},
        {"stosa_init": "recbole"},
    ],
    "SASRecAP": [{}],
    "PAtt": [
        {},
        {"dpp_k": 3},
        {"dpp_k": 3, "dpp_triple_samples": 4},
        # the default is the official code's mechanism without its leaks (PATT_NO_LEAK
        # of experiments/studies.py; the leaky dpp_ground_set: sequence of the research
        # class is tested in test_patt.py); this is the paper's eq. 7-9: D_tt = 1,
        # linear Sampler, raw weights
        {
            "dpp_lambda": 64.0,
            "dpp_diagonal": "one",
            "dpp_sampler": "linear",
            "dpp_row_normalize": False,
            "position_alignment": "first",
        },
    ],
    "DPAtt": [
        {},
        {"dpp_k": 3, "dpp_row_normalize": False},
        {"dpp_diversity_form": "product"},
    ],
    "AWRSR": [
        {"backbone": backbone, "refinement": refinement}
        for backbone, refinement in awrsr_combinations()
    ],
    "RKSA": [
        {},
        {"kernels": ["count"]},
        {"kernels": ["item", "user"], "item_kernel": "rbf"},
    ],
    "PARec": [
        {},
        {"add_position_embedding": True, "ffn_placement": "after"},
        {"positional_pattern": "exponential"},
    ],
}
FAST = {"dpp_cat_steps": 5, "dpp_cat_rank": 4}
CASES = [
    pytest.param(name, extra, id=f"{name}-{i}")
    for name in MODELS
    for i, extra in enumerate(VARIANTS.get(name, [{}]))
]


def model_builder(data_path, work, finish, **common):
    """``get(name, extra)`` -> (config, ``finish(model)``, data) built on the tiny dataset
    with small sizes (and ``common`` overrides), once per (name, extra)."""
    cache = {}

    def get(name, extra):
        key = (name, repr(sorted(extra.items())))
        if key not in cache:
            config = {
                "data_path": data_path,
                "load_col": CAT_COLS,
                "checkpoint_dir": str(work / "saved"),
                "state": "ERROR",
                "seed": 2020,
                "hidden_size": 16,
                "inner_size": 32,
                "n_layers": 2,
                "n_heads": 2,
                "MAX_ITEM_LIST_LENGTH": 12,
                **common,
                **FAST,
                **extra,
            }
            cwd = os.getcwd()
            os.chdir(work)
            try:
                # a research-wing option (a leak) builds the research class
                model = research.model_for(name, config)
                cfg, net, _, data = build(model, "tiny", config_dict=config)
            finally:
                os.chdir(cwd)
            logging.getLogger().handlers.clear()
            cache[key] = (cfg, finish(net), data)
        return cache[key]

    return get


@pytest.fixture(scope="module")
def built(request, tiny_data_path, tmp_path_factory):
    """model name, extra config -> (config, model in eval mode), built once per module."""
    work = tmp_path_factory.mktemp("contract")
    return model_builder(tiny_data_path, work, lambda net: net.eval())


def batch(net, lengths, seed=0):
    gen = torch.Generator().manual_seed(seed)
    n = net.max_seq_length
    lengths = torch.tensor(lengths)
    seq = torch.randint(1, net.n_items, (len(lengths), n), generator=gen)
    seq = seq * (torch.arange(n).unsqueeze(0) < lengths.unsqueeze(1))
    return seq, lengths


def inter(net, seq, lengths, **extra):
    return {
        net.ITEM_SEQ: seq,
        net.ITEM_SEQ_LEN: lengths,
        net.USER_ID: torch.arange(1, len(lengths) + 1),
        **extra,
    }


def encode(net, seq, lengths, trim=True):
    """The model's outputs at every position of the batch, trimmed as the plugin trims
    it, or at its full length."""
    users = torch.arange(1, len(lengths) + 1)
    out = net._encode(net.trim(seq, lengths) if trim else seq, lengths, users)
    return out if isinstance(out, tuple) else (out,)


def model_file(net):
    """``net`` as its model file alone: RecBole's methods, without the plugin's."""
    return super(AttnSequentialRecommender, net)


def assert_outputs_close(a, b, **kw):
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x, y, **kw)


@pytest.fixture(params=["first", "last"])
def alignment(request):
    return request.param


@pytest.mark.parametrize("name,extra", CASES)
def test_causal(built, name, extra, alignment):
    _, net, _ = built(name, extra)
    net.position_alignment = alignment
    seq, lengths = batch(net, [net.max_seq_length, 7, 3])
    t = 4
    changed = seq.clone()
    changed[0, t + 1 :] = torch.randint(1, net.n_items, (seq.size(1) - t - 1,))
    with torch.no_grad():
        out, out2 = encode(net, seq, lengths), encode(net, changed, lengths)
    for a, b in zip(out, out2):
        # exactly equal: masked weights are exact zeros, so a later item cannot move
        # an earlier output by even one rounding step (a small leak would)
        torch.testing.assert_close(b[0, : t + 1], a[0, : t + 1], rtol=0, atol=0)
        assert not torch.allclose(b[0, t + 1 :], a[0, t + 1 :])


@pytest.mark.parametrize("name,extra", CASES)
def test_padding_invariant(built, name, extra, alignment):
    """Neither the padding rows of the item tables nor the batch's padding length change
    the outputs at real items."""
    _, net, _ = built(name, extra)
    net.position_alignment = alignment
    seq, lengths = batch(net, [net.max_seq_length, 7, 3], seed=1)
    valid = seq > 0
    with torch.no_grad():
        out = encode(net, seq, lengths)
        alone = encode(net, seq[2:3, :3], lengths[2:3])
        saved = {}
        for name_, module in net.named_modules():
            if (
                isinstance(module, nn.Embedding)
                and module.num_embeddings == net.n_items
            ):
                saved[name_] = module.weight[0].clone()
                module.weight[0] = 10.0
        padded = encode(net, seq, lengths)
        for name_, module in net.named_modules():
            if name_ in saved:
                module.weight[0] = saved[name_]
    assert saved, "no item embedding table found"
    for a, b, c in zip(out, padded, alone):
        torch.testing.assert_close(b[valid], a[valid])
        torch.testing.assert_close(c[0], a[2, :3])


@pytest.mark.parametrize("name,extra", CASES)
def test_trimming_is_exact_and_predictions_are_the_model_files(
    built, name, extra, alignment
):
    """The plugin's predictions (trimmed batches, length groups) are the model file's
    own RecBole predictions on the full-length batch."""
    _, net, _ = built(name, extra)
    net.position_alignment = alignment
    seq, lengths = batch(net, [5, 3, 1, 4], seed=2)
    data = inter(net, seq, lengths)
    with torch.no_grad():
        full = encode(net, seq, lengths, trim=False)
        trimmed = encode(net, seq, lengths)
        scores = net.full_sort_predict(data)
        own = model_file(net).full_sort_predict(data)
        data[net.ITEM_ID] = torch.tensor([1, 5, 2, net.n_items - 1])
        torch.testing.assert_close(
            net.predict(data), model_file(net).predict(data), rtol=1e-5, atol=1e-5
        )
    for a, b in zip(full, trimmed):
        assert b.size(1) == int(lengths.max())
        torch.testing.assert_close(a[:, : b.size(1)], b)
    torch.testing.assert_close(scores, own, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name,extra", CASES)
def test_plugin_loss_at_last_positions_is_the_model_files(built, name, extra):
    """Trained on RecBole's prefix samples with RecBole's negatives, the plugin's loss
    (trimming, length groups, its losses, the model's terms) equals the model file's own
    ``calculate_loss``, the loss RecBole's trainer gives the exported model (no
    dropout, evaluation-time noise)."""
    _, net, _ = built(name, extra)
    if net.loss_type not in getattr(net, "recbole_loss_types", ("BPR", "CE")):
        pytest.skip(f"the model file trains {name} with {net.loss_type} only here")
    seq, lengths = batch(net, [7, 3, 1, 5], seed=6)
    gen = torch.Generator().manual_seed(6)
    pos = torch.randint(1, net.n_items, (4,), generator=gen)
    neg = torch.randint(1, net.n_items, (4,), generator=gen)
    data = inter(net, seq, lengths, **{net.POS_ITEM_ID: pos})
    mode = net.training_mode
    net.training_mode = "last_position"
    drawn = lambda item_seq, targets, users=None: torch.where(  # noqa: E731
        targets > 0, neg.unsqueeze(1), 0
    ).unsqueeze(-1)
    net.sample_negatives = drawn
    try:
        with torch.no_grad():
            plugin = net.calculate_loss(data)
            own = model_file(net).calculate_loss({**data, net.NEG_ITEM_ID: neg})
    finally:
        net.training_mode = mode
        del net.sample_negatives
    plugin = plugin if isinstance(plugin, tuple) else (plugin,)
    own = own if isinstance(own, tuple) else (own,)
    assert len(plugin) == len(own)
    for a, b in zip(plugin, own):  # BPR: RecBole's -log(1e-10 + sigmoid(.))
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,extra", CASES)
def test_predict_matches_full_sort_and_is_deterministic(built, name, extra):
    _, net, _ = built(name, extra)
    seq, lengths = batch(net, [6, 2, 9], seed=3)
    data = inter(net, seq, lengths)
    with torch.no_grad():
        full = net.full_sort_predict(data)
        assert full.shape == (3, net.n_items)
        torch.testing.assert_close(net.full_sort_predict(data), full, rtol=0, atol=0)
        for item in [1, 5, net.n_items - 1]:
            data[net.ITEM_ID] = torch.full((3,), item)
            torch.testing.assert_close(net.predict(data), full[:, item])
        # sampled evaluation repeats every sequence once per candidate: same scores
        items = torch.tensor([1, 5, net.n_items - 1, 2])
        repeated = {
            key: value.repeat_interleave(len(items), dim=0)
            for key, value in data.items()
        }
        repeated[net.ITEM_ID] = items.repeat(3)
        torch.testing.assert_close(
            net.predict(repeated).view(3, len(items)), full[:, items]
        )
        # and in any other row order: runs of equal rows that recur apart
        order = torch.tensor([0, 0, 1, 1, 2, 2, 0, 0, 1, 2])
        mixed = {key: value[order] for key, value in data.items()}
        picks = torch.tensor([0, 1, 0, 3, 2, 1, 2, 3, 2, 0])
        mixed[net.ITEM_ID] = items[picks]
        torch.testing.assert_close(net.predict(mixed), full[order, items[picks]])


@pytest.mark.parametrize("name,extra", CASES)
def test_attention_weights(built, name, extra):
    """Per layer [B, h, L, L], causal, zero over padding keys, rows summing to one where
    the mechanism normalizes; the matrices the layers actually aggregated with."""
    _, net, _ = built(name, extra)
    seq, lengths = batch(net, [6, 2, 4], seed=4)
    weights = net.attention_weights(inter(net, seq, lengths))
    layers = [m for n, m in net.named_modules() if n.endswith(".multi_head_attention")]
    assert len(weights) == len(layers) == 2
    length = int(lengths.max())
    valid = seq[:, :length] > 0
    above = torch.ones(length, length, dtype=torch.bool).triu(1)
    for w, attention in zip(weights, layers):
        heads = getattr(attention, "n_heads", None)
        assert w.shape == (3, heads or attention.num_attention_heads, length, length)
        assert torch.isfinite(w).all()
        assert w[..., above].abs().max() == 0
        assert w.masked_select(~valid[:, None, None, :]).abs().max() == 0
        assert w.min() >= 0
        rows = w.sum(-1)[valid.unsqueeze(1).expand_as(w[..., 0])]
        if getattr(attention, "row_normalize", True):
            torch.testing.assert_close(rows, torch.ones_like(rows))
        elif attention.diagonal == "one":
            assert (rows >= 1.0 - 1e-6).all()  # D_tt = 1 plus positive weights
        else:  # D_tt = exp(-lambda L_tt), D_tr = exp(-lambda P): every weight in (0, 1]
            assert w.max() <= 1.0 and (rows > 0).all()


@pytest.mark.parametrize("name,extra", CASES)
def test_weights_only_checkpoint_round_trip(built, name, extra, tmp_path):
    _, net, _ = built(name, extra)
    seq, lengths = batch(net, [7, 3], seed=5)
    data = inter(net, seq, lengths)
    path = tmp_path / "model.pth"
    with torch.no_grad():
        want = net.full_sort_predict(data)
        save_checkpoint({"state_dict": net.state_dict()}, str(path))
        state = {k: v.clone() for k, v in net.state_dict().items()}
        for p in net.parameters():
            p.add_(1.0)
        assert not torch.allclose(net.full_sort_predict(data), want)
        net.load_state_dict(load_checkpoint(str(path))["state_dict"])
        torch.testing.assert_close(net.full_sort_predict(data), want, rtol=0, atol=0)
        for k, v in net.state_dict().items():
            torch.testing.assert_close(v, state[k], rtol=0, atol=0)


def assert_trains(net, batch):
    """One training step's losses and gradients are finite (``net`` left in eval mode
    with no gradients)."""
    net.train()
    try:
        losses = net.calculate_loss(batch)
        losses = losses if isinstance(losses, tuple) else (losses,)
        assert all(torch.isfinite(loss) for loss in losses)
        sum(losses).backward()
        grads = [p.grad for p in net.parameters() if p.grad is not None]
        assert grads and all(torch.isfinite(g).all() for g in grads)
    finally:
        net.zero_grad(set_to_none=True)
        net.eval()


@pytest.mark.parametrize("name,extra", CASES)
def test_training_loss_and_gradients_are_finite(built, name, extra):
    _, net, (train_data, _, _) = built(name, extra)
    assert_trains(net, next(iter(train_data)))
