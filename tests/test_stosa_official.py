"""STOSA's official-code options (docs/models.md, "What the official code does
differently"): the input layer, the FFN, the initialization and the held-out negatives leak
(``neg_exclude_heldout``). The model contract (causality, padding, trimming, shortcut) of
every option is checked in tests/test_model_contract.py."""

import json
import logging
import os

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from conftest import per_stream_name
from experiments.research import heldout_items, heldout_table, model_for
from recbole_attn.errors import ConfigError
from recbole_attn.plugin.stosa import FormsSTOSALayer, feed_forward
from recbole_attn.model.stosa import FeedForward, elu_plus_one
from recbole_attn.engine.quick_start import build, load_data_and_model, run
from recbole_attn.sequential.batching import training_targets

#: the paper's model (each option's other value); the yaml defaults are the official ones
PAPER = {
    "stosa_layer_means": "paper",
    "stosa_input": "paper",
    "stosa_ffn": "paper",
    "stosa_init": "recbole",
    "position_alignment": "first",
}
OFFICIAL = {
    "stosa_layer_means": "official",
    "stosa_input": "official",
    "stosa_ffn": "official",
    "stosa_init": "official",
    "position_alignment": "last",
}


def _build(tiny_config, **extra):
    """STOSA on the tiny fixture: the paper's model with ``extra`` options on top."""
    config = {**tiny_config, "hidden_dropout_prob": 0.0, **PAPER, **extra}
    # the leak of held-out negatives is the research wing's (experiments/research.py)
    _, net, _, data = build(model_for("STOSA", config), "tiny", config_dict=config)
    return net.eval(), data


def _n_params(net):
    return sum(p.numel() for p in net.parameters())


def test_official_input_one_shared_layer_norm(tiny_config):
    paper, _ = _build(tiny_config)
    official, _ = _build(tiny_config, stosa_input="official")
    d = paper.hidden_size
    assert hasattr(paper, "mean_layer_norm") and hasattr(paper, "cov_layer_norm")
    assert not hasattr(official, "mean_layer_norm")
    assert isinstance(official.input_layer_norm, nn.LayerNorm)
    # one LayerNorm (weight + bias) less
    assert _n_params(paper) - _n_params(official) == 2 * d


def test_official_input_streams(tiny_config):
    """Mean input ELU(LN(E+P)), covariance input ELU(LN(E+P)) + 1 (eval: no dropout),
    read at the output through the legacy bug (mean) and with no layer (both)."""
    net, _ = _build(tiny_config, stosa_input="official", n_layers=0)
    seq = torch.tensor([[3, 5, 7, 0, 0]])
    lengths = torch.tensor([3])
    with torch.no_grad():
        mean, cov = net.encode(seq, lengths)
        ln = net.input_layer_norm
        pos = net.position_ids(lengths, seq.size(1))
        want_mean = F.elu(
            ln(net.mean_item_embedding(seq) + net.mean_position_embedding(pos))
        )
        want_cov = elu_plus_one(
            ln(net.cov_item_embedding(seq) + net.cov_position_embedding(pos))
        )
    torch.testing.assert_close(mean, want_mean)
    torch.testing.assert_close(cov, want_cov)
    assert (cov > 0).all()


def test_official_ffn_is_post_ln():
    torch.manual_seed(0)
    ffn = FeedForward(8, 32, 0.0, 1e-12).eval()
    x = torch.randn(2, 3, 8)
    out = ffn(x)
    want = ffn.LayerNorm(x + ffn.dense_2(F.elu(ffn.dense_1(x))))
    torch.testing.assert_close(out, want)
    # the paper's pre-LN form (the plugin's) differs on the same weights
    paper = feed_forward(ffn, x, pre_ln=True)
    torch.testing.assert_close(
        paper, x + ffn.dense_2(F.elu(ffn.dense_1(ffn.LayerNorm(x))))
    )
    assert not torch.allclose(paper, out)


def test_stosa_ffn_option_builds_post_ln(tiny_config):
    paper, _ = _build(tiny_config)
    official, _ = _build(tiny_config, stosa_ffn="official")
    for layer in paper.trm_encoder.layer:
        assert isinstance(layer, FormsSTOSALayer) and layer.pre_ln
        for ffn in (layer.feed_forward_mean, layer.feed_forward):
            assert type(ffn) is FeedForward
    for layer in official.trm_encoder.layer:
        assert not layer.pre_ln


