"""experiments/studies.py: the declared studies agree with the library and with the
stored runs, and the stored reports are what the runner writes from those runs."""

import os
import random

import pytest
import yaml

from experiments import reports, research, runner, studies
from recbole_attn.engine.config import model_yaml_files, properties_dir
from recbole_attn.options.check import RESEARCH_WING_KEYS, yaml_keys
from recbole_attn.options.declared import declared_options
from recbole_attn.plugin import MODELS
from recbole_attn.engine.quick_start import build
from test_stosa_official import OFFICIAL  # the official code's model, option by option


def test_defaults_are_the_official_model_without_the_leak(tiny_config):
    """STOSA.yaml = every official behaviour but the held-out leak (the Office ablation's
    "no held-out leak" row, experiments/studies.py STOSA_OFFICIAL), and the reference
    code's value covariances (a tie on validation, stosa_value_cov_*; that ablation ran
    before them, with the linear ones, which every study before them pins)."""
    config, net, _, _ = build("STOSA", "tiny", config_dict=tiny_config)
    forms = {f"stosa_{form}": value for form, value in net.forms.items()}
    assert forms.pop("stosa_value_cov") == "official"
    assert {**forms, "position_alignment": config["position_alignment"]} == OFFICIAL
    # the leak is no product option (experiments/research.py)
    assert config["neg_exclude_heldout"] is None
    want = {
        k: v for k, v in studies.STOSA_OFFICIAL.items() if k != "neg_exclude_heldout"
    }
    assert want == OFFICIAL


def test_patt_defaults_are_the_official_mechanism_without_its_leaks(tiny_config):
    """PAtt.yaml = the official code's behaviours but its two leaks (the Beauty study's
    "official-like without leaks" row, the best leak-free row on validation), with the
    paper's T 30 and the official README's dropout 0.4 (higher on validation than the
    paper's 0.5 on Beauty and ml-100k, level on Office: docs/patt.md; the Beauty study's
    "PAtt defaults" row is these values pinned)."""
    config, _, _, _ = build("PAtt", "tiny", config_dict=tiny_config)
    # the official forms are the product's only ones; the paper's are the research
    # wing's options, whose defaults are the product's behaviour
    options = declared_options(research.RESEARCH_MODELS["PAtt"])
    got = {
        k: config[k] if k in config and config[k] is not None else options[k].default
        for k in studies.PATT_NO_LEAK
    }
    assert got == studies.PATT_NO_LEAK
    # neither leak is a product option (experiments/research.py); the product's ground
    # set is the prefix
    assert config["dpp_ground_set"] is None and config["neg_exclude_heldout"] is None
    assert options["dpp_ground_set"].default == "prefix"
    yaml_values = _yaml_defaults("PAtt")
    want = {"MAX_ITEM_LIST_LENGTH": 30, "hidden_dropout_prob": 0.4}
    assert studies.PATT_DEFAULTS == want
    assert {k: yaml_values[k] for k in want} == want
    row = studies.STUDIES["patt_beauty_official"]["variants"][
        "PAtt defaults (T 30 and dropout 0.4)"
    ]
    assert row == ("PAtt", want)


def test_every_study_is_well_formed():
    for name, study in studies.STUDIES.items():
        for key in ("dataset", "protocol", "columns", "baseline", "variants", "paper"):
            assert key in study, (name, key)
        # a stosa_tuned variant is declared once its search has selected it
        searched = set(study["variants"]) | set(study.get("searches", ()))
        assert study["baseline"] in searched, name
        assert set(study["variants"]) <= searched, name
        for label, (model, overrides) in study["variants"].items():
            assert model in MODELS or model == "SASRec", (name, label)
            assert isinstance(overrides, dict)
        assert set(study.get("one_seed", ())) <= set(study["variants"]), name
        for label, external in study.get("external", {}).items():
            assert label not in study["variants"], name
            assert {"model", "command"} <= set(external), (name, label)
        assert study.get("report", "table") in (
            "table",
            "reproduce",
            "archive_quality",
            "budget",
            "stosa_table1",
            "paper_tables",
            "stosa_tuned",
        )
    for name, group in studies.GROUPS.items():
        assert set(group["studies"]) <= set(studies.STUDIES), name
        assert os.path.isdir(os.path.join(runner.HERE, name)), name


