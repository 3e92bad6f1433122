"""The shared architecture: RecBole SASRec checkpoints load into SASRecAP, position
alignment, training histories, auxiliary losses, yaml inheritance and config values."""

import logging

import pytest
import torch

from conftest import raw_sequences
from recbole_attn.data.histories import training_histories
from types import SimpleNamespace

from recbole_attn.model.stosa import STOSA
from recbole_attn.plugin import DPAtt, PAtt
from recbole_attn.engine.config import config_files
from recbole_attn.engine.quick_start import build
from recbole_attn.sequential.length_groups import AuxLoss


def position_ids(lengths, length, max_length, alignment):
    """A model file's position ids (every model file computes them alike)."""
    model = SimpleNamespace(position_alignment=alignment, max_seq_length=max_length)
    return STOSA.position_ids(model, lengths, length)


def _build(model, config):
    out = build(model, "tiny", config_dict=config)
    logging.getLogger().handlers.clear()
    return out


def test_recbole_sasrec_state_dict_loads_into_sasrec_ap(tiny_config):
    """Same parameter names and shapes as RecBole's SASRec, same scores (float64)."""
    from recbole.model.sequential_recommender.sasrec import SASRec

    config = {**tiny_config, "n_layers": 2, "n_heads": 2, "loss_type": "CE"}
    config.update(training_mode="last_position")
    cfg, theirs, _, (train, _, _) = _build(SASRec, config)
    _, ours, _, _ = _build("SASRecAP", config)
    with torch.no_grad():
        for p in theirs.parameters():  # away from the shared initialization
            p.add_(0.3 * torch.randn_like(p))
    state = theirs.state_dict()
    assert set(state) == set(ours.state_dict())
    ours.load_state_dict(state)
    theirs, ours = theirs.double().eval(), ours.double().eval()
    batch = next(iter(train))
    with torch.no_grad():
        want = theirs.full_sort_predict(batch)
        got = ours.full_sort_predict(batch)
        batch[ours.ITEM_ID] = batch[ours.POS_ITEM_ID]
        torch.testing.assert_close(
            ours.predict(batch), theirs.predict(batch), rtol=1e-10, atol=1e-10
        )
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("n_layers", [0, 1, 2])
@pytest.mark.parametrize("alignment", ["first", "last"])
def test_sasrec_ap_last_row_forward_is_the_last_row_of_encode(
    tiny_config, n_layers, alignment
):
    """forward computes its last layer for the last query row alone: the same outputs
    and gradients as gathering that row from the full encode (float64, training mode
    without dropout, RecBole's layers as the reference)."""
    config = {**tiny_config, "n_layers": n_layers, "position_alignment": alignment}
    config.update(hidden_dropout_prob=0.0, attn_dropout_prob=0.0)
    _, net, _, (train, _, _) = _build("SASRecAP", config)
    net = net.double().train()
    seq = torch.tensor([[3, 5, 7, 2, 0, 0], [4, 0, 0, 0, 0, 0], [1, 2, 3, 4, 5, 6]])
    lengths = torch.tensor([4, 1, 6])
    weights = torch.randn(3, net.hidden_size, dtype=torch.float64)
    outputs, grads = [], []
    for full in (True, False):
        net.zero_grad()
        if full:
            out = net.gather_indexes(net.encode(seq, lengths), lengths - 1)
        else:
            out = net(seq, lengths)
        (out * weights).sum().backward()
        outputs.append(out.detach())
        grads.append([p.grad.clone() for p in net.parameters() if p.grad is not None])
    torch.testing.assert_close(outputs[1], outputs[0], rtol=1e-12, atol=1e-12)
    assert len(grads[0]) == len(grads[1]) > 0
    for got, want in zip(grads[1], grads[0]):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


