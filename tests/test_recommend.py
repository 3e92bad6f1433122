"""Recommendations from a trained model (recbole_attn.commands.recommend, ``recbole-attn
recommend``) and ``recbole-attn evaluate``: the top-K of every model against a brute-force
ranking of its own scores, the evaluation's view, the dataset's tokens, bad input."""

import ast
import csv
import json
import logging
import os

import pytest
import torch

from conftest import write_tiny_dataset
from recbole_attn.cli import main as cli_main
from recbole_attn.errors import RecboleAttnError
from recbole_attn.plugin import MODELS
from recbole_attn.engine.quick_start import load_data_and_model, run
from recbole_attn.commands.recommend import recommend, top_k, user_histories

LOAD = {
    "inter": ["user_id", "item_id", "timestamp"],
    "item": ["item_id", "categories"],
}
FAST = {"dpp_cat_steps": 5, "dpp_cat_rank": 4}


def main(argv):
    """The command line in-process (argparse's errors exit)."""
    try:
        return cli_main(argv)
    except SystemExit as exit:
        return exit.code


def _train(tiny_config, model, **extra):
    config = {**tiny_config, "epochs": 1, "load_col": LOAD, **FAST, **extra}
    result = run(model, "tiny", config_dict=config)
    logging.getLogger().handlers.clear()
    return result["saved_model_file"]


def _brute_force(model_file, k, history="all", exclude_seen=True):
    """user token -> [(item token, score)]: every user scored on its own, all items
    sorted by score then item id, the history's items left out."""
    config, model, _, splits = load_data_and_model(model_file, {"state": "ERROR"})
    logging.getLogger().handlers.clear()
    model.eval()
    dataset = splits[0]._dataset
    out = {}
    for user, items in sorted(user_histories(splits, history).items()):
        seq = items[-model.max_seq_length :]
        item_seq = torch.zeros(1, model.max_seq_length, dtype=torch.long)
        item_seq[0, : len(seq)] = torch.tensor(seq)
        with torch.no_grad():
            scores = model.full_sort_predict(
                {
                    model.ITEM_SEQ: item_seq,
                    model.ITEM_SEQ_LEN: torch.tensor([len(seq)]),
                    model.USER_ID: torch.tensor([user]),
                }
            )[0].tolist()
        candidates = [
            (-score, item)
            for item, score in enumerate(scores)
            if item > 0 and not (exclude_seen and item in items)
        ]
        best = sorted(candidates)[:k]
        token = dataset.id2token(dataset.uid_field, user)
        out[token] = [
            (dataset.id2token(dataset.iid_field, item), -score) for score, item in best
        ]
    return out


def _grouped(result):
    got = {}
    for user, rank, item, score, _ in result["rows"]:
        got.setdefault(user, []).append((item, score))
        assert rank == len(got[user])
    return got


@pytest.mark.parametrize(
    "model,extra",
    [(name, {}) for name in MODELS]
    + [
        ("AWRSR", {"backbone": "STOSA", "refinement": "stoc"}),
        ("SASRec", {"training_mode": "last_position"}),
        ("GRU4Rec", {"training_mode": "last_position"}),
    ],
)
def test_top_k_is_the_brute_force_ranking_of_the_models_scores(
    model, extra, tiny_config
):
    model_file = _train(tiny_config, model, **extra)
    result = recommend(model_file, k=5, batch_size=7)  # several batches
    logging.getLogger().handlers.clear()
    want = _brute_force(model_file, 5)
    got = _grouped(result)
    assert got.keys() == want.keys() and len(got) == 60
    for user in want:
        assert [i for i, _ in got[user]] == [i for i, _ in want[user]], user
        assert [s for _, s in got[user]] == pytest.approx(
            [s for _, s in want[user]], rel=1e-5, abs=1e-6
        )


def test_ties_go_to_the_smaller_item_and_seen_items_never_appear():
    scores = torch.tensor([[9.0, 1.0, 3.0, 3.0, 2.0, 3.0]])
    items, values = top_k(scores, 3)
    assert items.tolist() == [[2, 3, 5]] and values.tolist() == [[3.0, 3.0, 3.0]]
    seen = torch.tensor([[False, False, True, False, False, False]])
    assert top_k(scores, 3, seen)[0].tolist() == [[3, 5, 4]]


