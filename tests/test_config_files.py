"""Hostile or careless config files (issue 65): read with limits (aliases that expand
without end, size, number length), a key given twice refused naming both lines, and the
answer within a second (the bound below is generous for a loaded 2-core machine)."""

import time

import pytest

from test_hostile import main
from test_safety import _one_line, _run_args

#: nine values, each level nine aliases of the one before: 9**9 strings when printed
BOMB = 'a: &a ["x","x","x","x","x","x","x","x","x"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]\n"
    for i in range(8)
)

CASES = {
    "alias bomb": (BOMB, "its aliases expand to more than 100,000 values"),
    "recursive alias": (
        "a: &a [1, *a]\n",
        "an alias refers to the value that holds it",
    ),
    "key twice": (
        "epochs: 1\nlearning_rate: 0.01\nepochs: 3\n",
        "epochs is given twice, on lines 1 and 3",
    ),
    "nested key twice": (
        "eval_args:\n  mode: full\n  order: TO\n  mode: uni100\n",
        "mode is given twice, on lines 2 and 4",
    ),
    "long number": ("epochs: " + "9" * 5000 + "\n", "a number of 5,000 characters"),
    # the README's "a 100-digit number" (before: taken, the limit was 100 characters)
    "100 digits": ("epochs: " + "9" * 100 + "\n", "a number of 100 characters;"),
    "huge file": ("#" * 2_000_000 + "\nepochs: 1\n", "2,000,011 characters; a config"),
    "huge file, not read": ("#" * 5_000_000 + "\n", "5,000,001 bytes; a config file"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_hostile_config_file_is_refused_at_once(
    case, tiny_data_path, tmp_path, monkeypatch, capsys
):
    """Before: the bomb hung the run (RecBole prints the whole configuration), a key
    given twice silently took the last value, a long number was a traceback."""
    text, fragment = CASES[case]
    path = tmp_path / "hostile.yaml"
    path.write_text(text)
    monkeypatch.chdir(tmp_path)
    started = time.monotonic()
    code, err = main(_run_args(tiny_data_path, f"--config_files={path}"), capsys)
    assert time.monotonic() - started < 5
    _one_line(code, err, fragment)
    assert str(path) in err
    assert not (tmp_path / "saved").exists(), "nothing ran"


def test_a_hyper_file_with_an_alias_bomb_is_refused(tmp_path):
    from recbole_attn.errors import RecboleAttnError
    from recbole_attn.commands.tuning.space import read_params_file

    flow = "[" + ", ".join(
        ["&a [1,1,1,1,1,1,1,1,1]"]
        + [f"&{c} [{','.join(['*' + p] * 9)}]" for p, c in zip("abcdefgh", "bcdefghi")]
    )
    space = tmp_path / "bomb.hyper"
    space.write_text(f"hidden_size choice {flow}]\n")
    started = time.monotonic()
    with pytest.raises(RecboleAttnError, match="expand to more than 100,000 values"):
        read_params_file(str(space))
    assert time.monotonic() - started < 5


def test_merge_keys_and_repeated_keys_in_other_mappings_are_fine(tmp_path):
    from recbole_attn.files import read_yaml

    path = tmp_path / "fine.yaml"
    path.write_text(
        "base: &base {hidden_size: 8, n_layers: 1}\n"
        "other:\n  <<: *base\n  hidden_size: 16\n"
        "load_col:\n  inter: [user_id]\n  item: [item_id]\n"
    )
    assert read_yaml(str(path))["other"] == {"hidden_size": 16, "n_layers": 1}


def test_a_hostile_config_file_is_refused_before_torch_loads(tmp_path):
    """In a fresh process the refusal comes before torch and RecBole are imported (a
    second's answer even where importing them takes several), for a run and a search."""
    import subprocess
    import sys

    path = tmp_path / "hostile.yaml"
    path.write_text(BOMB)
    for extra in ([], ["--params_file=STOSA"]):
        code = (
            "import sys\n"
            "from recbole_attn.cli import main\n"
            f"status = main(['--model=STOSA', '--dataset=ml-100k', "
            f"'--config_files={path}', *{extra!r}])\n"
            "assert status == 2, status\n"
            "assert 'torch' not in sys.modules and 'recbole' not in sys.modules\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr
        assert "its aliases expand to more than 100,000 values" in done.stderr
