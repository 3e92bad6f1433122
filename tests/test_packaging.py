"""The installed package: every subpackage and the yaml defaults, the console command, the
dependency override that lifts RecBole's stale ray pin, and the stacks CI tests."""

import os
import subprocess
import sys
import tomllib

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _pyproject():
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)


def test_pyproject_lists_every_subpackage_and_the_properties():
    tool = _pyproject()["tool"]["setuptools"]
    listed = set(tool["packages"])
    found = {"recbole_attn.properties"}
    for root, dirs, files in os.walk(os.path.join(REPO, "recbole_attn")):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        if "__init__.py" in files:
            found.add(os.path.relpath(root, REPO).replace(os.sep, "."))
    assert found == listed
    assert tool["package-dir"] == {"recbole_attn.properties": "properties"}
    data = tool["package-data"]["recbole_attn.properties"]
    assert {"*.yaml", "model/*.yaml", "dataset/*.yaml", "hyper/*.hyper"} <= set(data)
    # the export reads RecBole's metric test from a file of the package
    assert tool["package-data"]["recbole_attn.upstream"] == ["recbole_tests/*.py"]
    assert os.path.isfile(
        os.path.join(
            REPO,
            "recbole_attn",
            "upstream",
            "recbole_tests",
            "test_category_metrics.py",
        )
    )


def test_every_source_file_compiles_without_warnings():
    """No SyntaxWarning at import (an invalid escape such as ``\\m`` in a docstring is a
    SyntaxWarning from Python 3.12 on, shown to every user)."""
    import warnings

    for folder in ("recbole_attn", "experiments", "dataset_scripts", "tests"):
        for root, _, files in os.walk(os.path.join(REPO, folder)):
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(root, name)
                    with open(path, encoding="utf-8") as f:
                        source = f.read()
                    with warnings.catch_warnings():
                        warnings.simplefilter("error")
                        compile(source, path, "exec")


def test_every_model_has_its_yaml_and_search_space():
    from recbole_attn.plugin import MODELS
    from recbole_attn.commands.tuning import shipped_spaces

    for name in MODELS:
        assert os.path.isfile(os.path.join(REPO, "properties", "model", f"{name}.yaml"))
    assert set(MODELS) <= set(shipped_spaces())


def test_the_ray_override_is_our_ray_requirement():
    """uv replaces RecBole's ray<=2.6.3 by the override (every requirement on ray): it
    must be the package's own requirement, and the oldest-stack constraints must pin the
    lowest versions the requirements admit."""
    project = _pyproject()
    (ours,) = [d for d in project["project"]["dependencies"] if d.startswith("ray")]
    assert project["tool"]["uv"]["override-dependencies"] == [ours]
    lower = {
        d.split(">=")[0].split("[")[0]: d.split(">=")[1]
        for d in project["project"]["dependencies"]
        if ">=" in d
    }
    with open(os.path.join(REPO, ".ci", "oldest.txt")) as f:
        pins = dict(
            line.strip().split("==") for line in f if "==" in line and line[0] != "#"
        )
    assert set(pins) <= set(lower)
    for name, version in pins.items():  # the lowest release of the lower bound
        assert version.startswith(lower[name]), (name, version, lower[name])


def test_version_is_one_string():
    import recbole_attn

    assert recbole_attn.__version__.count(".") == 2


def _console_command():
    exe = os.path.join(os.path.dirname(sys.executable), "recbole-attn")
    if not os.path.isfile(exe):
        pytest.skip("the package is not installed in this environment")
    return exe


@pytest.mark.parametrize("module", [False, True], ids=["recbole-attn", "python -m"])
def test_console_command_and_module_show_the_commands(module, tmp_path):
    entry = [sys.executable, "-m", "recbole_attn"] if module else [_console_command()]
    out = subprocess.run(
        entry + ["--help"], capture_output=True, text=True, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert "convert" in out.stdout and "--params_file" in out.stdout
    prog = "python -m recbole_attn" if module else "recbole-attn"
    assert f"usage: {prog} " in out.stdout


def test_console_command_converts_from_an_empty_folder(tmp_path, capsys):
    seq = tmp_path / "s.txt"
    seq.write_text("".join(f"{u} 1 2 3 4 5\n" for u in range(1, 6)))
    argv = ["convert", "seqfile", "--sequences", str(seq), "--name", "S"]
    out = subprocess.run(
        [_console_command()] + argv, capture_output=True, text=True, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    yaml_text = (tmp_path / "dataset" / "S" / "S.yaml").read_text()
    assert yaml_text.startswith(
        "# Written by: recbole-attn convert seqfile --sequences "
    )
    from recbole_attn.cli import main

    assert main(["convert", "nope"]) == 2
    assert capsys.readouterr().err.startswith("error: unknown converter 'nope'")
    assert main(["tune", "--model=STOSA"]) == 2
    assert "needs --params_file" in capsys.readouterr().err