def test_history_train_top_1_is_the_evaluations_rank_1(tiny_config):
    """With the training history as input (the model's view when its validation item was
    evaluated) and the history masked as the evaluation masks it, the top-1 item is the
    item the evaluation ranked first, user by user."""
    long_enough = {"MAX_ITEM_LIST_LENGTH": 20, "eval_mask_history": True}
    model_file = _train(tiny_config, "SASRecAP", **long_enough)
    result = recommend(model_file, k=1, history="train")
    logging.getLogger().handlers.clear()
    top = {user: item for user, _, item, _, _ in result["rows"]}
    _, _, trainer, (_, valid, _) = load_data_and_model(model_file, long_enough)
    logging.getLogger().handlers.clear()
    trainer.model.eval()
    dataset = valid._dataset
    trainer.tot_item_num = dataset.item_num  # what evaluate() sets before ranking
    ranked_first = {}
    with torch.no_grad():
        for batch in valid:
            interaction, scores, _, _ = trainer._full_sort_batch_eval(batch)
            best = scores.argmax(1)
            users = dataset.id2token(dataset.uid_field, interaction["user_id"])
            items = dataset.id2token(dataset.iid_field, best)
            ranked_first.update(zip(users, items))
    assert ranked_first and all(top[u] == i for u, i in ranked_first.items())


def test_tokens_round_trip_and_seen_items_are_optional(tiny_config, tmp_path):
    model_file = _train(tiny_config, "SASRecAP")
    out = tmp_path / "recs.csv"
    argv = ["recommend", f"--model_file={model_file}", f"--output={out}", "--topk=4"]
    assert main(argv + ["--users=u7,u3"]) == 0
    with open(out) as f:
        rows = list(csv.DictReader(f))
    assert [r["user_id"] for r in rows] == ["u7"] * 4 + ["u3"] * 4
    with open(os.path.join(tiny_config["data_path"], "tiny", "tiny.item")) as f:
        categories = dict(line.rstrip("\n").split("\t") for line in list(f)[1:])
    for row in rows:
        assert row["item_id"].startswith("i") and int(row["rank"]) in (1, 2, 3, 4)
        assert row["categories"] == categories.get(row["item_id"], "")
    # JSON Lines, history items kept
    jsonl = tmp_path / "recs.jsonl"
    assert main(argv[:2] + [f"--output={jsonl}", "--topk=37", "--users=u3"]) == 2
    assert main(argv[:2] + [f"--output={jsonl}", "--topk=36", "--users=u3"]) == 0
    (record,) = [json.loads(line) for line in open(jsonl)]
    kept = main(
        argv[:2]
        + [f"--output={tmp_path / 'all.jsonl'}", "--topk=36", "--users=u3"]
        + ["--exclude_seen=False"]
    )
    assert kept == 0
    (everything,) = [json.loads(line) for line in open(tmp_path / "all.jsonl")]
    assert len(everything["recommendations"]) == 36 > len(record["recommendations"])


def test_bad_input_is_one_line_and_writes_nothing(tiny_config, tmp_path, capsys):
    model_file = _train(tiny_config, "SASRecAP")
    folder = tmp_path / "out"
    out = folder / "recs.csv"
    base = ["recommend", f"--model_file={model_file}", f"--output={out}"]
    cases = [
        (["--users=u1,nobody,zz"], "2 of the 3 users given are not in the dataset"),
        (["--topk=0"], "topk must be an integer >= 1"),
        (["--topk=1000"], "topk 1000 is more than the 36 items of 'tiny'"),
        (["--users_file=missing.txt"], "users file not found"),
        (["--exclude_seen=maybe"], "--exclude_seen must be True or False"),
        (["--history=future"], "invalid choice"),
    ]
    for extra, fragment in cases:
        assert main(base + extra) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1, err
        assert fragment in err, err
        assert not folder.exists(), "nothing written"
    # a checkpoint of other data: the same name, other users and items
    other = tmp_path / "other"
    write_tiny_dataset(str(other), n_users=30, n_items=25)
    assert main(base + [f"--data_path={other}"]) == 2
    err = capsys.readouterr().err
    assert (
        "was trained on 'tiny' (61 users, 37 items, " in err
        and "(31 users, 24 items, " in err
    )
    # an existing output is never replaced without --overwrite
    folder.mkdir()
    out.write_text("mine\n")
    assert main(base) == 2
    assert "--overwrite" in capsys.readouterr().err and out.read_text() == "mine\n"
    assert main(base + ["--overwrite"]) == 0
    assert out.read_text().startswith("user_id,rank,item_id,score")
    assert os.listdir(folder) == ["recs.csv"]  # no temporary file left


