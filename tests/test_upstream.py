"""The RecBole export (``recbole-attn export-upstream``, :mod:`recbole_attn.upstream`).

* The exported files import only the standard library, torch, numpy, scipy and RecBole,
  and are what black writes.
* Every exported model, loaded with our model's ``state_dict``, gives our
  ``full_sort_predict`` and ``predict`` in float64 (1e-10) and the same training loss
  under the same seed, on a copy of the installed RecBole with the export written into
  it: the export cannot drift from our code.
* The exported CC, ILD and F1 give our values, and the exported collector function our
  item→category table, on the same copy.
* The export into a RecBole checkout adds each file and entry once, rewrites its own files
  on a second run, and refuses a file it did not write.
* RecBole's own ``tests/model/test_model_auto.py`` (our cases and its sequential models)
  and ``tests/metrics`` in a RecBole checkout: needs a checkout and a Python environment
  where RecBole 1.2.1 runs unpatched (numpy < 2, pandas < 3, ray <= 2.6.3): set
  ``RECBOLE_CHECKOUT`` and ``RECBOLE_PYTHON`` (docs/upstream.md); skipped otherwise.
"""

import ast
import datetime
import json
import os
import shutil
import subprocess
import sys

import pytest
import recbole

from recbole_attn.upstream import metric_files
from recbole_attn.upstream.export import export, planned_files
from recbole_attn.errors import ExportError
from recbole_attn.upstream.models import MODELS
from recbole_attn.upstream.recbole_files import (
    recbole_test_cases,
    recbole_test_methods,
)
from recbole_attn.upstream.sources import model_file, own_paths, python_files

from conftest import TINY_MODEL

HERE = os.path.dirname(os.path.abspath(__file__))
ALLOWED_TOP_LEVEL = {"torch", "numpy", "scipy", "recbole"} | set(
    sys.stdlib_module_names
)


@pytest.fixture(scope="module")
def files():
    return python_files()


def test_exported_files_import_only_recbole_and_torch(files):
    """Each model file of ours imports torch, numpy, scipy, RecBole and the model files
    it builds on: exported, only RecBole's tree."""
    assert set(files) == {model_file(name) for name in MODELS}
    for path, text in files.items():
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                tops = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                tops = [node.module.split(".")[0]]
            else:
                continue
            assert set(tops) <= ALLOWED_TOP_LEVEL, (path, ast.unparse(node))
        assert "recbole_attn" not in text, path


@pytest.mark.parametrize(
    "package, files",
    [("model", None), ("evaluator", list(metric_files.EVALUATOR_MODULES))],
)
def test_our_model_and_metric_files_stand_alone(package, files):
    """The files of recbole_attn.model, and the evaluator files RecBole gets, import
    nothing of the plugin: the export copies them (another of the same folder's files is
    the one exception, RecBole's tree has it)."""
    folder = os.path.join(os.path.dirname(HERE), "recbole_attn", package)
    names = [f"{name}.py" for name in files] if files else os.listdir(folder)
    assert names
    for name in names:
        if not name.endswith(".py") or name == "__init__.py":
            continue
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module.startswith("recbole_"):
                assert node.module.startswith(f"recbole_attn.{package}."), (
                    name,
                    node.module,
                )
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                module = node.module if isinstance(node, ast.ImportFrom) else None
                tops = [module] if module else [a.name for a in node.names]
                for top in tops:
                    assert top.split(".")[0] in ALLOWED_TOP_LEVEL, (name, top)


def test_exported_files_are_black_formatted(files):
    import black

    for path, text in files.items():
        assert black.format_str(text, mode=black.Mode()) == text, path


def test_each_model_is_a_recbole_model_of_its_own_file(files):
    """Every exported class is a SequentialRecommender (or another exported model:
    DPAtt of PAtt, FPARec of PARec), in the file RecBole looks it up in; no file defines
    a second model; the pull requests stay small (STOSA's at most 600 lines, all seven
    at most 3,000)."""
    for name in MODELS:
        tree = ast.parse(files[model_file(name)])
        classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        assert model_file(name).endswith(f"/{name.lower()}.py")
        assert not (set(classes) - {name}) & set(MODELS), (name, list(classes))
        bases = [ast.unparse(b) for b in classes[name].bases]
        assert bases in (["SequentialRecommender"], ["PAtt"], ["PARec"]), (name, bases)
    lines = {name: files[model_file(name)].count("\n") for name in MODELS}
    assert lines["STOSA"] <= 600 and sum(lines.values()) <= 3000, lines
    _, stosa = planned_files(["STOSA"])
    python = [p for p in stosa if p.endswith(".py")]
    assert python == [model_file("STOSA")]


