"""Hostile input, races and faults (issue 41): nothing hangs, nothing is silently wrong,
nothing a user has is overwritten, and every failure is one ``error:`` line."""

import json
import logging
import os
import shutil

import numpy as np
import pytest
import torch

from conftest import TINY_MODEL
from test_safety import _one_line, _run_args
from recbole_attn.cli import main as cli_main
from recbole_attn.errors import RecboleAttnError
from recbole_attn.engine.quick_start import evaluate, run

LOAD = {"inter": ["user_id", "item_id", "timestamp"]}


def main(argv, capsys):
    """The command line in-process: (exit code, stderr)."""
    try:
        code = cli_main(argv)
    except SystemExit as exit:
        code = exit.code
    return code, capsys.readouterr().err


@pytest.fixture(scope="module")
def trained(tiny_data_path, tmp_path_factory):
    """One tiny SASRecAP checkpoint and the config it was trained with."""
    root = tmp_path_factory.mktemp("trained")
    cwd = os.getcwd()
    os.chdir(root)
    config = {
        "data_path": tiny_data_path,
        "load_col": LOAD,
        "epochs": 1,
        "train_batch_size": 16,
        "eval_batch_size": 64,
        "checkpoint_dir": str(root / "saved"),
        "state": "ERROR",
        "seed": 2020,
        **TINY_MODEL,
    }
    try:
        result = run("SASRecAP", "tiny", config_dict=config)
    finally:
        os.chdir(cwd)
        logging.getLogger().handlers.clear()
    return result, config


def _rewrite(model_file, target, change):
    """A copy of checkpoint ``model_file`` at ``target`` with ``change(dict)`` applied."""
    checkpoint = torch.load(model_file, weights_only=True)
    change(checkpoint)
    torch.save(checkpoint, target)
    return str(target)


# ---------------------------------------------------------------------- 1. no hang


def test_a_checkpoint_does_not_bring_back_how_it_was_trained(
    trained, tmp_path, monkeypatch
):
    """A checkpoint of a multi-process run (nproc, world_size, ip, port), trained on
    another device into another folder, evaluates in this process: before, evaluate
    waited forever for the second process."""
    result, _ = trained
    monkeypatch.chdir(tmp_path)
    elsewhere = tmp_path / "not_here"

    def as_if_distributed(checkpoint):
        options = json.loads(checkpoint["external_config_json"])
        options.update(
            nproc=2,
            world_size=2,
            ip="10.0.0.99",
            port=29999,
            offset=0,
            gpu_id="3",
            device="cuda:3",
            checkpoint_dir=str(elsewhere),
        )
        checkpoint["external_config_json"] = json.dumps(options)

    model_file = _rewrite(
        result["saved_model_file"], tmp_path / "dist.pth", as_if_distributed
    )
    got = evaluate(model_file, {"state": "ERROR"})
    logging.getLogger().handlers.clear()
    assert got["test_result"] == pytest.approx(result["test_result"], abs=1e-12)
    assert not elsewhere.exists()


# ---------------------------------------------------------------------- 2. no silent number


