"""Every command starts at once: --help, argument errors and unknown models answer
without importing torch or RecBole (recbole_attn.options.names)."""

import subprocess
import sys

import pytest

from recbole_attn.options.names import (
    MODEL_NAMES,
    did_you_mean,
    known_model_names,
    recbole_model_names,
)


def _cli(*args):
    """Run the CLI in a fresh interpreter; (exit status, output, whether torch and
    RecBole were imported)."""
    code = (
        "import sys\n"
        "from recbole_attn.cli import main\n"
        "try:\n"
        f"    status = main({list(args)!r})\n"
        "except SystemExit as exit:\n"
        "    status = exit.code\n"
        "print('IMPORTED', 'torch' in sys.modules, 'recbole' in sys.modules)\n"
        "sys.exit(status)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    out = done.stdout + done.stderr
    return done.returncode, out, "IMPORTED False False" not in out


def test_our_names_are_the_registered_models():
    from recbole_attn.plugin import MODELS

    assert MODEL_NAMES == tuple(MODELS)


def test_recboles_names_are_the_classes_its_get_model_finds():
    import recbole.model.sequential_recommender as seq
    from recbole.utils import get_model

    names = recbole_model_names()
    assert "SASRec" in names["sequential_recommender"]
    assert "BPR" in names["general_recommender"]
    for name in names["sequential_recommender"]:
        assert get_model(name) is getattr(seq, name)


@pytest.mark.parametrize(
    "typed, meant", [("STOSa", "STOSA"), ("sasrec", "SASRec"), ("Patt", "PAtt")]
)
def test_a_misspelled_model_gets_the_closest_name(typed, meant):
    assert did_you_mean(typed, known_model_names()) == f" (did you mean {meant}?)"
    assert did_you_mean("XYZQW", known_model_names()) == ""


def test_help_and_argument_errors_answer_without_torch_or_recbole():
    status, out, imported = _cli("--help")
    assert status == 0 and "recbole_attn: STOSA, SASRecAP" in out and "SASRec" in out
    assert not imported
    status, out, imported = _cli("--model=STOSAA", "--dataset=ml-100k")
    assert status == 2 and not imported
    assert "error: unknown model 'STOSAA' (did you mean STOSA?)" in out
    status, out, imported = _cli("--model=STOSA", "oops")
    assert status == 2 and not imported and "error: unrecognized arguments oops" in out


def test_the_serving_commands_help_without_torch_or_recbole():
    for command, words in (("export-onnx", "ONNX Runtime"), ("serve", "127.0.0.1")):
        status, out, imported = _cli(command, "--help")
        assert status == 0 and words in out and not imported, command
    status, out, imported = _cli("serve", "--model_file=m.onnx", "--port=70000")
    assert status == 2 and not imported and "port must be 0 to 65535" in out