def test_stored_runs_belong_to_their_studies():
    """Every run JSON under experiments/<study>/runs/ is a declared variant of that study,
    run with its model and protocol; no run lies outside a study's runs/ folder (a
    measurement's own runs, experiments/scale/runs/, are checked by its test)."""
    found = 0
    for name in sorted(os.listdir(runner.HERE)):
        folder = runner.runs_folder(runner.HERE, name)
        if not os.path.isdir(folder) or name in studies.MEASUREMENTS:
            continue
        assert name in studies.STUDIES, name
        study = studies.STUDIES[name]
        for run in reports.load_runs(folder):
            found += 1
            assert run.get("study", name) == name
            external = study.get("external", {})
            if run["label"] in external:  # stored by another script
                assert run["model"] == external[run["label"]]["model"]
                assert run["eval_mode"] == study["protocol"]["eval_args"]["mode"]
                continue
            assert run["label"] in study["variants"], (name, run["label"])
            assert run["model"] == study["variants"][run["label"]][0]
            protocol = {k: v for k, v in study["protocol"].items() if k != "eval_args"}
            recorded = {k: run["config"][k] for k in protocol if k in run["config"]}
            overrides = study["variants"][run["label"]][1]
            want = {
                k: overrides.get(k, v) for k, v in protocol.items() if k in recorded
            }
            if "eval_mode" in run:
                assert run["eval_mode"] == study["protocol"]["eval_args"]["mode"]
            # the budget of a run may have been set on the command line (--epochs,
            # --stopping_step)
            for key in ("epochs", "stopping_step"):
                recorded.pop(key, None)
                want.pop(key, None)
            assert recorded == want, (name, run["label"])
    assert found >= 191  # the runs recorded when experiments/ was built


def _yaml_defaults(model, options=None):
    """Today's values of the model's own yaml files, in load order, and the defaults of
    the options that moved to the research wing (stored runs recorded them)."""
    from experiments.research import RESEARCH_MODELS
    from recbole_attn.options.declared import declared_options

    from recbole_attn.options.check import RESEARCH_WING_KEYS

    values = {
        key: opt.default
        for cls in RESEARCH_MODELS.values()
        for key, opt in declared_options(cls).items()
        if key in RESEARCH_WING_KEYS
    }
    for path in model_yaml_files(MODELS[model], options):
        with open(path, encoding="utf-8") as f:
            values.update(yaml.safe_load(f))
    return values


#: keys that runs of earlier releases recorded for a model that no longer reads them ->
#: the value they had (issue 64: ``dpp_cat_jitter``, declared by PAtt, read by DPAtt
#: only, is DPAtt's option)
MOVED_KEYS = {"dpp_cat_jitter": 0.1}


def test_stored_runs_were_made_with_todays_defaults():
    """A run that records its model's options (``model_options``) was made with today's
    defaults, except where its study or variant sets them: a change of a model's yaml
    makes the runs made before it stale (rerun them, or pin the old values in the
    variant, as PATT_OURS does). The dataset yaml may set a model key (category_field).
    """
    checked = 0
    for name, study in studies.STUDIES.items():
        folder = runner.runs_folder(runner.HERE, name)
        if not os.path.isdir(folder):
            continue
        dataset_yaml = os.path.join(
            properties_dir(), "dataset", f"{study['dataset']}.yaml"
        )
        by_dataset = yaml_keys(dataset_yaml)
        for run in reports.load_runs(folder):
            if "model_options" not in run or run["label"] not in study["variants"]:
                continue
            model, overrides = study["variants"][run["label"]]
            want = {
                **_yaml_defaults(model, overrides),
                **study["protocol"],
                **overrides,
            }
            # the research wing's keys that runs of the previous releases recorded
            # (left to a preset, ~, or a product form): the product's behaviour
            for key, (product, _) in RESEARCH_WING_KEYS.items():
                if want.get(key) is None:
                    want[key] = product(want) if callable(product) else product
            for key, value in run["model_options"].items():
                if key in MOVED_KEYS and key not in want:  # read by no model of the run
                    assert value == MOVED_KEYS[key], (name, run["label"], key)
                elif key not in by_dataset and key not in ("epochs", "stopping_step"):
                    assert value == want[key], (name, run["label"], run["seed"], key)
            checked += 1
    # the reproduce group's PAtt and DPAtt rows rerun with today's defaults (every
    # dataset, 3 seeds), the Beauty study's last runs, patt_window_ml100k's and
    # patt_dropout_office's
    assert checked >= 70