def test_official_init_mean_and_padding_rows(tiny_config):
    recbole, _ = _build(tiny_config)
    official, _ = _build(tiny_config, stosa_init="official")
    for table in ("mean_item_embedding", "cov_item_embedding"):
        assert getattr(recbole, table).weight[0].abs().sum() == 0
        assert getattr(official, table).weight[0].abs().sum() == 0
    # the initializer on a large table: mean 0.01 (official) vs 0, std initializer_range
    torch.manual_seed(0)
    for net, want in ((official, 0.01), (recbole, 0.0)):
        big = nn.Embedding(20000, 64, padding_idx=0)
        linear = nn.Linear(512, 512)
        net._init_weights(big)
        net._init_weights(linear)
        for weight in (big.weight, linear.weight):
            assert weight.mean().item() == pytest.approx(want, abs=5e-4)
            assert weight.std().item() == pytest.approx(net.initializer_range, rel=0.02)
        assert linear.bias.abs().sum() == 0
        assert big.weight[0].abs().sum() == 0


def test_renamed_key_is_a_clear_error(tiny_config):
    with pytest.raises(ConfigError, match="stosa_layer_means: official"):
        _build(tiny_config, stosa_legacy_mean_bug=True)


def test_invalid_option_values(tiny_config):
    for key in ("stosa_layer_means", "stosa_input", "stosa_ffn", "stosa_init"):
        with pytest.raises(ConfigError, match=key):
            _build(tiny_config, **{key: "bogus"})


def test_heldout_table():
    uid = torch.tensor([3, 1, 3, 1, 0])
    items = torch.tensor([30, 10, 31, 11, 5])
    table = heldout_table(5, uid, items)
    want = torch.tensor([[5, 0], [10, 11], [0, 0], [30, 31], [0, 0]])
    torch.testing.assert_close(table, want)
    assert heldout_table(2, uid[:0], items[:0]).shape == (2, 1)


def test_only_the_research_dataset_records_heldout_items(tiny_config):
    """The product's training split knows nothing of the held-out items, and the product
    refuses the leak; the research class's dataset records every held-out item."""
    _, _, _, (train, _, _) = build("STOSA", "tiny", config_dict=tiny_config)
    assert heldout_items(train._dataset) is None
    config = {**tiny_config, **PAPER, "neg_exclude_heldout": True}
    with pytest.raises(ConfigError, match="research-only option .*experiments.runner"):
        build("STOSA", "tiny", config_dict=config)
    _, (train, valid, test) = _build(tiny_config, neg_exclude_heldout=True)
    table = heldout_items(train._dataset)
    for split in (valid, test):
        feat = split._dataset.inter_feat
        uid, item = feat[split._dataset.uid_field], feat[split._dataset.iid_field]
        assert len(uid) > 0
        for u, i in zip(uid.tolist(), item.tolist()):
            assert i in table[u].tolist()


def _negatives(net, batch, draws, seed):
    item_seq = batch[net.ITEM_SEQ]
    targets, _ = training_targets(
        item_seq, batch[net.ITEM_SEQ_LEN], batch[net.POS_ITEM_ID], net.training_mode
    )
    torch.manual_seed(seed)
    users = batch[net.USER_ID]
    return users, torch.cat(
        [net.sample_negatives(item_seq, targets, users) for _ in range(draws)], dim=2
    ).flatten(1)


def test_heldout_negatives_leak(tiny_config):
    """With neg_exclude_heldout the user's validation and test items are never drawn as
    negatives; without it they are, sometimes (same seed, same batch)."""
    leak, (train, _, _) = _build(tiny_config, neg_exclude_heldout=True)
    plain, _ = _build(tiny_config)
    batch = next(iter(train))
    hits = {}
    for name, net in (("leak", leak), ("plain", plain)):
        users, neg = _negatives(net, batch, draws=40, seed=7)
        held = leak.heldout_items[users]  # [B, W]
        is_held = (neg.unsqueeze(-1) == held.unsqueeze(1)) & (held.unsqueeze(1) > 0)
        hits[name] = int(is_held.any(-1).sum())
        # the training sequence is excluded in both
        seen = (neg.unsqueeze(-1) == batch[net.ITEM_SEQ].unsqueeze(1)).any(-1)
        assert not seen.any()
    assert hits["leak"] == 0
    assert hits["plain"] > 0


def test_heldout_negatives_need_user_ids(tiny_config):
    net, (train, _, _) = _build(tiny_config, neg_exclude_heldout=True)
    batch = next(iter(train))
    seq = batch[net.ITEM_SEQ]
    with pytest.raises(ConfigError, match="user id"):
        net.sample_negatives(seq, seq)


def test_the_preset_sets_the_four_forms(tiny_config):
    """stosa_preset names the four forms; a single form alone is the research wing's
    (the product refuses it), where it wins over the preset."""
    forms = ("layer_means", "input", "ffn", "init")
    for preset, values in (("official", OFFICIAL), ("paper", PAPER)):
        _, net, _, _ = build(
            "STOSA", "tiny", config_dict={**tiny_config, "stosa_preset": preset}
        )
        want = {f: values[f"stosa_{f}"] for f in forms}
        # the value covariances are an option of their own, which no preset sets
        assert net.forms == {**want, "value_cov": "official"}, preset
    mixed = {"stosa_preset": "paper", "stosa_input": "official"}
    with pytest.raises(ConfigError, match="stosa_input is a research-only option"):
        build("STOSA", "tiny", config_dict={**tiny_config, **mixed})
    # the preset's own value is accepted (configurations of the previous release)
    build("STOSA", "tiny", config_dict={**tiny_config, "stosa_input": "official"})
    net, _ = _build(tiny_config, **mixed)
    assert net.forms["input"] == "official" and net.forms["layer_means"] == "paper"
    with pytest.raises(ConfigError, match="stosa_preset must be one of"):
        build("STOSA", "tiny", config_dict={**tiny_config, "stosa_preset": "both"})