def test_the_exported_yaml_has_every_default_our_config_gives(files):
    """Every key the exported code reads and our Config gives the model (overall.yaml and
    the model's yaml files) is in the exported yaml, unless RecBole's Config reads it from
    a file after the model's yaml or from overall.yaml (which no model yaml of RecBole
    sets): of those, the docs page gives the ones the model's own yaml sets here
    (STOSA's T = 100, its training budget) as settings of the user's."""
    import yaml

    from recbole_attn.engine.config import config_files, properties_dir
    from recbole_attn.plugin import get_model_class
    from recbole_attn.upstream.recbole_files import settings_text
    from recbole_attn.upstream.sources import model_sources
    from recbole_attn.upstream.yaml_files import (
        _read_keys,
        keys_a_model_yaml_cannot_set,
        model_yaml,
        reproduction_settings,
    )

    cannot = keys_a_model_yaml_cannot_set()
    assert {"MAX_ITEM_LIST_LENGTH", "epochs", "stopping_step"} <= cannot
    assert not {"n_layers", "loss_type", "hidden_size"} & cannot
    for name in MODELS:
        with open(os.path.join(properties_dir(), "model", f"{name}.yaml")) as f:
            own = yaml.safe_load(f)
        ours = {}
        for path in config_files(get_model_class(name), "", options=own):
            with open(path) as f:
                ours.update(yaml.safe_load(f) or {})
        read = set(_read_keys(model_sources(files, name)))
        exported = yaml.safe_load(model_yaml(name, files))
        # RecBole refuses a sequential model under CE with negatives: None there only
        assert ("train_neg_sample_args" in exported) == (exported["loss_type"] == "CE")
        assert exported.pop("train_neg_sample_args", None) is None
        assert not set(exported) & cannot, name
        assert not (read & set(ours)) - cannot - set(exported), name
        assert all(exported[k] == ours[k] for k in exported if k in ours), name
        settings = reproduction_settings(name)
        # the plugin's values for the model, each a key RecBole reads after its yaml
        assert all(ours[k] == v for k, v in settings.items()), name
        assert set(settings) <= cannot
        text = settings_text(name, files)
        assert all(f"   {k}: " in text for k in settings), name
    assert reproduction_settings("STOSA")["MAX_ITEM_LIST_LENGTH"] == 100
    assert reproduction_settings("PAtt")["MAX_ITEM_LIST_LENGTH"] == 30


def test_the_exported_yaml_lists_only_the_losses_the_model_accepts(files):
    """``loss_type``'s comment names the losses the exported file's check accepts (no
    SSM, which is the plugin's; no BCE for STOSA), and the default is one of them."""
    import yaml

    from recbole_attn.upstream.yaml_files import accepted_losses, model_yaml

    for name in MODELS:
        text = model_yaml(name, files)
        accepted = accepted_losses(name, files)
        assert "SSM" not in text and "SSM" not in accepted, name
        assert yaml.safe_load(text)["loss_type"] in accepted, name
        assert f"Range in {accepted}." in text, name
    assert "BCE" not in accepted_losses("STOSA", files)


def _case_options(options):
    """A RecBole test case's options on our fixture, whose item file has the categories
    in ``categories`` (RecBole's test data: ``class``)."""
    out = {k: v for k, v in options.items() if k != "category_field"}
    if "category_field" in options:
        out["load_col"] = {
            "inter": ["user_id", "item_id", "timestamp"],
            "item": ["item_id", "categories"],
        }
    return out


@pytest.fixture(scope="module")
def patched_recbole(tmp_path_factory, files):
    """A copy of the installed RecBole package with the export of every model (its file
    and yaml) and of the metrics written into it."""
    root = tmp_path_factory.mktemp("upstream")
    shutil.copytree(
        os.path.dirname(recbole.__file__),
        root / "recbole",
        ignore=shutil.ignore_patterns("__pycache__", "dataset_example"),
    )

    def read(path):
        return (root / path).read_text() if (root / path).is_file() else None

    written, _ = metric_files.metric_files(read)
    written.update(planned_files()[1])
    for path, text in written.items():
        if path.startswith("recbole/"):
            (root / path).write_text(text, encoding="utf-8")
    return root