@pytest.mark.parametrize(
    "option", ["--learning_rate=1e999", "--weight_decay=-1e999", "--dropout_prob=1e999"]
)
def test_options_that_must_be_finite_are(
    option, trained, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    code, err = main(_run_args(trained[1]["data_path"], option), capsys)
    _one_line(code, err, f"{option[2:].split('=')[0]} must be a finite number")
    assert not (tmp_path / "saved").exists(), "nothing trained"


def test_weights_that_stop_being_finite_stop_the_run(
    trained, tmp_path, monkeypatch, capsys
):
    """A step that leaves NaN weights behind a finite loss (before: exit 0, metrics of a
    NaN model, then NaN recommendations) stops the run as a NaN loss does."""
    from recbole.trainer import Trainer

    original = Trainer._train_epoch

    def poisoned(self, *args, **kwargs):
        losses = original(self, *args, **kwargs)
        with torch.no_grad():
            next(self.model.parameters())[0].fill_(float("inf"))
        return losses

    monkeypatch.setattr(Trainer, "_train_epoch", poisoned)
    monkeypatch.chdir(tmp_path)
    code, err = main(_run_args(trained[1]["data_path"]), capsys)
    _one_line(code, err, "the model's weights became NaN or infinite in epoch 1")
    assert "lower --learning_rate" in err


def test_a_checkpoint_of_nan_weights_is_refused(trained, tmp_path, monkeypatch, capsys):
    result, _ = trained
    monkeypatch.chdir(tmp_path)

    def poison(checkpoint):
        name = next(iter(checkpoint["state_dict"]))
        checkpoint["state_dict"][name] = checkpoint["state_dict"][name] * float("nan")

    model_file = _rewrite(result["saved_model_file"], tmp_path / "nan.pth", poison)
    for command in ("evaluate", "recommend"):
        argv = [command, f"--model_file={model_file}"]
        if command == "recommend":
            argv.append(f"--output={tmp_path / 'out.csv'}")
        else:
            argv.append("--state=ERROR")
        code, err = main(argv, capsys)
        _one_line(code, err, "holds NaN or infinite weights")
    assert not (tmp_path / "out.csv").exists()


def test_a_checkpoint_on_other_data_of_the_same_name_and_sizes_is_refused(
    trained, tmp_path, monkeypatch, capsys
):
    """The same users and items, one interaction moved to another item: before, the
    check was name + user/item counts and evaluate reported the other data's metrics."""
    result, config = trained
    monkeypatch.chdir(tmp_path)
    source = os.path.join(config["data_path"], "tiny")
    target = tmp_path / "data" / "tiny"
    shutil.copytree(source, target)
    inter = target / "tiny.inter"
    lines = inter.read_text().splitlines()
    user, item, time = lines[5].split("\t")
    seen = {l.split("\t")[1] for l in lines[1:] if l.split("\t")[0] == user}
    other_item = next(
        l.split("\t")[1] for l in lines[1:] if l.split("\t")[1] not in seen
    )
    lines[5] = "\t".join((user, other_item, time))
    inter.write_text("\n".join(lines) + "\n")
    evaluate_there = [
        "evaluate",
        f"--model_file={result['saved_model_file']}",
        f"--data_path={tmp_path / 'data'}",
        "--state=ERROR",
    ]
    code, err = main(evaluate_there, capsys)
    _one_line(code, err, "other data named 'tiny' with the same numbers of users")
    assert "data fingerprint" in err
    # the same data elsewhere is the same data
    shutil.rmtree(target)
    shutil.copytree(source, target)
    code, err = main(evaluate_there, capsys)
    assert code == 0, err


def test_a_sampled_ranking_with_fewer_candidates_than_the_cutoff_is_refused(
    trained, tmp_path, monkeypatch, capsys
):
    """uni10 ranks the target among 11 items: Recall@20 was 1.0 without a word."""
    result, _ = trained
    monkeypatch.chdir(tmp_path)
    sampled = [
        "--eval_args={'mode': 'uni10'}",
        "--topk=[5,20]",
        "--valid_metric=NDCG@5",
    ]
    code, err = main(_run_args(trained[1]["data_path"], *sampled), capsys)
    _one_line(code, err, "topk [5, 20] reaches past the 11 candidates of a uni10")
    assert not list(tmp_path.glob("saved/*")), "nothing trained"
    code, err = main(
        ["evaluate", f"--model_file={result['saved_model_file']}", "--state=ERROR"]
        + sampled,
        capsys,
    )
    _one_line(code, err, "Recall@20 and Hit@20 would be 1 for any model")
    # a cutoff the candidates can fill is fine
    code, err = main(
        ["evaluate", f"--model_file={result['saved_model_file']}", "--state=ERROR"]
        + ["--eval_args={'mode': 'uni10'}", "--topk=[5,10]", "--valid_metric=NDCG@5"],
        capsys,
    )
    assert code == 0, err


# ---------------------------------------------------------------------- 3. nothing replaced


def test_an_output_made_meanwhile_is_never_replaced(tmp_path):
    """Between the existence check and the final move another process writes the
    output: the first writer's file stays, this one fails and leaves none of its files
    (before: two recommends into one file both exited 0, the last one's file won)."""
    from recbole_attn.files import ExistingOutputError, write_files

    first, second = tmp_path / "a.csv", tmp_path / "b.csv"

    def meanwhile(f):
        f.write("mine\n")
        second.write_text("theirs\n")  # another run publishes while this one writes

    with pytest.raises(ExistingOutputError, match="would replace .*b.csv"):
        write_files({str(first): "mine\n", str(second): meanwhile}, "the output")
    assert second.read_text() == "theirs\n"
    assert not first.exists(), "all or nothing"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.csv"], "no temporary left"
    write_files({str(second): "replaced\n"}, overwrite=True)
    assert second.read_text() == "replaced\n"


def _busy_replace(monkeypatch, busy, stuck=False):
    """``os.replace`` that fails with EBUSY for the targets in ``busy`` (a set the test
    may empty), as a file held by another process or a mount point; ``stuck``: every
    replace after the first failure fails too (until ``busy`` is emptied)."""
    import errno

    real, failed = os.replace, []

    def replace(src, dst, *args, **kwargs):
        if os.path.abspath(dst) in busy or (stuck and failed and busy):
            failed.append(dst)
            raise OSError(errno.EBUSY, "Device or resource busy", dst)
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)