def test_a_folder_means_its_newest_model(tiny_config):
    first = _train(tiny_config, "SASRecAP")
    second = _train(tiny_config, "SASRecAP", seed=7)
    os.utime(first, (1, 1))
    result = recommend(tiny_config["checkpoint_dir"], k=1, users=["u1"])
    assert result["model_file"] == second
    empty = os.path.join(os.path.dirname(tiny_config["checkpoint_dir"]), "empty")
    os.mkdir(empty)
    with pytest.raises(RecboleAttnError, match="holds no model checkpoint"):
        recommend(empty, k=1)


def test_evaluate_command_gives_the_runs_test_result(tiny_config, capsys):
    config = {**tiny_config, "epochs": 1, "load_col": LOAD}
    result = run("SASRecAP", "tiny", config_dict=config)
    logging.getLogger().handlers.clear()
    capsys.readouterr()
    assert main(["evaluate", f"--model_file={result['saved_model_file']}"]) == 0
    out = capsys.readouterr().out
    test = ast.literal_eval(out.split("test: ")[1].strip())
    assert test == pytest.approx(
        {k: float(v) for k, v in result["test_result"].items()}
    )
    argv = ["evaluate", f"--model_file={result['saved_model_file']}"]
    uni = [
        "--metrics=['Hit']",
        "--valid_metric=Hit@10",
        "--eval_args={'mode': 'uni100'}",
    ]
    assert main(argv + uni) == 0
    assert "hit@10" in capsys.readouterr().out
    assert main(argv + ["--eval_args={'mode': 'uni-1'}"]) == 2
    # a folder: the file it chose is named; the checkpoint is announced once, not once
    # per split
    capsys.readouterr()
    folder = os.path.dirname(result["saved_model_file"])
    assert main(["evaluate", f"--model_file={folder}", "--state=INFO"]) == 0
    logging.getLogger().handlers.clear()
    err = capsys.readouterr().err
    assert (
        f"model file: {result['saved_model_file']} (the newest of the 1 SASRecAP "
        f"checkpoints in {folder}, by modification time)"
    ) in err
    assert err.count("Loading model structure and parameters") == 1


def test_a_folder_of_several_models_checkpoints_needs_model(tmp_path):
    """``--model_file=saved`` took the newest checkpoint of any model (after the
    diversity example it evaluated SASRecAP, not the STOSA of the first command): with
    several models' checkpoints in the folder it names them and asks for ``--model``."""
    from recbole_attn.commands.evaluate import newest_model_file

    folder = tmp_path / "saved"
    folder.mkdir()
    for i, name in enumerate(
        [
            "STOSA-2026-12-01_10-00-00-aaaaaa.pth",
            "STOSA-2026-12-01_11-00-00-bbbbbb.pth",
            "STOSA-2026-12-01_11-00-00-bbbbbb-last.pth",
            "SASRecAP-2026-12-01_12-00-00-cccccc.pth",
        ]
    ):
        (folder / name).write_bytes(b"x")
        os.utime(folder / name, (1000 + i, 1000 + i))
    with pytest.raises(RecboleAttnError) as err:
        newest_model_file(str(folder))
    assert "several models (SASRecAP: 1, STOSA: 2); say which with --model" in str(
        err.value
    )
    stosa = newest_model_file(str(folder), "STOSA")
    assert stosa == str(folder / "STOSA-2026-12-01_11-00-00-bbbbbb.pth")
    with pytest.raises(RecboleAttnError, match="holds no checkpoint of PAtt"):
        newest_model_file(str(folder), "PAtt")
    assert newest_model_file(stosa, "STOSA") == stosa
    with pytest.raises(RecboleAttnError, match="is a file \\(of STOSA"):
        newest_model_file(stosa, "SASRecAP")
