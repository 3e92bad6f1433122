"""The option is the unit (``recbole_attn.options.declared``): one declaration per option gives the
model's attribute, its check, the shipped yaml, the docs table and the upstream yaml; the
research-only options are refused by the commands and trained by the research runner."""

import ast
import glob
import os

import pytest
import yaml

from experiments import research
from experiments.research import research_options
from recbole_attn.options.declared import Number
from recbole_attn.plugin import MODELS, STOSA
from recbole_attn.options.declared import (
    Opt,
    declared_options,
    docs_table,
    model_yaml,
)
from recbole_attn.upstream.docs import generated_files

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_shipped_files_are_the_generated_ones():
    """properties/model/*.yaml, overall.yaml's block and docs/models.md's option tables
    are what the declarations give (after a change: python -m recbole_attn.upstream.docs).
    """
    for path, text in generated_files(ROOT).items():
        with open(path, encoding="utf-8") as f:
            assert f.read() == text, (
                f"{os.path.relpath(path, ROOT)} differs from the declarations; run "
                "python -m recbole_attn.upstream.docs"
            )


def test_rewriting_the_generated_files_is_whole_or_not_at_all(tmp_path, monkeypatch):
    """``python -m recbole_attn.upstream.docs`` publishes each rewrite atomically: a stop
    before the new text is in place leaves the old file as it was, and no temporary."""
    from recbole_attn.upstream import docs

    target = tmp_path / "models.md"
    target.write_text("old text\n", encoding="utf-8")
    monkeypatch.setattr(docs, "generated_files", lambda root: {str(target): "new\n"})

    def stopped(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", stopped)
    with pytest.raises(KeyboardInterrupt):
        docs.main([])
    assert target.read_text(encoding="utf-8") == "old text\n"
    assert os.listdir(tmp_path) == ["models.md"]
    monkeypatch.undo()
    monkeypatch.setattr(docs, "generated_files", lambda root: {str(target): "new\n"})
    assert docs.main([]) == 0
    assert target.read_text(encoding="utf-8") == "new\n"


def test_a_default_changed_in_its_declaration_reaches_every_file(monkeypatch):
    """One line (the declaration) changes the yaml, the docs table and the upstream yaml."""
    from recbole_attn.upstream.sources import python_files
    from recbole_attn.upstream.yaml_files import model_yaml as upstream_yaml

    before = yaml.safe_load(model_yaml(STOSA))["pvn_weight"]
    assert before == 0.005
    options = dict(vars(STOSA)["options"])
    options["pvn_weight"] = Opt(0.0125, Number(), options["pvn_weight"].meaning)
    monkeypatch.setattr(STOSA, "options", options)
    assert yaml.safe_load(model_yaml(STOSA))["pvn_weight"] == 0.0125
    assert "| `pvn_weight` | `0.0125` |" in docs_table(STOSA)
    generated = generated_files(ROOT)
    assert (
        "pvn_weight: 0.0125"
        in generated[os.path.join(ROOT, "properties", "model", "STOSA.yaml")]
    )
    assert (
        "| `pvn_weight` | `0.0125` |"
        in generated[os.path.join(ROOT, "docs", "models.md")]
    )
    upstream = yaml.safe_load(upstream_yaml("STOSA", python_files()))
    assert upstream["pvn_weight"] == 0.0125


def _config_keys_read(tree):
    """The keys of every ``config["key"]`` a model file reads."""
    return {
        node.slice.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id == "config"
        and isinstance(node.slice, ast.Constant)
    }


#: keys the model files read that are RecBole's own or shared by every run
RECBOLE_KEYS = {"seed", "category_field"}


def test_model_files_read_exactly_the_declared_options():
    """A model file reads its options from RecBole's config, as RecBole's models do;
    each key it reads is declared once for the plugin (checked, documented, in the
    shipped yaml), and each declared option is read by a model file or the plugin."""
    from recbole_attn.sequential.recommender import AttnSequentialRecommender

    files = {
        "stosa": ["STOSA"],
        "patt": ["PAtt"],
        "dpatt": ["DPAtt"],
        "awrsr": ["AWRSR"],
        "parec": ["PARec", "FPARec"],  # FPARec's factor_k, read where R is built
        "fparec": ["FPARec"],
        "rksa": ["RKSA"],
        # the other forms of the models, which the plugin offers beside the files
        "plugin/stosa": ["STOSA"],
        "plugin/dpatt": ["DPAtt"],
        "plugin/parec": ["PARec"],
        "plugin/rksa": ["RKSA"],
    }
    read_anywhere = set()
    for module, names in files.items():
        folder = "" if "/" in module else "model"
        path = os.path.join(ROOT, "recbole_attn", folder, f"{module}.py")
        with open(path) as f:
            read = _config_keys_read(ast.parse(f.read()))
        read_anywhere |= read
        declared = set()
        for name in names:
            declared |= set(declared_options(MODELS[name]))
        if module == "awrsr":  # its backbones' options
            for backbone in ("SASRecAP", "STOSA"):
                declared |= set(declared_options(MODELS[backbone]))
        assert read - declared - RECBOLE_KEYS == set(), module
    plugin = set(vars(AttnSequentialRecommender)["options"])
    for name, cls in MODELS.items():
        unread = set(declared_options(cls)) - read_anywhere - plugin
        assert not unread or name == "SASRecAP", (name, unread)  # SASRecAP: plugin


def test_the_ast_check_sees_a_read():
    tree = ast.parse("def f(config):\n    return int(config['n_heads'])\n")
    assert _config_keys_read(tree) == {"n_heads"}


def test_every_option_has_a_meaning_and_a_default_that_passes_its_check():
    for cls in MODELS.values():
        for key, opt in declared_options(cls).items():
            assert opt.meaning.strip(), key
            if opt.default is not None:
                assert opt.check.problem(opt.default) is None, key


def test_research_options_are_marked_and_refused_by_the_commands(tmp_path, capsys):
    from recbole_attn.cli import main

    from recbole_attn.plugin import MODELS

    assert all(research_options(cls) == {} for cls in MODELS.values())
    wing = research_options(research.RESEARCH_MODELS["STOSA"])
    assert set(wing) >= {"stosa_layer_means", "trim_batch"}
    status = main(["--model=STOSA", "--dataset=tiny", "--stosa_layer_means=paper"])
    err = capsys.readouterr().err.strip()
    assert status == 2 and len(err.splitlines()) == 1
    assert "stosa_layer_means is a research-only option" in err
    assert "python -m experiments.runner" in err
    status = main(["--model=PAtt", "--dataset=tiny", "--neg_exclude_heldout=True"])
    err = capsys.readouterr().err.strip()
    assert status == 2 and "neg_exclude_heldout is a research-only option" in err
    # a search is a command too
    space = tmp_path / "space.hyper"
    space.write_text("learning_rate choice [0.001]\n")
    status = main(
        [
            "--model=PAtt",
            "--dataset=tiny",
            f"--params_file={space}",
            "--dpp_sampler=linear",
        ]
    )
    assert (
        status == 2
        and "dpp_sampler is a research-only option" in capsys.readouterr().err
    )


def test_only_the_research_wing_turns_a_leak_on():
    """The product's code names neither leak; experiments/research.py declares both."""
    from experiments import research
    from recbole_attn.options.check import RESEARCH_WING_KEYS

    for name in MODELS:
        assert "neg_exclude_heldout" not in declared_options(MODELS[name])
        assert "neg_exclude_heldout" in research.research_keys(name)
    assert "dpp_ground_set" in research.research_keys("PAtt")
    wing = {k for name in MODELS for k in research.research_keys(name)}
    assert wing == set(RESEARCH_WING_KEYS)
    for path in glob.glob(
        os.path.join(ROOT, "recbole_attn", "**", "*.py"), recursive=True
    ):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for key in RESEARCH_WING_KEYS:  # no product code reads them
            assert f'config["{key}"]' not in text, path


def test_the_product_value_of_a_research_wing_key_is_accepted(tiny_config, tmp_path):
    """A configuration of an earlier release that wrote the product's behaviour out
    (``neg_exclude_heldout: False``, ``dpp_ground_set: prefix``, e.g. in a checkpoint)
    still builds; another value is refused."""
    import pytest

    from recbole_attn.errors import ConfigError
    from recbole_attn.engine.quick_start import build

    old = {"neg_exclude_heldout": False, "dpp_ground_set": "prefix"}
    _, net, _, _ = build("PAtt", "tiny", config_dict={**tiny_config, **old})
    assert not hasattr(net, "heldout_items") and not hasattr(net, "_forms")
    with pytest.raises(ConfigError, match="dpp_ground_set is a research-only option"):
        build("PAtt", "tiny", config_dict={**tiny_config, "dpp_ground_set": "sequence"})


def test_a_research_class_takes_the_default_of_an_option_not_given(tiny_config):
    """PAtt's research class with only the held-out leak keeps the prefix ground set."""
    from experiments.research import RESEARCH_MODELS
    from recbole_attn.engine.quick_start import build

    config = {**tiny_config, "neg_exclude_heldout": True}
    _, net, _, _ = build(RESEARCH_MODELS["PAtt"], "tiny", config_dict=config)
    assert net._forms["dpp_ground_set"] == "prefix" and net.trim_batch is True
    assert net.neg_exclude_heldout and net.heldout_items is not None


def test_a_model_class_says_whether_its_batches_are_trimmed():
    """The memory estimate asks the model class (``trims_batches``) instead of reading
    a research-wing key: the product's models always trim, the research wing's
    full-length batches (``trim_batch: False``, PAtt's sequence ground set) do not."""
    from experiments.research import RESEARCH_MODELS
    from recbole_attn.plugin import MODELS

    assert all(MODELS[name].trims_batches({}) is True for name in MODELS)
    patt = RESEARCH_MODELS["PAtt"]
    assert patt.trims_batches({}) is True
    assert not patt.trims_batches({"trim_batch": False})
    assert not patt.trims_batches({"dpp_ground_set": "sequence"})
    assert patt.trims_batches({"dpp_ground_set": "prefix", "trim_batch": True})
    assert not RESEARCH_MODELS["STOSA"].trims_batches({"trim_batch": False})


def test_the_memory_estimate_of_full_length_batches_keeps_our_chunked_logits(
    monkeypatch,
):
    """Full-length batches (the research wing's) are estimated at
    MAX_ITEM_LIST_LENGTH and still as our model (its CE logits chunked, not counted
    whole); RecBole's models as before (found in review: one flag meant both)."""
    from types import SimpleNamespace

    import numpy as np
    from recbole.model.sequential_recommender import SASRec

    from experiments.research import RESEARCH_MODELS
    from recbole_attn.engine import memory
    from recbole_attn.plugin import MODELS

    seen = []
    monkeypatch.setattr(memory, "estimate", lambda *a: seen.append(a[3:]) or (0, {}))
    data = SimpleNamespace(
        inter_feat={"user_id": np.array([1, 1, 1, 2])},
        uid_field="user_id",
        item_num=5,
        user_num=3,
    )
    cases = [
        (MODELS["PAtt"], {}),
        (RESEARCH_MODELS["PAtt"], {"dpp_ground_set": "sequence"}),
        (RESEARCH_MODELS["STOSA"], {"trim_batch": False}),
        (SASRec, {}),
    ]
    for model_class, config in cases:
        memory.check_memory(config, data, model_class, available=2**40)
    assert seen == [(True, 3, 3), (True, 3, None), (True, 3, None), (False, 3, None)]


def test_awrsr_research_class_gives_its_stosa_backbone_the_forms_one_by_one(
    tiny_config,
):
    """A study's AWRSR-on-STOSA variant with one of STOSA's research forms
    (``awrsr_office``: ``stosa_layer_means``) trains AWRSR's research class, whose STOSA
    backbone takes that form (found in review: the runner refused the variant)."""
    from experiments import research
    from recbole_attn.engine.quick_start import build

    config = {
        **tiny_config,
        "backbone": "STOSA",
        "refinement": "simp",
        "stosa_preset": "official",
        "stosa_layer_means": "paper",
    }
    cls = research.model_for("AWRSR", config)
    assert cls is research.RESEARCH_MODELS["AWRSR"]
    _, net, _, _ = build(cls, "tiny", config_dict=config)
    assert net.backbone.forms["layer_means"] == "paper"
    _, net, _, _ = build(cls, "tiny", config_dict={**config, "stosa_layer_means": None})
    assert net.backbone.forms["layer_means"] == "official"  # the preset's