@pytest.mark.parametrize("put_back", [True, False])
def test_a_publish_that_cannot_replace_its_last_file_keeps_the_old_ones_or_finishes(
    put_back, tmp_path, monkeypatch
):
    """``write_files(..., overwrite=True)`` (the export, the docs generator): the 7th of
    7 files cannot be replaced (EBUSY) after 6 were. Before, a traceback, and 6 new
    files beside an old 7th (the export's record). Now one line naming the file: the
    old versions are back, or (when they cannot be put back either) the plan beside the
    last file lets the rerun finish: the old files or the new ones, never a mix for
    good."""
    from recbole_attn.files import write_files

    paths = [str(tmp_path / f"f{n}.txt") for n in range(7)]
    for path in paths[:-1]:  # the 7th is new
        with open(path, "w") as f:
            f.write("old\n")
    new = {path: f"new {n}\n" for n, path in enumerate(paths)}
    busy = {paths[-1]}
    _busy_replace(monkeypatch, busy, stuck=not put_back)
    with pytest.raises(RecboleAttnError) as caught:
        write_files(new, "the export", overwrite=True)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        f"the export: cannot replace {paths[-1]} (Device or resource busy: the file "
        "is in use); "
    ), message
    if put_back:
        assert "nothing was changed: close what holds it" in message, message
        assert sorted(os.listdir(tmp_path)) == [os.path.basename(p) for p in paths[:-1]]
        for path in paths[:-1]:
            assert open(path).read() == "old\n"
    else:
        assert "6 of 7 files are new and could not be put back (the publish is " in (
            message
        )
        assert f"recorded in {tmp_path / '.f6.txt.publish.json'}, which the same" in (
            message
        )
    busy.clear()  # what held it let go: the same publish again
    write_files(new, "the export", overwrite=True)
    assert sorted(os.listdir(tmp_path)) == [os.path.basename(p) for p in paths]
    for path, text in new.items():
        assert open(path).read() == text


def test_an_export_whose_record_cannot_be_replaced_is_one_line_and_reruns(tmp_path):
    """export-upstream with its record (the manifest, its last file) busy after its
    other files were replaced: before, a traceback, and a checkout whose files the
    record did not know (the rerun refused them as edited by hand). Now one line, the
    checkout as before the export, and the same export, rerun, finishes; when the old
    files cannot be put back either, the rerun finishes the export first."""
    from test_upstream import _fake_checkout

    from recbole_attn.upstream.export import _manifest_path, export

    root = tmp_path / "RecBole"
    _fake_checkout(root)
    export(str(root), ["PAtt"], metrics=False)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    record = os.path.abspath(_manifest_path(str(root)))
    for stuck in (False, True):
        with pytest.MonkeyPatch.context() as patch:
            _busy_replace(patch, {record}, stuck=stuck)
            with pytest.raises(RecboleAttnError) as caught:
                export(str(root), ["PAtt", "STOSA"], metrics=False)
        message = str(caught.value)
        assert "\n" not in message
        assert message.startswith(
            f"the export: cannot replace {record} (Device or resource busy: the file is "
            "in use); "
        ), message
        if not stuck:
            assert "nothing was changed" in message, message
            now = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
            assert now == before, "the checkout as it was"
        else:
            assert "which the same command finishes" in message, message
    written = export(str(root), ["PAtt", "STOSA"], metrics=False)
    assert "recbole/model/sequential_recommender/stosa.py" in written
    recorded = json.loads(open(record).read())["written"]
    assert "recbole/model/sequential_recommender/stosa.py" in recorded
    left = [
        p.name for p in root.rglob(".*") if p.name.endswith((".tmp", "publish.json"))
    ]
    assert not left, left


def test_a_killed_publish_is_finished_by_the_next_one(tmp_path, monkeypatch):
    """Killed between the replacements (no clean-up runs): the plan beside its last
    file is finished first by the next publish of those files, and a plan naming a
    file the publish does not write is refused (a planted one replaces nothing)."""
    import subprocess
    import sys

    from recbole_attn.files import write_files

    paths = [str(tmp_path / f"f{n}.txt") for n in range(3)]
    for path in paths:
        with open(path, "w") as f:
            f.write("old\n")
    script = f"""
import os, sys
sys.path.insert(0, {os.getcwd()!r})
from recbole_attn.files import write_files
real = os.replace
def replace(src, dst):
    if dst == {paths[-1]!r}:
        os._exit(9)  # killed before the last file and the clean-up
    return real(src, dst)
os.replace = replace
write_files({{p: "new\\n" for p in {paths!r}}}, "the export", overwrite=True)
"""
    done = subprocess.run([sys.executable, "-c", script], env={**os.environ})
    assert done.returncode == 9
    assert [open(p).read() for p in paths] == ["new\n", "new\n", "old\n"]
    journal = tmp_path / ".f2.txt.publish.json"
    assert journal.is_file()
    # a publish of other files does not take it; planted targets are refused
    plan = json.loads(journal.read_text())
    planted = dict(plan, files=[[str(tmp_path / "theirs"), *plan["files"][0][1:]]])
    journal.write_text(json.dumps(planted))
    with pytest.raises(RecboleAttnError, match="which this publish does not write"):
        write_files({paths[-1]: "mine\n"}, "the export", overwrite=True)
    assert not (tmp_path / "theirs").exists()
    journal.write_text(json.dumps(plan))
    write_files({paths[-1]: "newer\n"}, "the export", overwrite=True)
    assert [open(p).read() for p in paths] == ["new\n", "new\n", "newer\n"]
    assert sorted(os.listdir(tmp_path)) == ["f0.txt", "f1.txt", "f2.txt"]


