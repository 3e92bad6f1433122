"""Attention heatmaps of a saved model for one user (recbole_attn.commands.viz)."""

import os
import struct

import pytest
import torch

from recbole_attn.errors import RecboleAttnError
from recbole_attn.engine.quick_start import load_data_and_model, run

pytest.importorskip("matplotlib")

from recbole_attn.cli import main as cli_main  # noqa: E402
from recbole_attn.commands.viz import attention_maps, plot_attention  # noqa: E402


def main(argv):
    """``recbole-attn viz`` in-process."""
    return cli_main(["viz", *argv])


def _png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


def _trained(tiny_config, model, **extra):
    config = {**tiny_config, "epochs": 1, **extra}
    return run(model, "tiny", config_dict=config)["saved_model_file"]


@pytest.mark.parametrize(
    "model, extra, refined",
    [
        ("STOSA", {}, False),
        ("SASRecAP", {}, False),
        ("AWRSR", {"refinement": "simp"}, True),
        ("SASRec", {"training_mode": "last_position"}, False),  # RecBole's own
    ],
)
def test_heatmaps_are_the_models_attention(
    tiny_config, tmp_path, model, extra, refined
):
    path = _trained(tiny_config, model, **extra)
    maps = attention_maps(path, "u3", positions=5)
    assert maps["labels"][0].startswith("i") and len(maps["labels"]) == 5
    assert set(maps["maps"]) == ({"A", "B"} if refined else {"A"})
    layers = maps["maps"]["A"]
    assert len(layers) == tiny_config["n_layers"]
    for name, per_layer in maps["maps"].items():
        for matrix in per_layer:
            assert matrix.shape == (tiny_config["n_heads"], 5, 5)
            # causal: nothing above the diagonal (keys after the query)
            assert (torch.from_numpy(matrix).triu(1) == 0).all()
    if model != "SASRec":  # the same matrices attention_weights returns
        _, net, _, (_, _, test_data) = load_data_and_model(path)
        net.eval()
        dataset = test_data._dataset
        uid = dataset.token2id(dataset.uid_field, "u3")
        row = dataset.inter_feat[dataset.inter_feat[dataset.uid_field] == uid]
        n = int(row[net.ITEM_SEQ_LEN][0])
        expected = net.attention_weights(row)[0][0, :, n - 5 : n, n - 5 : n]
        got = maps["maps"]["B" if refined else "A"][0]
        assert torch.allclose(torch.from_numpy(got), expected.cpu())
    files = plot_attention(path, "u3", str(tmp_path / "png"), positions=5)
    assert len(files) == tiny_config["n_layers"] * tiny_config["n_heads"]
    width, height = _png_size(files[0])
    assert width > 100 and height > 100
    if refined:  # A and B side by side
        assert width > 1.5 * height


def test_unknown_user_and_missing_matplotlib(
    tiny_config, tmp_path, monkeypatch, capsys
):
    path = _trained(tiny_config, "SASRecAP")
    assert main(["--model_file", path, "--user", "nobody"]) == 2
    assert "user 'nobody' is not in the dataset" in capsys.readouterr().err
    # a folder of checkpoints, as the other commands take it (before: "not found")
    assert main(["--model_file", os.path.dirname(path), "--user", "nobody"]) == 2
    err = capsys.readouterr().err
    assert "(the newest of " in err and "user 'nobody' is not in the dataset" in err
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(RecboleAttnError, match=r"uv pip install -e \"\.\[plot\]\""):
        plot_attention(path, "u3", str(tmp_path / "png"))
    assert not os.path.exists(tmp_path / "png")


def test_heatmaps_are_published_together_after_a_stop(
    tiny_config, tmp_path, monkeypatch
):
    """A run stopped while drawing left the heatmaps drawn so far, and the rerun then
    refused them without --overwrite: now none is written until all are drawn."""
    from recbole_attn.commands import viz

    path = _trained(tiny_config, "SASRecAP")
    output = tmp_path / "png"
    real, drawn = viz._draw, []

    def stopped_at_the_second(*args):
        if drawn:
            raise KeyboardInterrupt
        drawn.append(real(*args))
        return drawn[-1]

    monkeypatch.setattr(viz, "_draw", stopped_at_the_second)
    with pytest.raises(KeyboardInterrupt):
        plot_attention(path, "u3", str(output), positions=5)
    assert not output.exists() or os.listdir(output) == []
    monkeypatch.setattr(viz, "_draw", real)
    files = plot_attention(path, "u3", str(output), positions=5)  # no --overwrite
    assert sorted(os.listdir(output)) == sorted(os.path.basename(f) for f in files)
    assert all(_png_size(f)[0] > 100 for f in files)