@pytest.mark.parametrize(
    "name",
    [
        n
        for n, s in studies.STUDIES.items()
        if s.get("report", "table") not in runner.GROUP_REPORTS
        and os.path.isdir(runner.runs_folder(runner.HERE, n))
    ],
)
def test_stored_report_is_what_the_runner_writes(name):
    """`python -m experiments.runner --report` leaves every report as committed."""
    study = studies.STUDIES[name]
    build_report = {
        "table": reports.study_table,
        "archive_quality": reports.archive_quality_table,
        "budget": reports.budget_table,
    }[study.get("report", "table")]
    runs = reports.load_runs(runner.runs_folder(runner.HERE, name))
    extra = [runner.budget_studies()] if study.get("report") == "budget" else []
    with open(os.path.join(runner.HERE, name, "report.md")) as f:
        assert build_report(name, study, runs, *extra) == f.read()


@pytest.mark.parametrize(
    "name",
    [
        n
        for n, s in studies.STUDIES.items()
        if s.get("docs") and os.path.isdir(runner.runs_folder(runner.HERE, n))
    ],
)
def test_docs_show_the_generated_table(name):
    """The table a docs page shows for a study is its report's, as the runner writes it."""
    study = studies.STUDIES[name]
    runs = reports.load_runs(runner.runs_folder(runner.HERE, name))
    text = reports.study_table(name, study, runs)
    with open(os.path.join(os.path.dirname(runner.HERE), study["docs"])) as f:
        page = f.read()
    assert reports.with_docs_table(page, name, text) == page


def test_results_page_shows_the_generated_gains_that_hold():
    """docs/results.md's "Which gains hold" list is the reproduce page's, as the runner
    writes it from the stored runs."""
    sections = [
        (studies.STUDIES[name], runner.runs_folder(runner.HERE, name))
        for name in studies.GROUPS["reproduce"]["studies"]
    ]
    block = "\n".join(reports.gains_that_hold(sections))
    path = os.path.join(os.path.dirname(runner.HERE), runner.RESULTS_PAGE)
    with open(path) as f:
        page = f.read()
    assert reports.GAINS_MARKERS[0] in page
    assert reports.with_docs_block(page, reports.GAINS_MARKERS, block, "g") == page


def test_docs_table_block():
    start, end = reports.docs_markers("s")
    page = f"intro\n{start}\nold\n{end}\nafter\n"
    report = "# s\n\ntext\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nmore\n| x |\n"
    want = f"intro\n{start}\n| a | b |\n|---|---|\n| 1 | 2 |\n{end}\nafter\n"
    assert reports.with_docs_table(page, "s", report) == want
    with pytest.raises(ValueError, match="has no block for s"):
        reports.with_docs_table("intro\n", "s", report)


def test_stored_reproduce_page_is_what_the_runner_writes(tmp_path):
    pytest.importorskip("matplotlib")
    sections = [
        (studies.STUDIES[name], runner.runs_folder(runner.HERE, name))
        for name in studies.GROUPS["reproduce"]["studies"]
    ]
    text = reports.reproduce_page(sections, str(tmp_path))
    with open(os.path.join(runner.HERE, "reproduce", "report.md")) as f:
        assert text == f.read()
    assert sorted(os.listdir(tmp_path)) == [
        "reproduction_accuracy.png",
        "reproduction_diversity.png",
    ]


def test_pairs_and_pr_notes_name_declared_variants_and_exported_models():
    from recbole_attn.upstream.models import MODELS as EXPORTED_MODELS

    assert set(studies.EXPORTED.values()) == set(EXPORTED_MODELS)
    assert set(studies.EXPORTED) <= set(studies.REPRODUCE_MODELS)
    for name, study in studies.STUDIES.items():
        for first, second in study.get("pairs", {}).values():
            assert {first, second} <= set(study["variants"]), name
        for label, against in study.get("gains", {}).items():
            assert {label, against} <= set(study["variants"]), name


def _run(label, seed, ndcg, recall, per_epoch, best=5, run=9):
    return {
        "label": label,
        "seed": seed,
        "test": {"ndcg@10": ndcg, "recall@10": recall},
        "seconds_per_epoch": per_epoch,
        "best_epoch": best,
        "epochs_run": run,
        "device": "CPU (1 threads)",
    }