def test_a_second_search_into_one_output_stops_before_its_work(
    tiny_data_path, tmp_path, monkeypatch
):
    """The output is claimed when a search starts: a second search into it, started
    while the first runs, stops at once (before: both exited 0 and the one finishing
    last replaced the other's result.json); a failed search leaves no claim."""
    from recbole_attn.commands import tuning
    from recbole_attn.files import ExistingOutputError

    monkeypatch.chdir(tmp_path)
    space = tmp_path / "space.hyper"
    space.write_text("hidden_size choice [8,16]\n")
    output = str(tmp_path / "out")
    config = {
        "data_path": tiny_data_path,
        "load_col": LOAD,
        "epochs": 1,
        "train_batch_size": 16,
        "state": "ERROR",
        **TINY_MODEL,
    }
    original = tuning._search_hyperopt
    inner = []

    def search(into):
        return tuning.tune_model(
            "SASRecAP",
            "tiny",
            str(space),
            config_dict=dict(config),
            tool="hyperopt",
            algo="exhaustive",
            output=into,
        )

    def search_while_another_starts(*args, **kwargs):
        with pytest.raises(
            ExistingOutputError, match="being written by another search"
        ):
            search(output)
        inner.append(True)
        return original(*args, **kwargs)

    monkeypatch.setattr(tuning, "_search_hyperopt", search_while_another_starts)
    result = search(output)
    logging.getLogger().handlers.clear()
    assert inner == [True]
    with open(os.path.join(output, "result.json")) as f:
        assert json.load(f)["best_params"] == result["best_params"]

    def fail(*args, **kwargs):
        raise RuntimeError("a trial failed")

    monkeypatch.setattr(tuning, "_search_hyperopt", fail)
    other = str(tmp_path / "other")
    with pytest.raises(RuntimeError):
        search(other)
    assert not os.path.exists(os.path.join(other, "result.json"))


def _checkout(tmp_path):
    from test_upstream import _fake_checkout

    root = tmp_path / "RecBole"
    _fake_checkout(root)
    (root / ".git").mkdir()  # the record of what was written goes in here
    return root


def test_export_never_undoes_hand_edits_and_writes_all_or_nothing(tmp_path):
    from recbole_attn.upstream.export import export
    from recbole_attn.errors import ExportError

    root = _checkout(tmp_path)
    prs = tmp_path / "prs"
    export(str(root), ["RKSA"], pr_dir=str(prs), metrics=False)
    assert (root / ".git" / "recbole-attn-export.json").is_file()
    model = root / "recbole/model/sequential_recommender/rksa.py"
    exported = model.read_text()
    assert export(
        str(root), ["RKSA"], pr_dir=str(prs), metrics=False
    )  # unchanged: fine
    # 1. a hand edit in a file the export wrote is kept (before: silently reverted)
    model.write_text(exported + "# my fix\n")
    with pytest.raises(ExportError, match="rksa.py was edited since"):
        export(str(root), ["RKSA"], metrics=False)
    assert model.read_text().endswith("# my fix\n")
    # 2. a pull-request description edited by hand is kept
    model.write_text(exported)
    description = prs / "RKSA.md"
    description.write_text("# my words\n")
    with pytest.raises(ExportError, match="RKSA.md exists with other text"):
        export(str(root), ["RKSA"], pr_dir=str(prs), metrics=False)
    assert description.read_text() == "# my words\n"
    # --overwrite replaces both
    model.write_text(exported + "# my fix\n")
    export(str(root), ["RKSA"], pr_dir=str(prs), metrics=False, overwrite=True)
    assert model.read_text() == exported and description.read_text() != "# my words\n"
    # 3. a write that fails leaves the checkout as it was (before: half exported)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the descriptions' folder would be\n")
    with pytest.raises(RecboleAttnError, match="blocked is a file, not a folder"):
        export(str(root), ["STOSA"], pr_dir=str(blocked / "prs"), metrics=False)
    after = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert after == before


# ---------------------------------------------------------------------- 5. one line