def _mean_sublayers(net):
    return [
        k
        for k in net.state_dict()
        if "_mean." in k and ".query_mean." not in k and ".key_mean." not in k
    ]


def test_official_layer_means_build_no_dead_sublayers(tiny_config):
    """The official layers pass their input mean through: no mean value projection,
    output projection, LayerNorm or FFN (they would get no gradient), only the mean query
    and key projections that shape the attention weights."""
    paper, _ = _build(tiny_config)
    official, _ = _build(tiny_config, stosa_layer_means="official")
    d, inner, layers = paper.hidden_size, paper.inner_size, paper.n_layers
    assert _mean_sublayers(official) == []
    keys = official.state_dict()
    assert any(".query_mean." in k for k in keys) and any(
        ".key_mean." in k for k in keys
    )
    dead = layers * (
        2 * (d * d + d) + 2 * d + (d * inner + inner + inner * d + d) + 2 * d
    )
    assert _n_params(paper) - _n_params(official) == dead
    # every parameter of the official model gets a gradient
    seq = torch.tensor([[3, 5, 7, 2], [4, 6, 0, 0]])
    official.train()
    loss = official.calculate_loss(
        {
            official.ITEM_SEQ: seq,
            official.ITEM_SEQ_LEN: torch.tensor([4, 2]),
            official.POS_ITEM_ID: torch.tensor([8, 9]),
            official.USER_ID: torch.tensor([1, 2]),
        }
    )
    sum(loss).backward()
    no_grad = [n for n, p in official.named_parameters() if p.grad is None]
    assert no_grad == []


def test_a_checkpoint_with_the_dead_sublayers_loads(tiny_config):
    """recbole_attn 0.1 built the dead mean sublayers into its checkpoints: they load,
    the dead entries dropped."""
    paper, _ = _build(tiny_config)
    official, _ = _build(tiny_config, stosa_layer_means="official")
    old = dict(official.state_dict())
    for key, value in paper.state_dict().items():
        if key in _mean_sublayers(paper):
            old[key] = value
    assert len(old) > len(official.state_dict())
    official.load_state_dict(old)  # strict
    with pytest.raises(RuntimeError, match="Unexpected"):
        official.load_state_dict({**old, "trm_encoder.layer.0.bogus": torch.zeros(1)})


@pytest.mark.parametrize("layer_means", ["official", "paper"])
def test_a_checkpoint_with_the_per_stream_names_loads(tiny_config, layer_means):
    """Releases before the two-files layout (issue 74) named the layers' modules by
    stream (``query.mean``, ``value.cov``, ``feed_forward.cov``): such a checkpoint
    loads strictly, as the same weights, into today's names."""
    net, _ = _build(tiny_config, stosa_layer_means=layer_means)
    state = net.state_dict()
    old = {per_stream_name(k): v.clone() + 0.5 for k, v in state.items()}
    assert any(".value.cov." in k for k in old)
    assert all(k not in state for k in old if "trm_encoder" in k)
    net.load_state_dict(old)  # strict
    for key, value in net.state_dict().items():
        torch.testing.assert_close(value, old[per_stream_name(key)])


def test_a_checkpoint_from_before_the_value_cov_option_loads_its_linear_form(
    tiny_config,
):
    """A checkpoint written before ``stosa_value_cov`` existed records no value of it:
    it trained the linear value covariances and loads with them (the default is the
    reference code's since); a recorded value loads as recorded. AWRSR on STOSA too."""
    for model, extra in (("STOSA", {}), ("AWRSR", {"backbone": "STOSA"})):
        config = {**tiny_config, "epochs": 1, **extra}
        path = run(model, "tiny", config_dict=config)["saved_model_file"]
        logging.getLogger().handlers.clear()

        def value_cov(path):
            net = load_data_and_model(path)[1]
            return (net.backbone if model == "AWRSR" else net).forms["value_cov"]

        assert value_cov(path) == "official"
        checkpoint = torch.load(path, weights_only=True)
        options = json.loads(checkpoint["external_config_json"])
        assert options.pop("stosa_value_cov") == "official"  # the yaml's, recorded
        checkpoint["external_config_json"] = json.dumps(options)
        old = os.path.join(os.path.dirname(path), f"old-{model}.pth")
        torch.save(checkpoint, old)
        assert value_cov(old) == "paper", model
