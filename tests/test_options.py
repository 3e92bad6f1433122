"""The option is the unit (``recbole_attn.options``): one declaration per option gives the
model's attribute, its check, the shipped yaml, the docs table and the upstream yaml; the
research-only options are refused by the commands and trained by the research runner."""

import ast
import glob
import os

import pytest
import yaml

from recbole_attn.config_check import Number
from recbole_attn.model import MODELS, STOSA
from recbole_attn.options import (
    Opt,
    declared_options,
    docs_table,
    model_yaml,
    research_options,
)
from recbole_attn.options_files import generated_files

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_shipped_files_are_the_generated_ones():
    """properties/model/*.yaml, overall.yaml's block and docs/models.md's option tables
    are what the declarations give (after a change: python -m recbole_attn.options_files).
    """
    for path, text in generated_files(ROOT).items():
        with open(path, encoding="utf-8") as f:
            assert f.read() == text, (
                f"{os.path.relpath(path, ROOT)} differs from the declarations; run "
                "python -m recbole_attn.options_files"
            )


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


def _copies_config_into_self(tree):
    """``self.x = ... config[...] ...`` assignments in a constructor."""
    found = []
    for func in ast.walk(tree):
        if not (isinstance(func, ast.FunctionDef) and func.name == "__init__"):
            continue
        for node in ast.walk(func):
            if not isinstance(node, ast.Assign):
                continue
            to_self = any(
                isinstance(t, ast.Attribute)
                and isinstance(t.value, ast.Name)
                and t.value.id == "self"
                for t in node.targets
            )
            reads = any(
                isinstance(n, ast.Subscript)
                and isinstance(n.value, ast.Name)
                and n.value.id == "config"
                for n in ast.walk(node.value)
            )
            if to_self and reads:
                found.append(node.lineno)
    return found


def test_no_model_constructor_copies_config_keys_by_hand():
    for path in glob.glob(os.path.join(ROOT, "recbole_attn", "model", "*.py")):
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        assert not _copies_config_into_self(tree), (
            path,
            _copies_config_into_self(tree),
        )


def test_the_ast_check_sees_a_hand_copy():
    tree = ast.parse(
        "class M:\n    def __init__(self, config):\n"
        "        self.n_heads = int(config['n_heads'])\n"
    )
    assert _copies_config_into_self(tree) == [3]


@pytest.mark.parametrize("name", ["SASRecAP", "STOSA", "PAtt", "PARec", "RKSA"])
def test_every_declared_option_is_an_attribute_named_as_its_key(
    name, tiny_config, tmp_path, monkeypatch
):
    from recbole_attn.quick_start import build

    monkeypatch.chdir(tmp_path)
    config, net, _, _ = build(name, "tiny", config_dict=tiny_config)
    for key, opt in declared_options(MODELS[name]).items():
        assert getattr(net, key) == opt.convert(config[key]), key


def test_every_option_has_a_meaning_and_a_default_that_passes_its_check():
    for cls in MODELS.values():
        for key, opt in declared_options(cls).items():
            assert opt.meaning.strip(), key
            if opt.default is not None:
                assert opt.check.problem(opt.default) is None, key


def test_research_options_are_marked_and_refused_by_the_commands(tmp_path, capsys):
    from recbole_attn.cli import main

    assert set(research_options(STOSA)) >= {"stosa_layer_means", "trim_batch"}
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
    from recbole_attn.config_check import RESEARCH_WING_KEYS

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
    from recbole_attn.quick_start import build

    old = {"neg_exclude_heldout": False, "dpp_ground_set": "prefix"}
    _, net, _, _ = build("PAtt", "tiny", config_dict={**tiny_config, **old})
    assert net.excluded_heldout() is None and net.dpp_ground_set == "prefix"
    with pytest.raises(ConfigError, match="dpp_ground_set is a research-only option"):
        build("PAtt", "tiny", config_dict={**tiny_config, "dpp_ground_set": "sequence"})


def test_a_research_class_takes_the_default_of_an_option_not_given(tiny_config):
    """PAtt's research class with only the held-out leak keeps the prefix ground set."""
    from experiments.research import RESEARCH_MODELS
    from recbole_attn.quick_start import build

    config = {**tiny_config, "neg_exclude_heldout": True}
    _, net, _, _ = build(RESEARCH_MODELS["PAtt"], "tiny", config_dict=config)
    assert net.dpp_ground_set == "prefix" and net.trim_batch is True
    assert net.excluded_heldout() is not None