def test_pairs_table_and_pr_notes_from_runs():
    study = studies.STUDIES["recbole_training_office"]
    ours, theirs = study["pairs"]["STOSA"]
    runs = [
        _run(ours, 2020, 0.05, 0.10, 2.0),
        _run(theirs, 2020, 0.04, 0.09, 10.0, best=3, run=7),
        _run(theirs, 2021, 0.9, 0.9, 99.0),  # no partner seed: left out
    ]
    results = {}
    for r in runs:
        results.setdefault(r["label"], []).append(r)
    lines = reports.pairs_table(study, results)
    row = [line for line in lines if line.startswith("| STOSA |")]
    assert row == [
        "| STOSA | 2.00 | 10.00 | 5.00 | 5/9; 3/7 | 0.0500 | 0.0400 | -20.0 % "
        "| 0.1000 | 0.0900 | -10.0 % |"
    ]
    reproduce = {
        "Office": [
            _run("STOSA", 2020, 0.05, 0.1, 1.0),
            _run("SASRec", 2020, 0.1, 0.2, 1.0),
            _run("SASRec (BPR)", 2020, 0.04, 0.1, 1.0),
        ]
    }
    # with per-user ranks on both sides, the change gets its Holm-corrected paired test
    stored = {"cap": 21, "data": {"fingerprint": "x"}}
    runs[0]["test_ranks"] = {**stored, "ranks": [1, 2, 1, 3, 1, 2, 1, 1]}
    runs[1]["test_ranks"] = {**stored, "ranks": [4, 9, 12, 7, 15, 8, 11, 20]}
    marked = [
        line
        for line in reports.pairs_table(study, results)
        if line.startswith("| STOSA |")
    ][0]
    from scipy import stats

    ours_ndcg = reports.user_values(runs[0], "ndcg@10")
    theirs_ndcg = reports.user_values(runs[1], "ndcg@10")
    p_ndcg = stats.ttest_rel(theirs_ndcg, ours_ndcg).pvalue
    p_recall = stats.ttest_rel(
        reports.user_values(runs[1], "recall@10"),
        reports.user_values(runs[0], "recall@10"),
    ).pvalue
    holm = max(min(1.0, 2 * min(p_ndcg, p_recall)), p_ndcg)  # Holm's, for NDCG
    assert f"-20.0 % (p {f'{holm:.3f}'.lstrip('0')}" in marked
    assert "Holm-corrected over the 2 comparisons" in "\n".join(
        reports.pairs_table(study, results)
    )
    for r in runs[:2]:
        del r["test_ranks"]
    notes = reports.pr_notes("recbole_training_office", study, runs, reproduce)
    assert set(notes) == {"STOSA"}  # no other model has a run here
    text = notes["STOSA"]
    assert "| Office | STOSA | BPR | 1 | 0.0500 | 0.1000 | -50.0 % | +25.0 % " in text
    assert row[0] in text


def test_gains_table_pairs_by_seed_and_names_both_validation_scores():
    study = {
        "protocol": {"valid_metric": "NDCG@10"},
        "gains": {"B": "A", "C": "A"},  # C has no run: no row
    }
    runs = [
        _run("A", 2020, 0.10, 0.20, 1.0),
        _run("A", 2021, 0.20, 0.20, 1.0),
        _run("B", 2020, 0.11, 0.30, 1.0),
        _run("B", 2021, 0.24, 0.30, 1.0),
        _run("B", 2022, 0.90, 0.90, 1.0),  # no partner seed: left out
    ]
    for r, valid in zip(runs, (0.1, 0.3, 0.2, 0.4, 0.9)):
        r["best_valid"] = {"ndcg@10": valid}
    results = {}
    for r in runs:
        results.setdefault(r["label"], []).append(r)
    lines = reports.gains_table(study, results)
    rows = [line for line in lines if line.startswith("| ") and "against" not in line]
    # +10 % and +20 % NDCG@10, +50 % and +50 % Recall@10 (not the unpaired seed 2022)
    assert rows == [
        "| B | A | 2 | +15.0 ± 7.1 % | +50.0 ± 0.0 % "
        "| 0.3000 ± 0.1414 vs 0.2000 ± 0.1414 |"
    ]


def test_stored_pr_notes_are_what_the_runner_writes():
    reproduce = {
        d: reports.load_runs(runner.runs_folder(runner.HERE, studies.reproduce_name(d)))
        for d in studies.REPRODUCE_DATASETS
    }
    for name, study in studies.STUDIES.items():
        folder = runner.runs_folder(runner.HERE, name)
        if not study.get("pr_notes") or not os.path.isdir(folder):
            continue
        notes = reports.pr_notes(name, study, reports.load_runs(folder), reproduce)
        stored = os.path.join(runner.HERE, name, "pr_notes")
        assert sorted(os.listdir(stored)) == sorted(f"{m}.md" for m in notes)
        for model, text in notes.items():
            with open(os.path.join(stored, f"{model}.md")) as f:
                assert f.read() == text, (name, model)


