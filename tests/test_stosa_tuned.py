"""experiments' stosa_tuned group (STOSA's Table 1 as the paper tuned it, issue 73):
its variants are the stored searches' selections, its protocol is the one the searches
ran with, and its page reports the searches and the runs as stored."""

import json
import os
import re

import pytest

from experiments import reports, runner, studies

GROUP = "stosa_tuned"
README = os.path.join(runner.HERE, "stosa_tuned", "README.md")


def _trial(score, epochs, reason, seconds=None, **params):
    trial = {
        "params": params,
        "best_valid_score": score,
        "epochs": epochs,
        "stop_reason": reason,
        "saved_model_file": "x.pth",
    }
    if seconds is not None:  # kept by the searches since 2026-12-03
        trial["seconds"] = seconds
    return trial


def _store(folder, name, record):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "w") as f:
        json.dump(record, f)


def _searches(root):
    """STOSA on Office finished (its trials' times kept: 2 h), SASRec on Office
    interrupted (one trial without its time), Beauty not started."""
    early = "early stopping (stopping_step 50)"
    trials = [
        _trial(0.02, 80, early, seconds=1800.0, hidden_size=32),
        _trial(0.05, 300, early, seconds=4500.0, hidden_size=64),
        _trial(0.01, 50, "stopped by ASHA", seconds=900.0, hidden_size=32),
    ]
    _store(
        os.path.join(root, studies.stosa_tuned_search("STOSA", "Office")),
        "result.json",
        {
            "best_params": {"hidden_size": 64, "learning_rate": 0.001},
            "best_valid_score": 0.05,
            "trials": trials,
        },
    )
    _store(
        os.path.join(root, studies.stosa_tuned_search("SASRec", "Office")),
        "interrupted.json",
        {"total": 48, "trials": trials[:1] + [{**trials[2], "seconds": None}]},
    )


def test_the_selections_are_the_finished_searches_best_params(tmp_path):
    """--select declares a finished search's result.json best_params, and nothing for
    a search that was interrupted or not started; the study then has that variant with
    its model's fixed settings under the selection."""
    _searches(str(tmp_path))
    block = runner.selected_block(str(tmp_path))
    namespace = {}
    exec(block, namespace)
    selected = namespace["STOSA_TUNED_SELECTED"]
    assert selected == {
        "stosa_tuned/search/STOSA-Office": {"hidden_size": 64, "learning_rate": 0.001}
    }
    study = studies.stosa_tuned_study("Office", selected)
    assert study["variants"] == {
        "STOSA": ("STOSA", {"hidden_size": 64, "learning_rate": 0.001})
    }
    sasrec = studies.stosa_tuned_study(
        "Office", {"stosa_tuned/search/SASRec-Office": {"n_layers": 3}}
    )
    assert sasrec["variants"] == {
        "SASRec": ("SASRecAP", {"loss_type": "BCE", "n_layers": 3})
    }
    assert (
        runner.selected_block(str(tmp_path / "none")) == "STOSA_TUNED_SELECTED = {}\n"
    )


def test_the_declared_selections_are_the_stored_searches():
    """studies.py's generated block is what --select writes from the stored searches
    (so a finished search is declared, and nothing is typed by hand)."""
    with open(os.path.join(runner.HERE, "studies.py")) as f:
        text = f.read()
    start, end = runner.SELECTED_MARKERS
    declared = text.split(start, 1)[1].split(end, 1)[0]
    assert declared == runner.selected_block(), (
        "studies.py's selections are not the stored searches': run "
        "python -m experiments.runner --group=stosa_tuned --select"
    )
    for dataset in studies.STOSA_TUNED_DATASETS:
        study = studies.STUDIES[studies.stosa_tuned_name(dataset)]
        for label, (model, overrides) in study["variants"].items():
            search = studies.stosa_tuned_search(label, dataset)
            params = studies.STOSA_TUNED_SELECTED[search]
            assert {k: overrides[k] for k in params} == params


def _readme_protocol():
    """The options the README's search commands pass besides the grid's."""
    with open(README) as f:
        text = f.read()
    line = re.search(r'PROTOCOL="([^"]*)"', text.replace("\\\n  ", "")).group(1)
    options = {}
    for word in line.split():  # as the shell splits an unquoted $PROTOCOL
        key, value = word[2:].split("=", 1)
        options[key] = value
    return options


def test_the_runs_take_the_protocol_the_searches_ran_with():
    """The study's protocol is the README's search options (the trials were selected
    under it), STOSA's Table 1 protocol with the paper's stopping rule."""
    import ast

    options = _readme_protocol()
    assert set(options) == {
        "eval_mask_history",
        "metrics",
        "topk",
        "valid_metric",
        "epochs",
        "stopping_step",
    }
    for dataset in studies.STOSA_TUNED_DATASETS:
        protocol = studies.STUDIES[studies.stosa_tuned_name(dataset)]["protocol"]
        assert protocol["eval_args"] == studies.FULL
        for key, value in options.items():
            parsed = value if key == "valid_metric" else ast.literal_eval(value)
            assert protocol[key] == parsed, key
    assert studies.GROUPS[GROUP]["studies"] == [
        studies.stosa_tuned_name(d) for d in studies.STOSA_TUNED_DATASETS
    ]


def test_the_page_reports_each_search_as_stored(tmp_path):
    root = str(tmp_path)
    _searches(root)
    names = [studies.stosa_tuned_name(d) for d in studies.STOSA_TUNED_DATASETS]
    selected = {"stosa_tuned/search/STOSA-Office": {"hidden_size": 64}}
    sections = [
        (studies.stosa_tuned_study(d, selected), runner.runs_folder(root, n))
        for d, n in zip(studies.STOSA_TUNED_DATASETS, names)
    ]
    page = reports.stosa_tuned_page(GROUP, sections, root)
    rows = {
        tuple(c.strip() for c in line.split("|")[1:3]): [
            c.strip() for c in line.split("|")[1:-1]
        ]
        for line in page.splitlines()
        if re.match(r"\| (Office|Beauty) \| (STOSA|SASRec) \| `", line)
    }
    assert rows["Office", "STOSA"][3:] == [
        "3 of 3",
        "1",
        "430",
        "2.0",
        "d 64, lr 0.001",
        "0.0500",
    ]
    assert "(finished)" in rows["Office", "STOSA"][2]
    assert rows["Office", "SASRec"][3:] == [
        "2 of 48",
        "1",
        "130",
        "-",
        "none yet (best so far: d 32)",
        "(0.0200)",
    ]
    assert rows["Beauty", "SASRec"][2:] == [
        "`stosa_tuned/search/SASRec-Beauty/` (not started)",
        "0",
        "0",
        "0",
        "-",
        "none yet",
        "-",
    ]
    assert (
        "Not run yet (seeds): Office (STOSA 2020, 2021, 2022; SASRec: its search has "
        "not finished), Beauty (STOSA: its search has not finished; SASRec: its search "
        "has not finished)." in page
    )


@pytest.mark.parametrize("argv", [["--select"], ["--group=stosa_table1", "--select"]])
def test_select_refuses_another_group(argv):
    with pytest.raises(SystemExit, match="--group=stosa_tuned --select"):
        runner.main(argv)