def _run_in_patched(patched_recbole, script, data_path, payload, cwd, timeout):
    """Run tests/<script> with the patched RecBole first on the path (a fresh process: the
    installed RecBole stays out of it); return the JSON its last line prints."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(patched_recbole), HERE]))
    done = subprocess.run(
        [sys.executable, os.path.join(HERE, script), data_path, json.dumps(payload)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_key_of_the_exported_yaml_takes_effect_in_recbole_config(
    patched_recbole, tmp_path
):
    """RecBole's own Config (a fresh process that never imports recbole_attn, so none of
    its hooks), built for every exported model on a dataset RecBole has a yaml for
    (ml-100k) and on one it has not, has every key of the exported yaml at the yaml's
    value: no key of the yaml is replaced by a file RecBole reads later (sample.yaml's
    MAX_ITEM_LIST_LENGTH, a dataset's yaml, the quick-start settings)."""
    env = dict(os.environ, PYTHONPATH=str(patched_recbole))
    payload = {"models": list(MODELS), "datasets": ["ml-100k", "no-such-dataset"]}
    done = subprocess.run(
        [sys.executable, os.path.join(HERE, "upstream_config.py"), json.dumps(payload)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report.pop("recbole").startswith(str(patched_recbole))
    assert len(report) == 2 * len(MODELS)
    for case, keys in report.items():
        assert keys, case
        wrong = {k: v for k, v in keys.items() if v[0] != v[1]}
        assert not wrong, (case, wrong)


def _docs_pages():
    """``{model: the text of its exported docs page}``."""
    _, planned = planned_files()
    return {name: planned[own_paths(name)[2]] for name in MODELS}


def _docs_examples(python, cwd, env, pages, run=None, timeout=600):
    """Run tests/upstream_docs_examples.py on the ``pages``; its report."""
    payload = cwd / "pages.json"
    payload.write_text(json.dumps(pages), encoding="utf-8")
    script = os.path.join(HERE, "upstream_docs_examples.py")
    done = subprocess.run(
        [python, script, str(payload), *(["--run", str(run)] if run else [])],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-4000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_docs_page_config_holds_in_recbole_config(patched_recbole, tmp_path):
    """Every configuration block and ``run_recbole`` example of the exported docs
    pages, and every value of their ``hyper.test``, in RecBole's own Config (a process
    that never imports recbole_attn): each builds, holds the block's values, and its
    ``valid_metric`` is one RecBole's validation computes (its K in ``topk``, its name
    in ``metrics``): STOSA's MRR@20 and PAtt's NDCG@20 come with ``topk: [10, 20]``,
    DPAtt's example loads ml-100k's ``class`` genres as its category field."""
    env = dict(os.environ, PYTHONPATH=str(patched_recbole))
    report = _docs_examples(sys.executable, tmp_path, env, _docs_pages())
    assert sorted(report) == sorted(MODELS)
    for name, checked in report.items():
        assert checked["examples"] == 1, name
        assert "learning_rate" in checked["hyper"], name
    assert report["STOSA"]["blocks"] == report["PAtt"]["blocks"] == 1
    assert report["DPAtt"]["blocks"] == 2  # the reproduction and hyper.test's config


@pytest.mark.slow
@pytest.mark.skipif(
    not (os.environ.get("RECBOLE_CHECKOUT") and os.environ.get("RECBOLE_PYTHON")),
    reason="RecBole's own pipeline alone needs a RecBole checkout (RECBOLE_CHECKOUT) "
    "and a Python of RecBole's stack (RECBOLE_PYTHON); docs/upstream.md",
)
def test_every_docs_page_example_runs_in_recbole(tmp_path):
    """The exported docs pages' ``run_recbole`` examples, alone and with each of the
    page's configuration blocks, train for one epoch, validate and test under RecBole's
    own ``run_recbole`` in a RecBole checkout with the export of every model and no
    recbole_attn, on a small dataset in ml-100k's files (its ``class`` genres)."""
    checkout = tmp_path / "RecBole"
    shutil.copytree(
        os.environ["RECBOLE_CHECKOUT"], checkout, ignore=shutil.ignore_patterns(".git")
    )
    export(str(checkout), metrics=False)
    env = dict(os.environ, PYTHONPATH=str(checkout))
    pages = {
        name: (checkout / own_paths(name)[2]).read_text(encoding="utf-8")
        for name in MODELS
    }
    assert pages == _docs_pages()
    report = _docs_examples(
        os.environ["RECBOLE_PYTHON"], checkout, env, pages, tmp_path / "data", 1800
    )
    for name, checked in report.items():
        assert len(checked["runs"]) == 1 + checked["blocks"], name
        for run in checked["runs"]:
            assert run["test"], (name, run)


def _recbole_training(name, options):
    """The options under which our model trains RecBole's way: RecBole's prefix samples,
    and RecBole's negatives where the model's loss samples them."""
    from recbole_attn.plugin import get_model_class
    from recbole_attn.upstream.models import RECBOLE_NEGATIVES

    loss = options.get("loss_type")
    if loss is None:  # the model's default (AWRSR: its SASRec backbone's, CE)
        declared = [vars(c).get("defaults", {}) for c in get_model_class(name).__mro__]
        loss = next((d["loss_type"] for d in declared if "loss_type" in d), "CE")
        loss = getattr(loss, "value", loss)
    negatives = None if loss == "CE" else RECBOLE_NEGATIVES
    # under CE the model files train without the terms that need sampled negatives
    # (STOSA's pvn hinge: RecBole gives a CE model none); ours adds them with its own,
    # and equals the file where they weigh nothing
    unsampled = {"pvn_weight": 0.0} if loss == "CE" and name == "STOSA" else {}
    # and one length group: RKSA's skew-normal draw (eq. 13) is shaped by the rows a
    # group holds, so the file's one batch is drawn as ours only ungrouped
    ungrouped = {"length_groups": 1} if loss == "CE" else {}
    return {
        "training_mode": "last_position",
        "train_neg_sample_args": negatives,
        **unsampled,
        **ungrouped,
        # under CE the plugin trains with its own trimmed, length-grouped batches, whose
        # dropout masks are drawn on other shapes: equal losses need no dropout
        "hidden_dropout_prob": 0.0,
        "attn_dropout_prob": 0.0,
        **options,
    }


@pytest.mark.slow
def test_exported_models_equal_ours(patched_recbole, tiny_data_path, tmp_path):
    cases = [
        [
            name,
            {
                **TINY_MODEL,
                "state": "ERROR",
                "epochs": 1,
                **_recbole_training(name, _case_options(options)),
            },
        ]
        for name, model in MODELS.items()
        for options in model.cases.values()
    ]
    report = _run_in_patched(
        patched_recbole, "upstream_equivalence.py", tiny_data_path, cases, tmp_path, 600
    )
    assert len(report) == len(cases)
    for row in report:
        # the exported class, not ours, from the patched copy
        assert row["file"].startswith(str(patched_recbole)), row
        assert row["scores_finite"], row
        assert row["full_sort_max_diff"] <= 1e-10, row
        assert row["predict_checked"] and row["predict_max_diff"] <= 1e-10, row
        ours, theirs = row["loss"]
        assert abs(ours - theirs) <= 1e-9 * max(1.0, abs(ours)), row
        assert row["weights_max_diff"] <= 1e-9, row


@pytest.mark.slow
def test_exported_metrics_equal_ours(patched_recbole, tiny_data_path, tmp_path):
    options = {
        **TINY_MODEL,
        "state": "ERROR",
        "metrics": ["Recall", "CC"],
        "valid_metric": "Recall@10",
        **_case_options({"category_field": "categories"}),
    }
    report = _run_in_patched(
        patched_recbole,
        "upstream_metrics_equivalence.py",
        tiny_data_path,
        options,
        tmp_path,
        300,
    )
    # RecBole's classes and collector, from the patched copy
    assert report["file"].startswith(str(patched_recbole))
    assert report["collector_file"].startswith(str(patched_recbole))
    assert report["theirs"] == report["ours"]
    assert set(report["ours"]) == {
        "CC",
        "ILD cosine",
        "ILD jaccard",
        "AccDivF1",
        "AccDivF1 NDCG/CC",
    }
    # values in [0, 1], none trivial at K = 10 (at K = 1 ILD has no pair: 0)
    assert all(0 <= v <= 1 for r in report["ours"].values() for v in r.values())
    assert all(0 < max(r.values()) < 1 for r in report["ours"].values())
    assert report["table_equal"] and report["table_categories"] > 0


def test_metric_export_keeps_recbole_lines_and_adds_its_own_once(tmp_path):
    root = tmp_path / "RecBole"
    _fake_checkout(root)
    edited = [*metric_files.EVALUATOR_FILES, metric_files.OVERALL]
    before = {p: (root / p).read_text() for p in edited}
    written = export(str(root), [])
    assert sorted(written) == sorted([metric_files.TEST_FILE, *edited])
    after = {p: (root / p).read_text() for p in edited}
    for path, text in after.items():
        # every line of RecBole's file is still there, in order
        lines = iter(text.splitlines())
        assert all(line in lines for line in before[path].splitlines()), path
        assert "recbole_attn" not in text and "regenerate" not in text, path
    metrics = after["recbole/evaluator/metrics.py"]
    assert all(f"\nclass {n}(" in metrics for n in metric_files.METRIC_NAMES)
    assert "class F1(" not in metrics
    assert "class CategoryMetric(" in after["recbole/evaluator/base_metric.py"]
    collector = after["recbole/evaluator/collector.py"]
    assert collector.count("collected_item_categories(self.config") == 1
    # the collector gets the table, not the plugin's hints on the dataset's files
    assert "def collected_item_categories(" in collector
    assert (
        "missing_field_hint" not in collector and "load_col does not" not in collector
    )
    import yaml

    overall = yaml.safe_load(after[metric_files.OVERALL])
    from recbole_attn.evaluator import METRIC_DEFAULTS

    assert {k: overall[k] for k in METRIC_DEFAULTS} == METRIC_DEFAULTS
    export(str(root), [])
    again = {p: (root / p).read_text() for p in edited}
    assert again == after  # a second export adds nothing twice
    test = (root / metric_files.TEST_FILE).read_text()
    assert "recbole_attn" not in test
    compile(test, "test_category_metrics.py", "exec")


def test_a_later_export_replaces_what_an_earlier_one_wrote_and_refuses_hand_edits(
    tmp_path,
):
    """Recognised by content: the definitions an earlier export added to RecBole's
    evaluator files (recorded in the checkout's .git folder, not in the files) are
    replaced by the current ones; definitions of those names edited by hand, a test
    case edited by hand or a hand-edited import of the model stop the export with one
    line, and nothing is written."""
    root = tmp_path / "RecBole"
    _fake_checkout(root)
    (root / ".git").mkdir()
    export(str(root), ["RKSA"])
    manifest = json.loads((root / ".git" / "recbole-attn-export.json").read_text())
    assert "recbole/evaluator/metrics.py" in manifest["blocks"]
    assert "test_rksa" in manifest["methods"]
    # an earlier export's text (as if the metrics had changed since)
    path = root / "recbole/evaluator/metrics.py"
    old = manifest["blocks"]["recbole/evaluator/metrics.py"]
    older = old.replace("Category coverage", "Category coverage (old)")
    path.write_text(path.read_text().replace(old, older))
    manifest["blocks"]["recbole/evaluator/metrics.py"] = older
    (root / ".git" / "recbole-attn-export.json").write_text(json.dumps(manifest))
    export(str(root), ["RKSA"])
    assert "(old)" not in path.read_text() and path.read_text().count("class CC(") == 1
    # hand edits
    edits = {
        "recbole/evaluator/metrics.py": ("Category coverage", "Coverage, edited"),
        "tests/model/test_model_auto.py": (
            '"model": "RKSA",',
            '"model": "RKSA", 1: 2,',
        ),
        "recbole/model/sequential_recommender/__init__.py": (
            "from recbole.model.sequential_recommender.rksa import RKSA",
            "from .rksa import RKSA",
        ),
    }
    for file, (a, b) in edits.items():
        text = (root / file).read_text()
        (root / file).write_text(text.replace(a, b))
        state = {p: p.read_text() for p in root.rglob("*") if p.is_file()}
        with pytest.raises(ExportError, match="by hand"):
            export(str(root), ["RKSA"])
        assert {p: p.read_text() for p in root.rglob("*") if p.is_file()} == state
        (root / file).write_text(text)
    export(str(root), ["RKSA"])


def test_metric_docs_list_the_metrics_and_their_options_once():
    page = (
        "  Ranking-based     Recall, MRR, NDCG\n  value-based       AUC\n\n"
        "- ``metric_decimal_place(int)``: The decimal place. Defaults to ``4``.\n"
        "- ``other``: x\n"
    )
    once = metric_files.add_docs(page)
    assert "Ranking-based     Recall, MRR, NDCG, CC, ILD, AccDivF1\n" in once
    assert once.index("metric_decimal_place") < once.index("``category_field (str)``")
    assert once.index("``category_field (str)``") < once.index("``other``")
    assert metric_files.add_docs(once) == once


# ---------------------------------------------------------------------- into a checkout
_FAKE_TESTS = (
    "import unittest\n\n\nclass TestSequentialRecommender(unittest.TestCase):\n"
    "    def test_sasrec(self):\n        quick_test({'model': 'SASRec'})\n\n\n"
    "class TestKnowledgeRecommender(unittest.TestCase):\n    pass\n"
)


def _fake_checkout(root):
    """The RecBole files the export reads or extends, in RecBole's layout and style."""
    (root / "recbole/model/sequential_recommender").mkdir(parents=True)
    (root / "recbole/properties/model").mkdir(parents=True)
    (root / "tests/model").mkdir(parents=True)
    (root / "asset").mkdir()
    (root / "docs/source/user_guide").mkdir(parents=True)
    (root / "recbole/model/sequential_recommender/__init__.py").write_text(
        "from recbole.model.sequential_recommender.sasrec import SASRec\n"
    )
    (root / "tests/model/test_model_auto.py").write_text(_FAKE_TESTS)
    (root / "asset/model_list.json").write_text(
        '{\n  "data": [\n      {\n          "model": "SASRec"\n      }\n  ]\n}\n'
    )
    (root / "docs/source/user_guide/model_intro.rst").write_text(
        "We implement 94 recommendation models covering general recommendation,\n\n"
        ".. toctree::\n   :maxdepth: 1\n\n   model/sequential/sasrec\n\n"
        "Knowledge-based Recommendation\n"
    )
    (root / "README.md").write_text(
        "Our library includes 94 recommendation algorithms, covering four\n\n"
        "+ We implement 94 commonly used recommendation algorithms, and provide\n"
    )
    # RecBole's evaluator files and overall.yaml, as the installed RecBole has them
    for path in [*metric_files.EVALUATOR_FILES, metric_files.OVERALL]:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(
            os.path.join(os.path.dirname(recbole.__file__), path[8:]), root / path
        )


@pytest.mark.slow
def test_export_into_a_checkout_adds_once_and_rewrites_its_own(tmp_path):
    root = tmp_path / "RecBole"
    _fake_checkout(root)
    written = export(str(root), ["STOSA", "DPAtt"], pr_dir=str(tmp_path / "prs"))
    assert "recbole/model/sequential_recommender/stosa.py" in written
    # DPAtt's file imports PAtt's: PAtt comes with it
    assert "recbole/model/sequential_recommender/patt.py" in written
    assert "recbole/model/sequential_recommender/awrsr.py" not in written
    snapshot = {p: (root / p).read_text() for p in written}
    again = export(str(root), ["STOSA", "DPAtt"])
    # the rerun rewrites its own files; RecBole's count of its models, already raised
    # by the three models new to it, is left alone (and not raised twice)
    assert [p for p in written if p != "README.md"] == again
    assert {p: (root / p).read_text() for p in written} == snapshot  # idempotent
    readme = (root / "README.md").read_text()
    assert "includes 97 recommendation" in readme and "implement 97 commonly" in readme

    init = (root / "recbole/model/sequential_recommender/__init__.py").read_text()
    assert init.count("import STOSA") == 1 and "import SASRec" in init
    tests = (root / "tests/model/test_model_auto.py").read_text()
    assert tests.count("def test_stosa(self)") == 1
    assert tests.count("def test_dpatt(self)") == 1
    # inside TestSequentialRecommender, before the next class
    assert (
        tests.index("class TestSequentialRecommender")
        < tests.index("def test_stosa(self)")
        < tests.index("class TestKnowledgeRecommender")
    )
    compile(tests, "test_model_auto.py", "exec")
    entries = json.loads((root / "asset/model_list.json").read_text())["data"]
    assert [e["model"] for e in entries] == ["SASRec", "STOSA", "PAtt", "DPAtt"]
    intro = (root / "docs/source/user_guide/model_intro.rst").read_text()
    assert "   model/sequential/sasrec\n   model/sequential/stosa\n" in intro

    import yaml

    stosa = yaml.safe_load((root / "recbole/properties/model/STOSA.yaml").read_text())
    # BPR on RecBole's negatives (its default sampler)
    assert "train_neg_sample_args" not in stosa and stosa["loss_type"] == "BPR"
    # the keys of ours the model file reads come with it; the plugin's do not
    assert stosa["position_alignment"] == "last" and stosa["pvn_weight"] == 0.005
    assert not {"training_mode", "length_groups", "neg_exclude_seen"} & set(stosa)
    patt = yaml.safe_load((root / "recbole/properties/model/PAtt.yaml").read_text())
    assert patt["loss_type"] == "BCE" and "train_neg_sample_args" not in patt
    # what RecBole reads after a model's yaml, and its training settings, are not in it
    for key in ("MAX_ITEM_LIST_LENGTH", "epochs", "stopping_step", "valid_metric"):
        assert key not in stosa and key not in patt
    assert "load_col" not in stosa
    # the docs page says how to set the paper's T
    page = (root / "docs/source/user_guide/model/sequential/stosa.rst").read_text()
    assert "   MAX_ITEM_LIST_LENGTH: 100\n" in page and "sample.yaml" in page
    page = (root / "docs/source/user_guide/model/sequential/patt.rst").read_text()
    assert "   MAX_ITEM_LIST_LENGTH: 30\n" in page
    assert (tmp_path / "prs" / "STOSA.md").read_text().startswith("# Add STOSA")
    assert "## Depends on" in (tmp_path / "prs" / "DPAtt.md").read_text()
    # nothing of the plugin's, no marker
    for path in written:
        text = (root / path).read_text()
        assert "recbole_attn" not in text and "regenerate" not in text, path
        assert "generated by" not in text.lower(), path
    # a later export of one model keeps the earlier models' test cases
    export(str(root), ["RKSA"])
    tests = (root / "tests/model/test_model_auto.py").read_text()
    assert all(f"def test_{n}(self)" in tests for n in ("stosa", "dpatt", "rksa"))


def test_pull_request_descriptions_carry_the_measurements(tmp_path):
    root = tmp_path / "RecBole"
    _fake_checkout(root)
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "RKSA.md").write_text("## Measured with recbole_attn\n\n| a | b |\n")
    export(str(root), ["RKSA", "PARec"], pr_dir=str(tmp_path / "prs"), pr_notes=notes)
    rksa = (tmp_path / "prs" / "RKSA.md").read_text()
    assert "## Tests" in rksa and "## Measured with recbole_attn\n\n| a | b |\n" in rksa
    assert "Measured" not in (tmp_path / "prs" / "PARec.md").read_text()
    metrics = (tmp_path / "prs" / "metrics.md").read_text()
    assert metrics.startswith("# Add category-diversity metrics CC, ILD and AccDivF1")
    assert "recbole_attn" not in metrics


def test_export_refuses_a_file_it_did_not_write(tmp_path):
    root = tmp_path / "RecBole"
    _fake_checkout(root)
    theirs = root / "recbole/model/sequential_recommender/stosa.py"
    theirs.write_text("# someone's STOSA\n")
    with pytest.raises(ExportError, match="not written by recbole-attn"):
        export(str(root), ["STOSA"])
    assert theirs.read_text() == "# someone's STOSA\n"
    assert not (root / "recbole/properties/model/STOSA.yaml").exists()


def test_export_needs_a_checkout(tmp_path):
    with pytest.raises(ExportError, match="not a RecBole checkout"):
        export(str(tmp_path), ["STOSA"])


def test_new_python_files_start_with_recboles_header_naming_the_author(
    tmp_path, monkeypatch
):
    """As RecBole's own files: coding line, day, author and email; git's author (its
    environment, else the checkout's config), and none set is one line of advice."""
    root = tmp_path / "RecBole"
    _fake_checkout(root)
    written = export(str(root), ["STOSA"], metrics=True)
    today = f"{datetime.date.today():%Y/%m/%d}"
    header = (
        f"# -*- coding: utf-8 -*-\n# @Time    : {today}\n# @Author  : Ann Author\n"
        "# @Email   : ann@example.com\n\n"
    )
    new = [model_file("STOSA"), metric_files.TEST_FILE]
    for path in written:
        text = (root / path).read_text()
        if path in new:
            assert text.startswith(header) and text.count("@Author") == 1, path
        else:  # RecBole's files keep their own
            assert "Ann Author" not in text, path
    monkeypatch.setenv("HOME", str(tmp_path))  # no global or system git config
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "no-gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("GIT_AUTHOR_NAME")
    monkeypatch.delenv("GIT_AUTHOR_EMAIL")
    other = tmp_path / "other"
    _fake_checkout(other)
    with pytest.raises(ExportError, match="no git user.name is set; run git -C "):
        export(str(other), ["STOSA"])
    assert not (other / "recbole/model/sequential_recommender/stosa.py").exists()
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    for key, value in (("name", "Bo Maintainer"), ("email", "bo@example.org")):
        subprocess.run(["git", "-C", str(other), "config", f"user.{key}", value])
    export(str(other), ["STOSA"])
    text = (other / "recbole/model/sequential_recommender/stosa.py").read_text()
    assert "# @Author  : Bo Maintainer\n# @Email   : bo@example.org\n" in text


def test_test_cases_are_recbole_style():
    text = recbole_test_cases(["AWRSR"])
    tree = ast.parse("class T:\n" + text)
    names = [f.name for f in tree.body[0].body]
    assert names == [
        "test_awrsr",
        "test_awrsr_add",
        "test_awrsr_stosa_stoc",
        "test_awrsr_bpr",
        "test_awrsr_last",
    ]


def test_sized_cases_are_the_variant_plus_sizes(files):
    """A case's sizes (RecBole's test data only: RKSA's and AWRSR's T, RKSA's
    batch) come after the variant's options, change no option of the variant, and are
    keys the exported yaml or RecBole's own yaml files define."""
    import yaml

    from recbole_attn.upstream.yaml_files import model_yaml, recbole_config_keys

    recbole_keys = recbole_config_keys()
    tree = ast.parse("class T:\n" + recbole_test_cases(list(MODELS)))
    configs = {f.name: ast.literal_eval(f.body[0].value) for f in tree.body[0].body}
    sized = 0
    for name, model in MODELS.items():
        exported = set(yaml.safe_load(model_yaml(name, files)))
        for suffix, sizes in model.sizes.items():
            assert suffix in model.cases, (name, suffix)
            assert not set(sizes) & set(model.cases[suffix]), (name, suffix)
            assert set(sizes) <= exported | recbole_keys, (name, sizes)
        for suffix, options in model.cases.items():
            method = f"test_{name.lower()}" + (f"_{suffix}" if suffix else "")
            sizes = model.sizes.get(suffix, {})
            assert configs[method] == {"model": name, **options, **sizes}
            sized += bool(sizes)
    assert configs["test_rksa"]["train_batch_size"] == 2048
    assert all(
        configs[f"test_awrsr{suffix}"]["MAX_ITEM_LIST_LENGTH"] == 20
        for suffix in ("", "_add", "_stosa_stoc", "_bpr", "_last")
    )
    assert sized == 8


@pytest.mark.parametrize(
    "where, statement, message",
    [
        (1, "from recbole_attn.errors import DataError", "recbole_attn.errors is imp"),
        (1, "from . import collector", "a relative module is imported"),
        (1, "LIMIT = 3", "must all stand at the top"),
        (-1, "def f():\n    from recbole_attn import errors", "inside a function"),
    ],
    ids=["plugin import", "relative import", "code among imports", "inner import"],
)
def test_an_evaluator_file_the_export_cannot_copy_is_refused(
    monkeypatch, where, statement, message
):
    """The evaluator files are copied as they are: an import of the plugin (which
    RecBole's tree lacks), at the top or inside a function, or code among the imports
    (which would not be copied) stops the export, naming it."""
    real = metric_files.ast.parse

    def parse(text, *args, **kwargs):
        tree = real(text, *args, **kwargs)
        if "class CategoryMetric(" in text:
            node = real(statement).body[0]
            tree.body.insert(len(tree.body) if where < 0 else where, node)
        return tree

    monkeypatch.setattr(metric_files.ast, "parse", parse)
    with pytest.raises(ExportError, match=message):
        metric_files.blocks()


# ---------------------------------------------------------------------- RecBole's own tests
RECBOLE_CHECKOUT = os.environ.get("RECBOLE_CHECKOUT")
RECBOLE_PYTHON = os.environ.get("RECBOLE_PYTHON")


@pytest.mark.slow
@pytest.mark.skipif(
    not (RECBOLE_CHECKOUT and RECBOLE_PYTHON),
    reason="RecBole's own tests need a RecBole checkout (RECBOLE_CHECKOUT) and a Python "
    "where RecBole 1.2.1 runs unpatched (RECBOLE_PYTHON: numpy<2, pandas<3, ray<=2.6.3); "
    "docs/upstream.md",
)
@pytest.mark.parametrize("name", [*MODELS, "metrics"])
def test_recbole_own_tests_pass_after_the_export(name, tmp_path, files):
    """Each pull request alone in a fresh copy of the checkout: the model's cases of
    RecBole's test_model_auto.py and its SASRec case (or, for the metrics, RecBole's
    tests/metrics) pass, black leaves the written files as they are, and the diff holds
    no recbole_attn and no marker."""
    checkout = tmp_path / "RecBole"
    shutil.copytree(RECBOLE_CHECKOUT, checkout, ignore=shutil.ignore_patterns(".git"))
    metrics = name == "metrics"
    written = export(str(checkout), [] if metrics else [name], metrics=metrics)
    for path in written:
        text = (checkout / path).read_text()
        assert "recbole_attn" not in text and "regenerate" not in text, path
    if metrics:
        args = ["tests/metrics"]
    else:
        from recbole_attn.upstream.export import with_dependencies

        # the model's cases, those of the models its file imports, and RecBole's SASRec
        methods = recbole_test_methods(with_dependencies([name], files))
        select = " or ".join([*methods, "test_sasrec"])
        args = [
            "tests/model/test_model_auto.py",
            "-k",
            f"TestSequentialRecommender and ({select}) and not sasrec_with and not "
            "sasreccpr and not sasrecf",
        ]
    done = subprocess.run(
        [RECBOLE_PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=checkout,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-4000:]
    if not metrics:
        passed = f"\n{1 + len(methods)} passed"  # pytest -q's summary line
        assert passed in "\n" + done.stdout, done.stdout[-2000:]
    done = subprocess.run(
        [RECBOLE_PYTHON, "-m", "black", "--check"]
        + [p for p in written if p.endswith(".py")],
        cwd=checkout,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_docs_show_the_pull_requests_as_the_export_writes_them(tmp_path):
    """docs/upstream.md shows STOSA's and the metrics' pull requests as the export
    writes them (its generated section: python -m recbole_attn.upstream.docs), and the
    lines it counts are those the export adds to a checkout."""
    from recbole_attn.options.declared import replace_between
    from recbole_attn.upstream.export import DOCS_BEGIN, DOCS_END, docs_section

    path = os.path.join(os.path.dirname(HERE), "docs", "upstream.md")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    section = docs_section()
    assert replace_between(text, DOCS_BEGIN, DOCS_END, section, path) == text
    root = tmp_path / "RecBole"
    _fake_checkout(root)
    export(str(root), ["STOSA"], pr_dir=str(tmp_path / "prs"), metrics=False)
    described = (tmp_path / "prs" / "STOSA.md").read_text()
    assert "".join(f"> {line}".rstrip() + "\n" for line in described.splitlines()) in (
        section
    )
    tests = (root / "tests/model/test_model_auto.py").read_text()
    added = tests.count("\n") - _FAKE_TESTS.count("\n")
    assert f"| `tests/model/test_model_auto.py` | +{added} |" in described
    assert added == 7 * len(MODELS["STOSA"].cases)  # 6 lines a case and a blank one
    # RecBole's count of its models, one up, as its model pull requests raise it, once
    export(str(root), ["STOSA"], metrics=False)
    readme = (root / "README.md").read_text()
    assert "includes 95 recommendation" in readme and "implement 95 commonly" in readme
    intro = (root / "docs/source/user_guide/model_intro.rst").read_text()
    assert "We implement 95 recommendation models" in intro


def test_a_run_says_where_the_plugins_defaults_differ_from_recboles():
    """The plugin keeps its models' T and budgets (STOSA's T = 100) where RecBole's own
    Config gives the same model name others (T = 50 from sample.yaml); one line of the
    run's log names both, for the keys the user did not set, and none where nothing
    differs."""
    from recbole_attn.engine.config import make_config
    from recbole_attn.engine.defaults import differences_line

    line = differences_line(make_config("STOSA", "ml-100k"))
    assert "MAX_ITEM_LIST_LENGTH=100" in line and "MAX_ITEM_LIST_LENGTH=50" in line
    # overall.yaml's batch size is the plugin's too (RecBole's 2048: issue 75)
    assert "train_batch_size=256" in line and "train_batch_size=2048" in line
    assert "\n" not in line
    line = differences_line(
        make_config("STOSA", "ml-100k", config_dict={"MAX_ITEM_LIST_LENGTH": 100})
    )
    assert "MAX_ITEM_LIST_LENGTH" not in line and "epochs=1000" in line
    line = differences_line(make_config("PAtt", "ml-100k"))
    assert "MAX_ITEM_LIST_LENGTH=30" in line
    given = {
        "MAX_ITEM_LIST_LENGTH": 50,
        "train_batch_size": 2048,
        "epochs": 300,
        "valid_metric": "MRR@10",
    }
    config = make_config("RKSA", "ml-100k", config_dict=given)
    assert differences_line(config) is None


@pytest.mark.parametrize("name", list(MODELS))
def test_each_models_pull_request_stands_alone(name, files):
    """``export-upstream --models=NAME`` writes a pull request that needs nothing of
    another: the model files it writes import only RecBole's own modules and each
    other (AWRSR's includes STOSA's file, DPAtt's PAtt's, FPARec's PARec's, each said
    under "Depends on"), and every option a test case sets is one its files read."""
    from recbole_attn.upstream.models import SEQUENTIAL
    from recbole_attn.upstream.recbole_files import pr_description
    from recbole_attn.upstream.sources import model_sources
    from recbole_attn.upstream.yaml_files import _read_keys, recbole_config_keys

    names, planned = planned_files([name])
    assert names[-1] == name or name in names
    ours = {p.rsplit("/", 1)[1][:-3] for p in planned if p.endswith(".py")}
    for path, text in planned.items():
        if not path.endswith(".py"):
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and node.module.startswith(SEQUENTIAL):
                assert node.module.rsplit(".", 1)[1] in ours, (name, node.module)
    dependencies = [n for n in names if n != name]
    described = pr_description(name, planned, dependencies=dependencies)
    assert ("## Depends on" in described) == bool(dependencies)
    read = set(_read_keys(model_sources(files, name))) | recbole_config_keys()
    for suffix, options in MODELS[name].cases.items():
        assert set(options) <= read, (name, suffix, set(options) - read)
