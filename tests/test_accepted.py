"""What RecBole accepts, accepted; what the user asked, done (issue 65): every value RecBole
1.2.1 takes for its own keys passes our checks (read from its source, not our memory),
``--data_path`` holds for ml-100k too, and an output is written in the format its name
says or refused."""

import os

import pytest
import torch

from conftest import write_tiny_dataset
from test_hostile import main
from test_safety import _one_line, _run_args


@pytest.mark.parametrize("learner", ["adamw", "AdamW"])
def test_recboles_adamw_trains(learner, tiny_data_path, tmp_path, monkeypatch, capsys):
    """RecBole 1.2.1's ``_build_optimizer`` has adamw; we refused it (and a test of ours
    asserted the refusal)."""
    monkeypatch.chdir(tmp_path)
    code, err = main(_run_args(tiny_data_path, f"--learner={learner}"), capsys)
    assert code == 0, err


def test_sparse_adam_on_dense_parameters_is_one_line(
    tiny_data_path, tmp_path, monkeypatch, capsys
):
    """RecBole offers sparse_adam; torch's SparseAdam then failed in the first step with
    a traceback ("does not support dense gradients")."""
    monkeypatch.chdir(tmp_path)
    code, err = main(_run_args(tiny_data_path, "--learner=sparse_adam"), capsys)
    _one_line(code, err, "learner sparse_adam (torch's SparseAdam) trains sparse")
    assert "use --learner=adam" in err


def test_every_learner_recbole_builds_is_accepted():
    """The names of RecBole's own optimizer switch, read from its source."""
    import inspect
    import re

    from recbole.trainer import Trainer

    from recbole_attn.options.values import LEARNERS

    source = inspect.getsource(Trainer._build_optimizer)
    recboles = set(re.findall(r'learner\.lower\(\) == "(\w+)"', source))
    assert recboles and recboles == set(LEARNERS)


@pytest.mark.parametrize(
    "eval_args",
    [
        {"split": {"TS": [0.8, 0.1, 0.1]}, "order": "TO"},  # RecBole 1.2.1's time split
        {"split": {"RS": [0.8, 0.1, 0.1]}, "group_by": "None"},  # lower() == "none"
        {"split": {"RS": [0.8, 0.1, 0.1]}, "group_by": "NONE"},
    ],
)
def test_eval_args_recbole_takes_pass_our_check(eval_args):
    from recbole_attn.options.check import check_options
    from recbole_attn.options.values import VALUE_RULES

    check_options({"eval_args": eval_args}, {"eval_args": VALUE_RULES["eval_args"]})


def test_a_users_own_ml100k_is_read_from_their_data_path(tmp_path, monkeypatch, capsys):
    """RecBole's Config replaces data_path by its bundled copy for ml-100k: a user's own
    ml-100k folder (here 61 users; RecBole's has 943) was silently not read."""
    root = tmp_path / "data"
    folder = write_tiny_dataset(str(root), name="ml-100k")
    item = os.path.join(folder, "ml-100k.item")
    with open(item) as f:
        text = f.read()
    with open(item, "w") as f:  # RecBole's ml-100k calls its genre field `class`
        f.write(text.replace("categories:token_seq", "class:token_seq", 1))
    monkeypatch.chdir(tmp_path)
    argv = _run_args(str(root), "--dataset=ml-100k", f"--checkpoint_dir={tmp_path}/s")
    code, err = main(argv, capsys)
    assert code == 0, err
    (model_file,) = [p for p in (tmp_path / "s").glob("*.pth") if "-last" not in p.name]
    data = torch.load(model_file, weights_only=True)["data"]
    assert (data["dataset"], data["n_users"]) == ("ml-100k", 61)
    # a folder of that name without the files is not found, not replaced
    os.remove(os.path.join(folder, "ml-100k.inter"))
    code, err = main(argv, capsys)
    _one_line(code, err, "dataset 'ml-100k' not found: no ml-100k.inter in")


@pytest.mark.parametrize(
    "output, extra, fragment",
    [
        (
            "recs.json",
            [],
            "recommend writes CSV (.csv) or JSON Lines (.jsonl), not .json",
        ),
        ("recs.parquet", [], "not .parquet; name the file .csv or .jsonl"),
        ("recs", [], "not a file without an extension"),
        ("recs.csv", ["--format=jsonl"], "--format=jsonl and --output"),
    ],
)
def test_an_output_of_a_format_recommend_does_not_write_is_refused(
    output, extra, fragment, tmp_path, monkeypatch, capsys
):
    """Before: CSV (or JSON Lines) written under that name. Refused before the model
    loads (the model file need not even exist)."""
    monkeypatch.chdir(tmp_path)
    argv = ["recommend", "--model_file=nowhere.pth", f"--output={output}", *extra]
    code, err = main(argv, capsys)
    _one_line(code, err, fragment)
    assert list(tmp_path.iterdir()) == []
    # --format writes that format under another extension
    from recbole_attn.commands.recommend import output_format

    assert output_format("recs.txt", "csv") == "csv"
    assert output_format("recs.JSONL") == "jsonl"