def test_position_ids_under_both_alignments():
    lengths = torch.tensor([3, 1, 4])
    first = position_ids(lengths, 4, 10, "first")
    last = position_ids(lengths, 4, 10, "last")
    assert first.tolist() == [[0, 1, 2, 3]] * 3
    # the most recent item is always at T - 1 = 9; padding clamped to 9
    assert last.tolist() == [[7, 8, 9, 9], [9, 9, 9, 9], [6, 7, 8, 9]]
    # trimming: the same history gets the same ids whatever the batch length
    assert position_ids(lengths, 8, 10, "last")[:, :4][lengths > 0].tolist() == (
        last.tolist()
    )


@pytest.mark.parametrize("mode", ["all_position", "last_position"])
@pytest.mark.parametrize("max_len", [12, 4])
def test_training_histories_hold_every_training_item_and_nothing_held_out(
    tiny_config, tiny_data_path, mode, max_len
):
    """One chronological sequence per user = all interactions but the validation and
    test ones (leave-one-out), whatever the training mode and MAX_ITEM_LIST_LENGTH."""
    config = {**tiny_config, "training_mode": mode, "MAX_ITEM_LIST_LENGTH": max_len}
    _, _, _, (train, _, _) = _build("SASRecAP", config)
    dataset = train.dataset
    histories = training_histories(dataset)
    raw = raw_sequences(tiny_data_path)
    assert len(histories.users) == len(raw)
    for i, uid in enumerate(histories.users.tolist()):
        user = dataset.id2token(dataset.uid_field, uid)
        items = histories.items[histories.offsets[i] : histories.offsets[i + 1]]
        tokens = list(dataset.id2token(dataset.iid_field, items.numpy()))
        assert tokens == raw[user][:-2], user
    padded, lengths = histories.padded(max_len)
    assert padded.size(1) == max_len and (lengths <= max_len).all()
    row = padded[0, : lengths[0]]
    want = histories.items[: histories.offsets[1]][-max_len:]
    assert row.tolist() == want.tolist()


def test_models_add_sequence_level_loss_terms(tiny_config, monkeypatch):
    """A model's auxiliary loss term (a mean and the number of terms it averages, RKSA's
    listwise loss) comes after the position losses in calculate_loss."""
    _, net, _, (train, _, _) = _build("SASRecAP", tiny_config)
    batch = next(iter(train))
    plain = net.calculate_loss(batch)
    monkeypatch.setattr(net, "aux_terms", lambda: [AuxLoss(torch.tensor(1.5), 3)])
    losses = net.calculate_loss(batch)
    assert isinstance(losses, tuple) and len(losses) == 2
    assert losses[1].item() == 1.5 and torch.isfinite(plain)


def test_yaml_of_base_classes_first():
    files = [f.rsplit("/", 2)[-2:] for f in config_files(DPAtt, "tiny")]
    assert files[:3] == [
        ["properties", "overall.yaml"],
        ["model", "PAtt.yaml"],
        ["model", "DPAtt.yaml"],
    ]
    assert ["model", "DPAtt.yaml"] not in [
        f.rsplit("/", 2)[-2:] for f in config_files(PAtt, "tiny")
    ]


def test_zero_is_a_value_not_a_default(tiny_config):
    config = {**tiny_config, "dpp_cat_jitter": 0.0, "dpp_cat_steps": 1}
    config["load_col"] = {
        "inter": ["user_id", "item_id", "timestamp"],
        "item": ["item_id", "categories"],
    }
    _, net, _, _ = _build("DPAtt", config)
    assert net.dpp_cat_jitter == 0.0


def test_string_overrides_are_literals_not_evaluated():
    """RecBole 1.2.1 eval()ed overrides inside a function with locals named key, param
    and value; ours reads Python literals and true/false only."""
    from recbole_attn.options.values import convert_value

    assert convert_value("value") == "value" and convert_value("key") == "key"
    assert convert_value("[5, 10]") == [5, 10] and convert_value("1e-3") == 0.001
    assert convert_value("true") is True and convert_value("False") is False
    assert convert_value("None") is None and convert_value("BPR") == "BPR"
    assert convert_value("__import__('os')") == "__import__('os')"
