"""The model files of ``recbole_attn.model`` as RecBole would merge them (issue 64): one
model each, nothing of another model's or of the plugin's forms, every option checked
in ``__init__`` as RecBole's ``sasrec.py`` checks ``loss_type``; DPAtt's pre-stage runs
once, before the first training step, never when a trained model is loaded."""

import copy
import inspect
import logging
import re

import pytest
import torch

from recbole_attn.model import awrsr, dpatt, parec, patt, rksa, stosa
from recbole_attn.engine.quick_start import build

CAT_COLS = {
    "inter": ["user_id", "item_id", "timestamp"],
    "item": ["item_id", "categories"],
}
FAST_DPATT = {"dpp_cat_steps": 5, "dpp_cat_rank": 4, "load_col": CAT_COLS}


def _source(module):
    return inspect.getsource(module)


def test_stosa_holds_nothing_of_awrsr_or_of_the_paper_preset():
    text = _source(stosa)
    for name in ("refine", "AWRSR", "make_refiner", "stosa_preset", "PRESETS"):
        assert name not in text, name
    assert "pre_ln" not in text and "mean_layer_norm" not in text


def test_patt_holds_nothing_of_dpatts_categories():
    text = _source(patt)
    for name in ("category", "DPAtt", "jitter", "dpp_cat", "pair_minors"):
        assert name not in text, name


def test_research_forms_are_not_in_the_model_files():
    assert "product" not in _source(dpatt)
    assert "dpp_diversity_form" not in _source(dpatt)
    for name in ("positional_pattern", "fixed_pattern", "pattern_decay"):
        assert name not in _source(parec), name
    for name in ("rbf", "RBF", "tanh", "item_kernel=", "location_activation"):
        assert name not in _source(rksa), name


def _built(tiny_config, name, extra=()):
    config = {**tiny_config, **dict(extra)}
    out = build(name, "tiny", config_dict=config)
    logging.getLogger().handlers.clear()
    return out


#: model file class -> (plugin model, options, the loss types the file accepts)
FILES = {
    "STOSA": (stosa.STOSA, {}, ("BPR", "CE")),
    "PAtt": (patt.PAtt, {}, ("BCE", "CE")),
    "DPAtt": (dpatt.DPAtt, FAST_DPATT, ("BCE", "CE")),
    "PARec": (parec.PARec, {}, ("BPR", "CE")),
    "RKSA": (rksa.RKSA, {}, ("BCE", "CE")),
    "AWRSR": (awrsr.AWRSR, {}, ("BPR", "CE")),
}


@pytest.mark.parametrize("name", sorted(FILES))
def test_init_refuses_an_unknown_loss_type_and_position_alignment(tiny_config, name):
    """RecBole builds the model file without our checks: ``__init__`` refuses what
    ``calculate_loss`` could not train and a position alignment it does not know
    (before: any alignment but ``first`` acted as ``last``, SSM reached the first
    batch)."""
    model_class, extra, losses = FILES[name]
    config, _, _, (train, _, _) = _built(tiny_config, name, extra)
    for loss in ("SSM", "BCE" if "BCE" not in losses else "BPR"):
        changed = copy.deepcopy(config)
        changed["loss_type"] = loss
        message = re.escape(f"Make sure 'loss_type' in {list(losses)}!")
        with pytest.raises(NotImplementedError, match=message):
            model_class(changed, train.dataset)
    changed = copy.deepcopy(config)
    changed["position_alignment"] = "right"
    with pytest.raises(ValueError, match="position_alignment"):
        model_class(changed, train.dataset)


def test_the_plugin_trains_losses_the_model_file_refuses(tiny_config):
    _, net, _, _ = _built(tiny_config, "STOSA", {"loss_type": "SSM"})
    assert net.loss_type == "SSM"
    _, net, _, _ = _built(
        tiny_config,
        "AWRSR",
        {"backbone": "STOSA", "refinement": "simp", "loss_type": "BCE"},
    )
    assert net.loss_type == "BCE" and net.backbone.loss_type == "BCE"


def test_dpatt_learns_c_once_before_training_and_not_on_load(tiny_config, monkeypatch):
    """C is learned at the first training step, not in ``__init__``; a model loaded from
    a state dict keeps the loaded C and never runs the pre-stage (before: every build,
    a checkpoint's load included, ran its Adam steps)."""
    calls = []
    learn = dpatt.learn_category_kernel

    def counted(*args, **kwargs):
        calls.append(1)
        return learn(*args, **kwargs)

    monkeypatch.setattr(dpatt, "learn_category_kernel", counted)
    config, net, _, (train, _, _) = _built(tiny_config, "DPAtt", FAST_DPATT)
    assert calls == [] and net.category_vectors.abs().sum() == 0
    batch = next(iter(train))
    # an unfitted C (zeros) loaded into another model leaves its pre-stage to come
    fresh = type(net)(config, train.dataset)
    fresh.load_state_dict(net.state_dict())
    assert fresh.category_data is not None
    net.train()
    net.calculate_loss(batch)
    net.calculate_loss(batch)
    assert calls == [1] and net.category_vectors.abs().sum() > 0
    state = net.state_dict()

    config = copy.deepcopy(config)
    config["loss_type"] = "CE"  # RecBole's loss without its sampler's negatives
    loaded = dpatt.DPAtt(config, train.dataset)
    loaded.load_state_dict(state, strict=False)
    loaded.train()
    loaded.calculate_loss(batch)
    assert calls == [1]
    torch.testing.assert_close(loaded.category_vectors, state["category_vectors"])