def _files(tmp_path):
    """Hostile inputs: binary and latin-1 text, empty and blank files, broken yaml."""
    (tmp_path / "binary.txt").write_bytes(b"\xff\xfe\x00\x01binary\x00")
    (tmp_path / "latin1.txt").write_bytes("u1\nj\xe9r\xf4me\n".encode("latin-1"))
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "blank.txt").write_text("  \n\n")
    (tmp_path / "latin1.yaml").write_bytes("epochs: 1 # d\xe9j\xe0\n".encode("latin-1"))
    (tmp_path / "binary.hyper").write_bytes(b"hidden_size choice [\xff]\n")
    (tmp_path / "folder").mkdir()


def _with_config(model_file, tmp_path, name, change):
    return _rewrite(model_file, tmp_path / name, change)


CASES = {
    # checkpoints that do not say how they were trained
    "no config": (
        lambda t, m, d: [
            "recommend",
            f"--model_file={_with_config(m, t, 'a.pth', lambda c: c.pop('external_config_json'))}",
            f"--output={t / 'o.csv'}",
        ],
        "does not say how its model was trained (no external_config_json entry)",
    ),
    "corrupt config": (
        lambda t, m, d: [
            "evaluate",
            f"--model_file={_with_config(m, t, 'b.pth', lambda c: c.update(external_config_json='{x'))}",
        ],
        "its external_config_json is not JSON",
    ),
    "config of a list": (
        lambda t, m, d: [
            "viz",
            f"--model_file={_with_config(m, t, 'c.pth', lambda c: c.update(external_config_json='[1]'))}",
            "--user=u1",
            f"--output={t / 'plots'}",
        ],
        "its external_config_json is a list",
    ),
    # text that is not UTF-8
    "binary users file": (
        lambda t, m, d: [
            "recommend",
            f"--model_file={m}",
            f"--users_file={t / 'binary.txt'}",
            f"--output={t / 'o.csv'}",
        ],
        "binary.txt is not utf-8 text (byte 0xff at position 0)",
    ),
    "latin-1 users file": (
        lambda t, m, d: [
            "recommend",
            f"--model_file={m}",
            f"--users_file={t / 'latin1.txt'}",
            f"--output={t / 'o.csv'}",
        ],
        "latin1.txt is not utf-8 text (byte 0xe9 at position 4)",
    ),
    "latin-1 yaml": (
        lambda t, m, d: _run_args(d, f"--config_files={t / 'latin1.yaml'}"),
        "config file",
    ),
    "config file is a folder": (
        lambda t, m, d: _run_args(d, f"--config_files={t / 'folder'}"),
        "folder is not a file",
    ),
    "missing config file": (
        lambda t, m, d: _run_args(d, f"--config_files={t / 'absent.yaml'}"),
        "config file not found",
    ),
    "binary params file": (
        lambda t, m, d: ["tune"]
        + _run_args(d, f"--params_file={t / 'binary.hyper'}", "--tool=hyperopt"),
        "params file",
    ),
    # outputs that cannot be written
    "output is a folder": (
        lambda t, m, d: ["recommend", f"--model_file={m}", f"--output={t / 'folder'}"],
        "is a folder; give a file name",
    ),
    "output under a file": (
        lambda t, m, d: [
            "recommend",
            f"--model_file={m}",
            f"--output={t / 'empty.txt' / 'o.csv'}",
        ],
        "empty.txt is a file, not a folder",
    ),
    # values RecBole refuses deep inside
    "RecBole's loss_type": (
        lambda t, m, d: _run_args(d, "--model=SASRec", "--loss_type=bogus"),
        "SASRec cannot be built with these options: Make sure 'loss_type'",
    ),
    # RecBole's own ValueError after the data loaded (issue 53)
    "random order": (
        lambda t, m, d: _run_args(d, "--eval_args={'order': 'RO'}"),
        "eval_args order 'RO' (random order) cannot split a sequential model's data",
    ),
    "evaluate in random order": (
        lambda t, m, d: [
            "evaluate",
            f"--model_file={m}",
            "--eval_args={'order': 'RO'}",
        ],
        "use order 'TO'",
    ),
    # RecBole's models and evaluation modes that failed deep inside (issue 53)
    "labeled with ranking metrics": (
        lambda t, m, d: _run_args(d, "--eval_args={'mode': 'labeled'}"),
        "ranking metrics ['Recall', 'NDCG', 'MRR'] have nothing to rank",
    ),
    "labeled without labels": (
        lambda t, m, d: _run_args(
            d,
            "--eval_args={'mode': 'labeled'}",
            "--metrics=['AUC']",
            "--valid_metric=AUC",
        ),
        "evaluates the interactions' labels, and the data has no label field",
    ),
    "point-wise model without labels": (
        lambda t, m, d: _run_args(d, "--model=FM"),
        "FM trains on labelled interactions",
    ),
    "KD_DAGFM phase": (
        lambda t, m, d: _run_args(d, "--model=KD_DAGFM", "--phase=bogus"),
        "phase must be one of ['teacher_training', 'distillation', 'finetuning']",
    ),
    "DIEN": (
        lambda t, m, d: _run_args(
            d,
            "--model=DIEN",
            "--train_neg_sample_args={'distribution': 'uniform', 'sample_num': 1}",
        ),
        "DIEN trains on RecBole's own DIENDataset",
    ),
    "viz positions 0": (
        lambda t, m, d: [
            "viz",
            f"--model_file={m}",
            "--user=u1",
            "--positions=0",
            f"--output={t / 'plots'}",
        ],
        "positions must be an integer >= 1",
    ),
    # quietly odd before: exit 0 with a header-only file
    "empty users file": (
        lambda t, m, d: [
            "recommend",
            f"--model_file={m}",
            f"--users_file={t / 'empty.txt'}",
            f"--output={t / 'o.csv'}",
        ],
        "names no user",
    ),
    "blank users file": (
        lambda t, m, d: [
            "recommend",
            f"--model_file={m}",
            f"--users_file={t / 'blank.txt'}",
            f"--output={t / 'o.csv'}",
        ],
        "names no user",
    ),
    "blank --users": (
        lambda t, m, d: [
            "recommend",
            f"--model_file={m}",
            "--users= , ",
            f"--output={t / 'o.csv'}",
        ],
        "names no user",
    ),
    "negative batch": (
        lambda t, m, d: [
            "recommend",
            f"--model_file={m}",
            "--batch_size=-5",
            f"--output={t / 'o.csv'}",
        ],
        "batch_size must be an integer >= 1",
    ),
    # a loaded model keeps its model and dataset (before: --dataset ignored, --model
    # taken as --model_file)
    "evaluate --dataset": (
        lambda t, m, d: ["evaluate", f"--model_file={m}", "--dataset=other"],
        "a loaded model keeps its dataset (got --dataset=other)",
    ),
    "evaluate --model": (
        lambda t, m, d: ["evaluate", f"--model={m}"],
        "the following arguments are required: --model_file",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_input_that_reaches_the_code_is_one_line(
    case, trained, tmp_path, monkeypatch, capsys
):
    """Each was a traceback (or an exit 0 with an empty or ignored result) before."""
    result, config = trained
    monkeypatch.chdir(tmp_path)
    _files(tmp_path)
    make_argv, fragment = CASES[case]
    argv = make_argv(tmp_path, result["saved_model_file"], config["data_path"])
    before = sorted(p.name for p in tmp_path.rglob("*") if p.suffix == ".csv")
    code, err = main(argv, capsys)
    _one_line(code, err, fragment)
    assert sorted(p.name for p in tmp_path.rglob("*") if p.suffix == ".csv") == before


def test_a_user_named_twice_gets_one_list(trained, tmp_path, monkeypatch, capsys):
    from recbole_attn.commands.recommend import recommend

    result, _ = trained
    monkeypatch.chdir(tmp_path)
    rows = recommend(result["saved_model_file"], k=3, users=["u1", "u2", "u1"])["rows"]
    logging.getLogger().handlers.clear()
    assert [(r[0], r[1]) for r in rows] == [
        (u, k) for u in ("u1", "u2") for k in (1, 2, 3)
    ]


def test_a_full_disk_under_the_checkpoint_folder_is_one_line(
    trained, tmp_path, monkeypatch, capsys
):
    import errno

    from recbole_attn.engine import checkpoint

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(checkpoint.torch, "save", full)
    monkeypatch.chdir(tmp_path)
    code, err = main(_run_args(trained[1]["data_path"]), capsys)
    _one_line(code, err, "cannot write the checkpoint")
    assert "(No space left on device: the disk is full); free space under" in err
    assert not [p for p in tmp_path.rglob("*.tmp*")], "no temporary file left"


def test_evaluate_and_recommend_write_nothing_but_their_output(
    trained, tmp_path, monkeypatch, capsys
):
    """Before: log/, log_tensorboard/, saved/ (and a 0-byte .pth when loading failed)
    in the working folder, which therefore had to be writable."""
    result, _ = trained
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    model_file = result["saved_model_file"]
    code, err = main(["evaluate", f"--model_file={model_file}"], capsys)
    assert code == 0, err
    out = tmp_path / "out.csv"
    code, err = main(
        ["recommend", f"--model_file={model_file}", f"--output={out}"], capsys
    )
    assert code == 0, err
    code, err = main(["evaluate", f"--model_file={model_file}", "--topk=[999]"], capsys)
    assert code == 2, err  # a load that fails
    logging.getLogger().handlers.clear()
    assert list(work.iterdir()) == []
    assert out.is_file()
    saved = os.path.dirname(model_file)
    assert sorted(os.listdir(saved)) == sorted(
        os.path.basename(p) for p in (model_file, model_file[:-4] + "-last.pth")
    )


def test_a_loaded_checkpoints_trainer_refuses_to_train(trained, tmp_path):
    """fit on the trainer of load_data_and_model trained and saved its best model over
    the loaded checkpoint (the trainer's model file; c5c6267), then failed with an
    AttributeError (no optimizer); now one clear error, and the checkpoint unchanged."""
    from recbole_attn.errors import TrainingError
    from recbole_attn.engine.quick_start import load_data_and_model

    model_file = tmp_path / "copy.pth"
    shutil.copy(trained[0]["saved_model_file"], model_file)
    before = model_file.read_bytes()
    _, _, trainer, (train, valid, _) = load_data_and_model(str(model_file))
    logging.getLogger().handlers.clear()
    for attempt in (
        lambda: trainer.fit(train, valid),
        lambda: trainer.resume_checkpoint(str(model_file)),
    ):
        with pytest.raises(TrainingError, match="--resume_checkpoint="):
            attempt()
    assert model_file.read_bytes() == before


# ---------------------------------------------------------------------- 1. no hang (Ray)


def _server(reply):
    """A local TCP server that accepts one connection and sends ``reply`` (b"": says
    nothing and keeps the connection open); its port."""
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def serve():
        conn, _ = server.accept()
        if reply:
            conn.sendall(reply)
        conn.recv(1024)
        threading.Event().wait(5)
        conn.close()
        server.close()

    threading.Thread(target=serve, daemon=True).start()
    return server.getsockname()[1]


def test_a_ray_address_that_is_not_a_ray_head_is_refused_at_once(tmp_path):
    """A port that accepts and never answers hung the search forever (the pre-check
    only connected) and left an empty output folder."""
    import time

    from recbole_attn.commands.tuning import tune_model
    from recbole_attn.commands.tuning.ray_search import check_ray_address

    space = tmp_path / "space.hyper"
    space.write_text("hidden_size choice [8,16]\n")
    started = time.monotonic()
    with pytest.raises(RecboleAttnError, match="accepts connections but is not a Ray"):
        tune_model(
            "SASRecAP",
            "tiny",
            str(space),
            ray_address=f"127.0.0.1:{_server(b'')}",
            output=str(tmp_path / "out"),
        )
    assert time.monotonic() - started < 30
    assert not (tmp_path / "out").exists()
    with pytest.raises(RecboleAttnError, match="not gRPC"):
        check_ray_address(f"127.0.0.1:{_server(b'HTTP/1.1 400 Bad Request')}")
    # what a gRPC server (a Ray head's GCS) sends first: a SETTINGS frame
    check_ray_address(f"127.0.0.1:{_server(bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))}")


# ---------------------------------------------------------------------- 4. memory


def test_a_run_that_cannot_fit_the_machine_stops_before_it_starts(
    trained, tmp_path, monkeypatch, capsys
):
    """RecBole's SASRec at T 10000 on a tiny dataset climbed to 20 GB and was killed
    (exit 137, a 0-byte checkpoint left)."""
    monkeypatch.chdir(tmp_path)
    code, err = main(
        _run_args(
            trained[1]["data_path"], "--model=SASRec", "--MAX_ITEM_LIST_LENGTH=10000"
        ),
        capsys,
    )
    _one_line(code, err, "SASRec with these options needs at least")
    assert "available: lower MAX_ITEM_LIST_LENGTH or " in err
    assert not list(tmp_path.glob("saved/*")), "no checkpoint left"
    # our models too, against the memory the machine reports
    from recbole_attn.engine import memory

    monkeypatch.setattr(memory, "available_bytes", lambda device: 1000)
    code, err = main(_run_args(trained[1]["data_path"]), capsys)
    _one_line(code, err, "SASRecAP with these options needs at least")
    assert "this machine has 0.0 GB available" in err


def test_the_memory_estimate_is_a_lower_bound_of_what_a_training_step_holds(
    tiny_config,
):
    """The attention maps a real training step keeps for its backward pass (every
    saved tensor of shape [..., T, T]) are at least the estimate's share of them."""
    from recbole_attn.engine.memory import estimate
    from recbole_attn.engine.quick_start import build

    from experiments.research import RESEARCH_MODELS

    T = 40  # batches at full length (the research wing's trim_batch: False)
    config, net, _, (train, _, _) = build(
        RESEARCH_MODELS["SASRecAP"],
        "tiny",
        config_dict={**tiny_config, "MAX_ITEM_LIST_LENGTH": T, "trim_batch": False},
    )
    logging.getLogger().handlers.clear()
    batch = next(iter(train))
    users = len(batch[net.ITEM_SEQ])
    saved = []

    def pack(tensor):
        if tensor.dim() >= 2 and tuple(tensor.shape[-2:]) == (T, T):
            saved.append(tensor.numel() * tensor.element_size())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        net.calculate_loss(batch)
    step = {**dict(config.final_config_dict), "train_batch_size": users}
    _, parts = estimate(step, net.n_items, 10**9, True)
    layers = config["n_layers"]
    float_maps = sum(s for s in saved if s % 4 == 0)
    assert float_maps >= parts["training attention"] * layers / (layers + 1)

    # a loaded checkpoint is only evaluated: the training share does not count
    from recbole_attn.errors import ConfigError
    from recbole_attn.engine.memory import check_memory

    dataset = train._dataset
    small_eval = {**dict(config.final_config_dict), "eval_batch_size": 4}
    need, parts = estimate(
        small_eval, dataset.item_num, len(dataset.inter_feat), True, dataset.user_num, T
    )
    evaluation = sum(v for k, v in parts.items() if k.startswith("evaluation"))
    assert evaluation < need
    between = (evaluation + need) / 2 / 0.9
    with pytest.raises(ConfigError, match="needs at least"):
        check_memory(small_eval, dataset, type(net), available=between)
    check_memory(small_eval, dataset, type(net), available=between, training=False)


# ---------------------------------------------------------------------- 6. several processes


def test_metrics_over_several_processes_are_the_mean_over_all_users():
    """Before: each process rounded its mean, and RecBole averaged the rounded values
    weighted by batches (0.2334 for 30 users)."""
    from recbole_attn.engine.distributed import combine_results

    rng = np.random.default_rng(0)
    for _ in range(100):
        hits = rng.integers(0, 2, size=rng.integers(2, 60)).astype(float)
        cut = int(rng.integers(1, len(hits)))
        parts = [hits[:cut], hits[cut:]]
        got = combine_results([(len(p), {"hit@10": float(p.mean())}) for p in parts], 4)
        assert got == {"hit@10": round(float(hits.mean()), 4)}
    # the case: 7 hits of 30 users, split 16 / 14
    got = combine_results([(16, {"r": 4 / 16}), (14, {"r": 3 / 14})], 4)
    assert got == {"r": 0.2333}


@pytest.mark.parametrize(
    "processes",
    [["--nproc=2"], ["--nproc=1", "--world_size=2"]],
    ids=["two here", "one here of two"],
)
def test_f1_over_several_processes_is_refused(
    trained, tmp_path, monkeypatch, capsys, processes
):
    """Refused before any process starts, whether the processes are on this machine
    or one of them is (the other on another machine)."""
    import torch.multiprocessing as mp

    def refuse(*args, **kwargs):
        raise AssertionError("processes were started")

    monkeypatch.setattr(mp, "spawn", refuse)
    monkeypatch.chdir(tmp_path)
    code, err = main(
        _run_args(
            trained[1]["data_path"],
            *processes,
            "--metrics=['Recall','NDCG','ILD','F1']",
        ),
        capsys,
    )
    _one_line(code, err, "F1 cannot be computed over several processes")


def test_several_processes_check_the_run_before_they_start(
    trained, tmp_path, monkeypatch, capsys
):
    """A dataset that is not there, with --nproc=2: one line from the command, before any
    process starts (each would fail with its traceback)."""
    import torch.multiprocessing as mp

    def refuse(*args, **kwargs):
        raise AssertionError("processes were started")

    monkeypatch.setattr(mp, "spawn", refuse)
    monkeypatch.chdir(tmp_path)
    code, err = main(
        _run_args(trained[1]["data_path"], "--nproc=2", "--dataset=nowhere"), capsys
    )
    _one_line(code, err, "dataset 'nowhere' not found")


def test_an_atomic_file_that_is_not_utf8_is_one_line(
    trained, tmp_path, monkeypatch, capsys
):
    _, config = trained
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "data" / "tiny"
    shutil.copytree(os.path.join(config["data_path"], "tiny"), target)
    inter = target / "tiny.inter"
    text = inter.read_text().splitlines()
    text[3] = text[3].replace("i", "\xe9", 1)  # an item token with an accent
    inter.write_bytes(("\n".join(text) + "\n").encode("latin-1"))
    code, err = main(
        _run_args(trained[1]["data_path"], f"--data_path={tmp_path / 'data'}"), capsys
    )
    _one_line(code, err, "tiny.inter is not utf-8 text (byte 0xe9 at position")
    assert "--encoding=latin-1" in err
    # naming its encoding reads it
    code, err = main(
        _run_args(
            trained[1]["data_path"],
            f"--data_path={tmp_path / 'data'}",
            "--encoding=latin-1",
        ),
        capsys,
    )
    assert code == 0, err