def test_patt_attention_statistics_of_a_trained_model(tiny_config):
    """experiments/patt_attention: the row statistics are those of the rows written out
    (uniform rows: self share 1, spread 1), and on a trained PAtt at lambda 0.125 the
    earlier keys' spread stays within exp(lambda), over every valid row."""
    import math

    import torch

    from experiments import patt_attention
    from recbole_attn.engine.quick_start import run

    uniform = torch.tril(torch.ones(4, 4)) / torch.arange(1, 5).unsqueeze(1)
    share, spread = patt_attention.row_statistics(
        uniform.unsqueeze(0), torch.tensor([4])
    )
    assert share == pytest.approx([1.0, 1.0, 1.0]) and spread == pytest.approx([1, 1])
    skewed = torch.tensor([[1.0, 0, 0], [0.5, 0.5, 0], [0.5, 0.25, 0.25]])
    share, spread = patt_attention.row_statistics(skewed[None], torch.tensor([3]))
    assert share == pytest.approx([1.0, 0.75]) and spread == pytest.approx([2.0])

    config = {**tiny_config, "epochs": 1, "dpp_lambda": 0.125}
    path = run("PAtt", "tiny", config_dict=config)["saved_model_file"]
    stats = patt_attention.measure(path, users=10**6)
    assert stats["lambda"] == 0.125 and stats["users"] > 0 and stats["rows"] > 0
    assert 1.0 <= stats["spread median"] <= stats["spread max"] <= math.exp(0.125)


def _recbole_stopping(curve, patience, epochs):
    """RecBole's own ``early_stopping`` driven over a curve, as its trainer calls it."""
    from recbole.utils import early_stopping

    best, step, selected = float("-inf"), 0, -1
    for i, score in enumerate(curve[:epochs]):
        best, step, stop, update = early_stopping(score, best, step, patience)
        if update:
            selected = i
        if stop:
            return selected, i + 1
    return selected, min(epochs, len(curve))


def test_replayed_early_stopping_is_recboles():
    rng = random.Random(0)
    for _ in range(300):
        n = rng.randint(1, 60)
        # few distinct values: ties with the best so far are frequent (scores are rounded)
        curve = [
            round(rng.random() * 0.05 + i * rng.choice((0, 1e-3)), 3) for i in range(n)
        ]
        patience, epochs = rng.randint(0, 12), rng.randint(1, 70)
        assert reports.replay_early_stopping(
            curve, patience, epochs
        ) == _recbole_stopping(curve, patience, epochs)


def test_budget_runs_replay_to_their_own_stopping():
    """A budget study's stored curve, replayed at the patience it trained with, stops
    and selects where the run did; its test trace at the best epoch is the run's test.
    """
    checked = 0
    for name, study in studies.STUDIES.items():
        if study.get("report") != "budget":
            continue
        for run in reports.load_runs(runner.runs_folder(runner.HERE, name)):
            patience = run["config"]["stopping_step"]
            selected, ran = reports.replay_early_stopping(
                run["valid_curve"], patience, run["config"]["epochs"]
            )
            assert ran == run["epochs_run"]
            # the model kept is the selected epoch's (its test is the run's test); runs
            # before the runner's tie rule record the first of equal best scores
            assert run["test_curve"][selected] == run["test"]
            curve = run["valid_curve"][:ran]
            assert curve[selected] == max(curve)
            assert curve[run["best_epoch"] - 1] == max(curve)
            checked += 1
    assert checked >= 6


def test_the_budget_rule_picks_on_validation_curves():
    """The rule (studies.BUDGET_RULE) on made-up curves: a late second rise needs the
    long patience; within 1 % is enough where nothing selects the same epochs."""
    study = {"patiences": (10, 20, 100), "protocol": {"epochs": 200}}
    flat = [0.01 * (i + 1) for i in range(30)] + [0.3] * 170  # best at 30 (ties later)
    assert reports.budget_choice({"a": (study, [{"valid_curve": flat}])})[0] == 10
    late = [0.3] + [0.2] * 50 + [0.302] + [0.1] * 148  # a second best 51 epochs later
    patience, reason = reports.budget_choice({"a": (study, [{"valid_curve": late}])})
    assert patience == 10 and "within 1 %" in reason
    higher = [0.3] + [0.2] * 50 + [0.4] + [0.1] * 148
    assert reports.budget_choice({"a": (study, [{"valid_curve": higher}])})[0] == 100
