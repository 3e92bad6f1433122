"""Golden outputs: every model gives the numbers it gave before the attention refactor.

``tests/data/golden_v0.pt`` was recorded with the code of commit 0a26ecf (before the one
shared attention module existed), in float64, for a fixture batch of the ``tiny`` dataset
(lengths T, 9, 5, 3 and 1, one repeated item). Weights are not stored: every parameter and
buffer is filled by :func:`golden_value` from its name in that code, so the test needs only
the map from today's parameter names to the old ones (:func:`old_name`).
"""

import logging
import os
import re
import zlib

import pytest
import torch

from conftest import per_stream_name
from experiments import research
from recbole_attn.engine.quick_start import build

GOLDEN = os.path.join(os.path.dirname(__file__), "data", "golden_v0.pt")


def golden_value(name, shape):
    """Deterministic weights from a parameter's (pre-refactor) name."""
    g = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    value = 0.2 * torch.randn(shape, generator=g, dtype=torch.float64)
    if "norm" in name.lower() and name.endswith("weight"):
        value = value + 1.0
    return value


#: today's name -> the pre-refactor one (first matching pattern; SASRecAP kept RecBole's)
RENAMES = {
    "STOSA": [
        (
            r"trm_encoder\.layer\.(\d+)\.multi_head_attention\.(query|key|value)\.(mean|cov)\.",
            r"encoder.layers.\1.attention.\3_proj.\2.",
        ),
        (
            r"trm_encoder\.layer\.(\d+)\.multi_head_attention\.dense\.(mean|cov)\.",
            r"encoder.layers.\1.attention.\2_proj.out.",
        ),
        (
            r"trm_encoder\.layer\.(\d+)\.multi_head_attention\.LayerNorm\.(mean|cov)\.",
            r"encoder.layers.\1.attention.\2_norm.",
        ),
        (
            r"trm_encoder\.layer\.(\d+)\.feed_forward\.(mean|cov)\.dense_1\.",
            r"encoder.layers.\1.feed_forward.\2_ffn.0.",
        ),
        (
            r"trm_encoder\.layer\.(\d+)\.feed_forward\.(mean|cov)\.dense_2\.",
            r"encoder.layers.\1.feed_forward.\2_ffn.2.",
        ),
        (
            r"trm_encoder\.layer\.(\d+)\.feed_forward\.(mean|cov)\.LayerNorm\.",
            r"encoder.layers.\1.feed_forward.\2_norm.",
        ),
    ],
    "PAtt": [
        (
            r"trm_encoder\.layer\.(\d+)\.multi_head_attention\.query\.",
            r"layers.\1.attention.sampler.",
        ),
        (
            r"trm_encoder\.layer\.(\d+)\.multi_head_attention\.dense\.",
            r"layers.\1.dense.",
        ),
        (
            r"trm_encoder\.layer\.(\d+)\.multi_head_attention\.LayerNorm\.",
            r"layers.\1.layer_norm.",
        ),
        (r"trm_encoder\.layer\.(\d+)\.feed_forward\.", r"layers.\1.feed_forward."),
    ],
}
RENAMES["DPAtt"] = RENAMES["PAtt"]


def old_name(model, name):
    """The pre-refactor name of today's parameter ``name`` of ``model``."""
    if model == "STOSA":
        name = per_stream_name(name)
    for pattern, old in RENAMES.get(model, []):
        if re.match(pattern, name):
            return re.sub(pattern, old, name)
    return name


#: options whose defaults changed after the recording: the values it was recorded with
RECORDED_DEFAULTS = {
    "STOSA": {
        "stosa_layer_means": "paper",
        "stosa_input": "paper",
        "stosa_ffn": "paper",
        "stosa_init": "recbole",
        "position_alignment": "first",
        "stosa_value_cov": "paper",  # the default until 2026-12-02 (issue 73)
    },
    # PAtt's mechanism before its defaults followed the official code (issue 33)
    "PAtt": {
        "dpp_lambda": 64.0,
        "dpp_diagonal": "one",
        "dpp_sampler": "linear",
        "position_alignment": "first",
    },
}
RECORDED_DEFAULTS["DPAtt"] = RECORDED_DEFAULTS["PAtt"]
#: renamed options in the recorded ``extra``: old (key, value) -> new
RENAMED = {("stosa_legacy_mean_bug", True): ("stosa_layer_means", "official")}


def recorded_config(model, extra):
    """The options a variant was recorded with, in today's names."""
    config = dict(RECORDED_DEFAULTS.get(model, {}))
    for key, value in extra.items():
        config.update([RENAMED.get((key, value), (key, value))])
    return config


#: the mean-stream sublayers of the official layer means (``stosa_layer_means:
#: official``): the recording built them, computed them and dropped their output; since
#: STOSA's official preset builds no dead sublayers, they are absent (the outputs below
#: are the recorded ones all the same)
UNBUILT = re.compile(
    r"encoder\.layers\.\d+\.(attention\.mean_(norm|proj\.(value|out))|"
    r"feed_forward\.mean_(ffn|norm))\."
)


def recorded_names(record, config):
    """The recorded parameter names today's model of ``config`` builds."""
    if config.get("stosa_layer_means") != "official":
        return record["names"]
    return [name for name in record["names"] if not UNBUILT.match(name)]


def _golden():
    return torch.load(GOLDEN, weights_only=True)


@pytest.mark.parametrize("variant", sorted(_golden()["variants"]))
def test_outputs_unchanged(variant, tiny_data_path, tiny_config):
    golden = _golden()
    record = golden["variants"][variant]
    config = {**golden["config"], **recorded_config(record["model"], record["extra"])}
    config.update(
        data_path=tiny_data_path, checkpoint_dir=tiny_config["checkpoint_dir"]
    )
    model = research.model_for(record["model"], config)
    _, net, _, _ = build(model, "tiny", config_dict=config)
    logging.getLogger().handlers.clear()
    net = net.double().eval()
    state = net.state_dict()
    assert sorted(old_name(record["model"], k) for k in state) == sorted(
        recorded_names(record, config)
    )
    with torch.no_grad():
        for key, tensor in state.items():
            tensor.copy_(golden_value(old_name(record["model"], key), tensor.shape))
        seq, lengths = record["item_seq"], record["item_seq_len"]
        encoded = net.encode(seq, lengths)
        encoded = encoded if isinstance(encoded, tuple) else (encoded,)
        valid = torch.arange(seq.size(1)).unsqueeze(0) < lengths.unsqueeze(1)
        for got, want in zip(encoded, record["encoded"], strict=True):
            torch.testing.assert_close(got[valid], want, rtol=1e-9, atol=1e-10)
        scores = net.full_sort_predict({net.ITEM_SEQ: seq, net.ITEM_SEQ_LEN: lengths})
    torch.testing.assert_close(scores, record["scores"], rtol=1e-9, atol=1e-10)
