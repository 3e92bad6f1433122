"""The reports of the research wing, built from stored runs only (no training): a study's
table (``report: table``), the reproduce group's page with its two charts (its studies
have ``report: reproduce``) and the archived quality tables (``report: archive_quality``,
the older run format of benchmarks/quality_table.py). Each function returns markdown
text; ``experiments.runner`` writes it to ``experiments/<study or group>/report.md``.
"""

import json
import os
import statistics

from experiments import studies

#: the command line the reports name
RUNNER = "python -m experiments.runner"


def load_runs(folder):
    """The run dicts of a study's ``runs/`` folder, in file-name order."""
    runs = []
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if name.endswith(".json"):
            with open(os.path.join(folder, name)) as f:
                runs.append(json.load(f))
    return runs


def fmt(values, median=False):
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.4f}"
    center = statistics.median(values) if median else statistics.mean(values)
    return f"{center:.4f} ± {statistics.stdev(values):.4f}"


# ---------------------------------------------------------------------- study table


def study_table(study_name, study, runs):
    """Test metrics as mean ± std over seeds (the median where the paper reports
    medians), the validation score, epochs, seconds per epoch as a ratio to the study's
    baseline and the device of every number; a second table per ``rescore`` ranking.
    None if there is no run yet."""
    results = {}
    for r in runs:
        results.setdefault(r["label"], []).append(r)
    if not results:
        return None
    protocol = study["protocol"]
    median = study.get("median", False)
    base = results.get(study["baseline"], [])
    base_epoch = statistics.median(r["seconds_per_epoch"] for r in base) if base else 0
    cols = study["columns"]
    header = (
        ["variant", "seeds"]
        + cols
        + [
            f"valid {protocol['valid_metric']}",
            "best / run epochs",
            "s / epoch",
            f"time ratio vs {study['baseline']}",
            "device",
        ]
    )
    any_run = next(iter(results.values()))[0]
    lines = [
        f"# {study_name}: {study['dataset']}",
        "",
        f"Protocol: leave-one-out, {protocol['eval_args']['mode']} ranking, history "
        f"{'masked' if protocol['eval_mask_history'] else 'not masked'}, test metrics at "
        f"the epoch of best validation {protocol['valid_metric']} (early stop after "
        f"{any_run['config'].get('stopping_step', protocol['stopping_step'])} "
        "validations without improvement, at most "
        f"{any_run['config'].get('epochs', protocol['epochs'])} epochs). "
        f"{'Median' if median else 'Mean'} ± std over seeds. Each model keeps its "
        "yaml defaults besides the protocol and its overrides (JSON files).",
        "",
        f"Paper: {study['paper']}",
        "",
        f"Command: `{RUNNER} --study={study_name} --jobs=N --device=cuda|cpu`",
        *[
            f"{label}: `{external['command']}`"
            for label, external in study.get("external", {}).items()
        ],
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for label in row_labels(study):
        runs_of = results.get(label)
        if not runs_of:
            continue
        cells = [label, str(len(runs_of))]
        cells += [fmt([r["test"][c] for r in runs_of], median) for c in cols]
        cells.append(
            fmt([r["best_valid"][protocol["valid_metric"].lower()] for r in runs_of])
        )
        cells.append(", ".join(f"{r['best_epoch']}/{r['epochs_run']}" for r in runs_of))
        per_epoch = statistics.median(r["seconds_per_epoch"] for r in runs_of)
        cells.append(f"{per_epoch:.2f}")
        cells.append(f"{per_epoch / base_epoch:.2f}" if base_epoch else "-")
        cells.append(", ".join(sorted({r["device"] for r in runs_of})))
        lines.append("| " + " | ".join(cells) + " |")
    if study.get("valid_ranks"):
        lines += ["", *validation_choice_lines(study, results)]
    if study.get("pairs"):
        lines += ["", *pairs_table(study, results)]
    if study.get("gains"):
        lines += ["", *gains_table(study, results)]
    for mode in study.get("rescore", {}):
        lines += [
            "",
            f"The same best models (selected on {protocol['eval_args']['mode']}-ranking "
            f"validation above), test ranked with {mode}: "
            f"`{RUNNER} --study={study_name} --rescore` fills in runs "
            "that lack it while their model files exist.",
            "",
            "| " + " | ".join(["variant", "seeds", *cols]) + " |",
            "|" + "---|" * (len(cols) + 2),
        ]
        for label in study["variants"]:
            rescored = [
                r for r in results.get(label, []) if mode in r.get("rescored", {})
            ]
            if rescored:
                cells = [label, str(len(rescored))]
                cells += [
                    fmt([r["rescored"][mode][c] for r in rescored], median)
                    for c in cols
                ]
                lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def validation_choice_lines(study, results):
    """The choice between a study's variants made on validation: each variant's
    validation score against the baseline's over the seeds both have, with the paired
    t-test over the validation users (their stored ranks, each user's value averaged
    over the seeds), and the budget the runs needed (their best epochs)."""
    metric = study["protocol"]["valid_metric"].lower()
    base_label = study["baseline"]
    base = {r["seed"]: r for r in results.get(base_label, [])}
    lines = [
        f"Chosen on validation ({metric}, the paired t-test over the validation users, "
        "each user's value averaged over the seeds both variants have):",
        "",
        f"| variant | seeds | valid {metric} | {base_label} | difference | p |",
        "|---|---|---|---|---|---|",
    ]
    for label in row_labels(study):
        if label == base_label or label not in results:
            continue
        runs = {r["seed"]: r for r in results[label]}
        seeds = sorted(s for s in runs if s in base)
        if not seeds:
            continue
        ours = statistics.mean(runs[s]["best_valid"][metric] for s in seeds)
        theirs = statistics.mean(base[s]["best_valid"][metric] for s in seeds)
        p = paired_p(runs, base, metric, ranks="valid_ranks")
        lines.append(
            f"| {label} | {', '.join(map(str, seeds))} | {ours:.4f} | {theirs:.4f} | "
            f"{(ours - theirs) / theirs:+.1%} | {'-' if p is None else _p_text(p)} |"
        )
    runs = [r for rs in results.values() for r in rs]
    cap = study["protocol"].get("epochs")
    stopped = sum(r["epochs_run"] < cap for r in runs) if cap else len(runs)
    best = sorted(r["best_epoch"] for r in runs)
    lines += [
        "",
        f"Budget: best epochs {', '.join(map(str, best))}; {stopped} of {len(runs)} "
        f"runs ended by early stopping before the cap of {cap} epochs.",
    ]
    return lines


# ---------------------------------------------------------------------- docs blocks


def docs_markers(name, what="the table", option="--study"):
    """The two lines around a generated block in a page of docs/: ``what`` of the report
    of study (or group, ``option="--group"``) ``name``."""
    return (
        f"<!-- {what} of experiments/{name}/report.md, written by "
        f"{RUNNER} {option}={name} --report -->",
        "<!-- end of the generated table -->",
    )


def with_docs_block(page, markers, block, name):
    """``page`` (a docs/ page's text) with the text between ``markers`` replaced by
    ``block``; a ValueError naming ``name`` if the page lacks the markers."""
    start, end = markers
    if start not in page or end not in page:
        raise ValueError(
            f"the page has no block for {name}: put the lines {start!r} and {end!r} "
            "where it goes"
        )
    head, rest = page.split(start, 1)
    _, tail = rest.split(end, 1)
    middle = f"{block}\n" if block else ""  # an empty block: the markers alone
    return f"{head}{start}\n{middle}{end}{tail}"


def first_table(report_text):
    """The first markdown table of a report."""
    lines = report_text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("|"))
    last = next(
        (i for i in range(first, len(lines)) if not lines[i].startswith("|")),
        len(lines),
    )
    return "\n".join(lines[first:last])


def tables_onward(report_text):
    """A report from its first table to its end (every table and the lines between)."""
    lines = report_text.rstrip("\n").splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("|"))
    return "\n".join(lines[first:])


def docs_block(study, report_text):
    """What a docs page shows of a study's report: its first table, or every table from
    the first on (``docs_all_tables``); nothing while the study has no run."""
    if report_text is None:
        return ""
    if study.get("docs_all_tables"):
        return tables_onward(report_text)
    return first_table(report_text)


def with_docs_table(page, study_name, report_text):
    """``page`` with the block between the study's markers replaced by the study's
    :func:`docs_block`; a ValueError if the page lacks the markers."""
    block = docs_block(studies.STUDIES.get(study_name, {}), report_text)
    return with_docs_block(page, docs_markers(study_name), block, study_name)


#: the reproduce page's last section as docs/results.md shows it
GAINS_MARKERS = docs_markers("reproduce", "the section 'Which gains hold'", "--group")


def row_labels(study):
    """The labels of a study's table rows: its ``external`` rows (runs stored by another
    script, e.g. an official code's) first, then its variants."""
    return list(study.get("external", {})) + list(study["variants"])


def _median_epoch(runs):
    return statistics.median(r["seconds_per_epoch"] for r in runs)


def _change(new, old):
    mean = round(100.0 * (new / old - 1.0), 1) + 0.0 if old else None
    return "-" if mean is None else f"{mean:+.1f} %"


def pairs_table(study, results, metrics=("ndcg@10", "recall@10")):
    """The lines of a study's ``pairs`` table: per model, the second variant against the
    first (seconds per epoch, epochs, test metrics, paired by seed)."""
    first, second = (s.strip(" ()") for s in _pair_words(study))
    header = ["model", f"s / epoch: {first}", second, "ratio", "best / run epochs"]
    for m in metrics:
        header += [f"{m}: {first}", second, "change"]
    by_seed = {
        label: {r["seed"]: r for r in results.get(label, [])}
        for pair in study["pairs"].values()
        for label in pair
    }
    # the change columns: a paired t-test over users where both sides have per-user
    # ranks, Holm-corrected over every test of the table
    pvalues = {
        (model, m): paired_p(by_seed[b], by_seed[a], m)
        for model, (a, b) in study["pairs"].items()
        for m in metrics
    }
    marks = holm_marks(pvalues)
    tested = sum(p is not None for p in pvalues.values())
    lines = [
        f"Per model, {second} against {first} (medians of seconds per epoch, which "
        "include one validation; test metrics of the seeds both have"
        + (
            "; p: paired t-test over users (each user's value averaged over the seeds), "
            f"Holm-corrected over the {tested} comparisons that have per-user results "
            "(* below .05)"
            if tested
            else ""
        )
        + "):",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for model, (a, b) in study["pairs"].items():
        runs_a, runs_b = by_seed[a], by_seed[b]
        seeds = sorted(set(runs_a) & set(runs_b))
        if not seeds:
            continue
        ra, rb = [runs_a[s] for s in seeds], [runs_b[s] for s in seeds]
        ea, eb = _median_epoch(ra), _median_epoch(rb)
        cells = [model, f"{ea:.2f}", f"{eb:.2f}", f"{eb / ea:.2f}"]
        cells.append(
            "; ".join(
                ", ".join(f"{r['best_epoch']}/{r['epochs_run']}" for r in side)
                for side in (ra, rb)
            )
        )
        for m in metrics:
            va = statistics.mean(r["test"][m] for r in ra)
            vb = statistics.mean(r["test"][m] for r in rb)
            cells += [f"{va:.4f}", f"{vb:.4f}", _change(vb, va) + marks[model, m]]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def gains_table(study, results, metrics=("ndcg@10", "recall@10")):
    """The lines of a study's ``gains`` table ({variant: the variant it is measured
    against}): the change of each test metric, paired by seed (mean ± std in %, over the
    seeds both have), and the validation score of both."""
    valid = study["protocol"]["valid_metric"]
    header = ["variant", "against", "seeds"]
    header += [f"{m}: change" for m in metrics] + [f"valid {valid}: both"]
    by_seed = _by_label_and_seed(r for runs_of in results.values() for r in runs_of)
    pvalues = {
        (label, m): paired_p(by_seed.get(label, {}), by_seed.get(against, {}), m)
        for label, against in study["gains"].items()
        for m in metrics
    }
    marks = holm_marks(pvalues)
    lines = [
        "Each variant against another, test metrics paired by seed"
        + (
            "; p: paired t-test over users (each user's value averaged over the "
            f"seeds), Holm-corrected over the {sum(p is not None for p in pvalues.values())}"
            " comparisons that have per-user results (* below .05)"
            if any(p is not None for p in pvalues.values())
            else ""
        )
        + ":",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for label, against in study["gains"].items():
        runs, base = by_seed.get(label, {}), by_seed.get(against, {})
        seeds = sorted(set(runs) & set(base))
        if not seeds:
            continue
        cells = [label, against, str(len(seeds))]
        cells += [
            _gain({s: runs[s] for s in seeds}, base, m) + marks[label, m]
            for m in metrics
        ]
        cells.append(
            " vs ".join(
                fmt([side[s]["best_valid"][valid.lower()] for s in seeds])
                for side in (runs, base)
            )
        )
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _pair_words(study):
    """The label suffixes of the two sides of a study's pairs."""
    model, (a, b) = next(iter(study["pairs"].items()))
    return a[len(model) :], b[len(model) :]


def pr_notes(study_name, study, runs, reproduce):
    """``{exported model: markdown}``: what its pull request says was measured, from the
    stored runs: the reproduce rows of its labels (``reproduce``: {dataset: runs}) and
    this study's pairs."""
    results = {}
    for r in runs:
        results.setdefault(r["label"], []).append(r)
    protocol = studies.REPRODUCE_PROTOCOL
    notes = {}
    # each dataset's runs by label, and the p-values of its reproduce table (corrected
    # over that table's tests), once for every exported label
    tables = {}
    for dataset, dataset_runs in reproduce.items():
        by_label = _by_label_and_seed(dataset_runs)
        tables[dataset] = by_label, holm_marks(gain_tests(by_label))
    for label, model in studies.EXPORTED.items():
        rows = []
        for dataset, (by_label, marks) in tables.items():
            if label not in by_label:
                continue
            per_seed = by_label[label]
            loss = studies.REPRODUCE_LOSS[label]
            same = studies.SAME_LOSS_BASELINE[loss]
            rs = list(per_seed.values())
            rows.append(
                [
                    dataset,
                    label,
                    loss,
                    str(len(rs)),
                    fmt([r["test"]["ndcg@10"] for r in rs]),
                    fmt([r["test"]["recall@10"] for r in rs]),
                    _gain(
                        per_seed,
                        by_label.get(studies.REPRODUCE_BASELINE, {}),
                        "ndcg@10",
                    )
                    + marks.get((label, studies.REPRODUCE_BASELINE), ""),
                    (
                        "-"
                        if same == studies.REPRODUCE_BASELINE
                        else f"{_gain(per_seed, by_label.get(same, {}), 'ndcg@10')} ({same})"
                        + marks.get((label, same), "")
                    ),
                    ", ".join(sorted({r["device"] for r in rs})),
                ]
            )
        pair = study["pairs"].get(label)
        table = pairs_table({**study, "pairs": {label: pair}}, results) if pair else []
        if not rows and len(table) <= 4:  # no reproduce run, no pair of runs
            continue
        text = notes.setdefault(
            model,
            [
                "## Measured with recbole_attn",
                "",
                f"Generated from stored runs by `{RUNNER} --study={study_name} "
                "--report` (recbole_attn's experiments/).",
                "",
            ],
        )
        if rows:
            header = [
                "dataset",
                "variant",
                "loss",
                "seeds",
                "NDCG@10",
                "Recall@10",
                f"NDCG@10 vs {studies.REPRODUCE_BASELINE} (CE)",
                "vs SASRec of its loss",
                "device",
            ]
            text += [
                f"{label}, trained recbole_attn's way (one sequence per user, a loss "
                "at every position), under one protocol for every model: "
                "leave-one-out, full ranking over all items with the user's history "
                f"masked, test metrics at the epoch of best validation "
                f"{protocol['valid_metric']} (early stop after "
                f"{protocol['stopping_step']} validations, at most "
                f"{protocol['epochs']} epochs), mean ± std over seeds, gains paired "
                "by seed; p: a paired t-test over the test users where the runs kept "
                "per-user ranks, Holm-corrected over the tests of that dataset's "
                "table in experiments/reproduce/report.md (* below .05):",
                "",
                "| " + " | ".join(header) + " |",
                "|" + "---|" * len(header),
                *("| " + " | ".join(row) + " |" for row in rows),
                "",
            ]
        if len(table) > 4:
            text += [
                f"What RecBole's training (this pull request: one sample per "
                f"prefix, the loss at its last position) costs {label} on "
                f"{study['dataset']}, same protocol, one seed (compare the changes "
                "with the spread over seeds above):",
                "",
                *table[2:],
                "",
            ]
    return {model: "\n".join(lines) + "\n" for model, lines in notes.items()}


# ---------------------------------------------------------------------- archive


def archive_quality_table(study_name, study, runs):
    """The table of benchmarks/quality_table.py (deleted) from its runs (one per
    variant: ``valid_curve``, ``model_config``, ``test``), with what changed since."""
    by_label = {r["label"]: r for r in runs}
    results = [by_label[label] for label in study["variants"] if label in by_label]
    if not results:
        return None
    protocol = study["protocol"]
    columns = study["columns"]
    header = ["variant"] + [c.replace("recall", "Re").upper() for c in columns]
    header += ["best / run epochs", "valid NDCG@20", "model settings"]
    group = study["superseded_by"]
    lines = [
        f"# Accuracy and diversity on {study['dataset']}",
        "",
        f"Leave-one-out, full ranking over all items, history masked "
        f"(`eval_mask_history: True`), test metrics at the epoch of best validation "
        f"NDCG@20; T = {protocol['MAX_ITEM_LIST_LENGTH']}, d = 64, batch 256, lr 1e-3, "
        f"at most {protocol['epochs']} epochs, validation every {protocol['eval_step']} "
        f"epoch(s), early stop after {protocol['stopping_step']} validations without "
        f"improvement, seed {study['seeds'][0]}, one run each; all-position training for "
        "every model. Every model keeps its own yaml defaults otherwise (last column). CC "
        "and ILD use the item categories; F1 = 2ad/(a+d) with a = mean(Recall, NDCG), d "
        "= mean(CC, ILD) at the same cutoff (dataset-level means, docs/metrics.md).",
        "",
        f"**Archive, superseded by the `{group}` group** (`../{group}/report.md`: every "
        "model under one protocol, three seeds)."
        + (
            " STOSA here is the model as the paper writes it, STOSA's default when "
            "these runs were made: today `stosa_preset: paper` with "
            "`position_alignment: first` (today's default is the official code's model)."
            if any(r["model"] == "STOSA" for r in results)
            else ""
        )
        + " The script that trained these runs is gone; the runner only reports them.",
        "",
        f"Recorded with: `{study['recorded_with']}` (benchmarks/quality_table.py, deleted; "
        "last in commit 3711814).",
        "",
        f"Command: `{RUNNER} --study={study_name} --report`",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for r in results:
        curve = r["valid_curve"]
        best = max(curve, key=lambda e: e[1])[0] + 1  # first best, as RecBole keeps it
        settings = ", ".join(f"{k} {v}" for k, v in r["model_config"].items())
        cells = [r["label"]] + [f"{r['test'][c]:.4f}" for c in columns]
        cells += [
            f"{best} / {curve[-1][0] + 1}",
            f"{r['best_valid']['ndcg@20']:.4f}",
            settings,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- reproduce


def _by_label_and_seed(runs):
    found = {}
    for r in runs:
        found.setdefault(r["label"], {})[r["seed"]] = r
    return found


def _gain(runs, base, metric):
    """Relative gain over the baseline, paired by seed: mean ± std in %."""
    gains = [
        100.0 * (r["test"][metric] / base[s]["test"][metric] - 1.0)
        for s, r in runs.items()
        if s in base and base[s]["test"].get(metric)
    ]
    if not gains:
        return "-"
    mean = round(statistics.mean(gains), 1) + 0.0  # no "-0.0"
    if len(gains) == 1:
        return f"{mean:+.1f} %"
    return f"{mean:+.1f} ± {statistics.stdev(gains):.1f} %"


#: the folder, beside a study's ``runs/``, of the runs a rerun replaced: the reproduce
#: page compares them with the rerun (which labels give the same numbers, which differ
#: and why)
SUPERSEDED = "superseded"


def gain_tests(runs):
    """``{(label, against): p or None}``: the paired t-test over users behind each gain
    column of a reproduce table (``runs``: {label: {seed: run}}), NDCG@10 against
    SASRec and against the SASRec of the label's loss (one test where the two are the
    same); None where a side has no per-user ranks."""
    baseline = studies.REPRODUCE_BASELINE
    pvalues = {}
    for label in studies.REPRODUCE_MODELS:
        same = studies.SAME_LOSS_BASELINE[studies.REPRODUCE_LOSS[label]]
        for against in dict.fromkeys((baseline, same)):
            if label in runs and label != against:
                pvalues[label, against] = paired_p(
                    runs[label], runs.get(against, {}), "ndcg@10"
                )
    return pvalues


def _why_differs(old, new):
    """What differs between a stored run and its rerun besides the numbers."""
    reasons = []
    if old.get("device") != new.get("device"):
        reasons.append(f"computed on {new.get('device')} (before: {old.get('device')})")
    before, now = old.get("parameters"), new.get("parameters")
    if None not in (before, now) and before != now:
        reasons.append(
            f"{before:,} -> {now:,} trainable parameters: the model's code changed"
        )
    if old.get("stack") != new.get("stack"):
        stacks = [run.get("stack") or {} for run in (old, new)]
        torch = [s.get("torch", "not recorded") for s in stacks]
        if torch[0] != torch[1]:
            reasons.append(f"torch {torch[1]} (before: {torch[0]})")
        # the CPU (recorded since 2026-12-02), where it moved and was recorded
        if stacks[1].get("cpu") and stacks[0].get("cpu") != stacks[1]["cpu"]:
            before = stacks[0].get("cpu", "not recorded")
            reasons.append(f"cpu {stacks[1]['cpu']} (before: {before})")
    return reasons


def rerun_lines(runs, superseded):
    """The lines under a reproduce table that compare its runs with the runs they
    replaced (``superseded``: a folder of run files; none, no lines): which labels give
    the replaced numbers to the last digit and, for the others, the NDCG@10 means before
    and now and what differs between the two computations."""
    old = _by_label_and_seed(load_runs(superseded))
    labels = [m for m in studies.REPRODUCE_MODELS if m in old and m in runs]
    if not labels:
        return []
    same, rows = [], []
    accuracy = set(studies.ACCURACY)
    for label in labels:
        seeds = sorted(s for s in old[label] if s in runs[label])
        pairs = [(old[label][s], runs[label][s]) for s in seeds]
        differ = [(o, n) for o, n in pairs if o["test"] != n["test"]]
        if not differ:
            same.append(label)
            continue
        why = []
        for o, n in differ:
            why += [w for w in _why_differs(o, n) if w not in why]
        if not why:
            why.append("same device and parameters; neither run recorded its releases")
        metrics = {
            k for o, n in differ for k in o["test"] if o["test"][k] != n["test"].get(k)
        }
        if not metrics & accuracy:
            verb = "differs" if len(metrics) == 1 else "differ"
            why.append(f"only {', '.join(sorted(metrics))} {verb}: accuracy is equal")
        stopped = sum(o.get("best_epoch") != n.get("best_epoch") for o, n in differ)
        if stopped:
            why.append(f"best epoch moved on {stopped} of {len(pairs)} seeds")
        before = statistics.mean(o["test"]["ndcg@10"] for o, _ in pairs)
        now = statistics.mean(n["test"]["ndcg@10"] for _, n in pairs)
        rows.append(
            f"| {label} | {len(pairs) - len(differ)} of {len(pairs)} | "
            f"{before:.4f} -> {now:.4f} | {'; '.join(why)} |"
        )
    lines = [
        "",
        f"Rerun: these runs replaced earlier ones (in `{SUPERSEDED}/` beside `runs/`); "
        + (
            f"{', '.join(same)} give the earlier numbers to the last digit."
            if same
            else "no label gives the earlier numbers to the last digit."
        ),
    ]
    if rows:
        lines += [
            "",
            "| model | seeds equal | NDCG@10 mean before -> now | what differs |",
            "|---|---|---|---|",
            *rows,
        ]
    return lines


def gains_that_hold(sections):
    """The list of the reproduce page's last section (docs/results.md shows it too): by
    dataset, the NDCG@10 gains whose paired test over users holds after Holm's
    correction over its table, the losses that hold, and the rest (``sections``:
    (study, runs folder) pairs)."""
    lines = []
    for study, folder in sections:
        runs = _by_label_and_seed(load_runs(folder))
        adjusted = holm_adjusted(gain_tests(runs))
        tested = {k: p for k, p in adjusted.items() if p is not None}
        dataset = study["dataset"]
        if not tested:
            lines.append(f"- **{dataset}**: no per-user results, no test.")
            continue
        kinds = {"gains that hold": [], "losses that hold": [], "not significant": []}
        for (label, against), p in tested.items():
            gain = _gain(runs[label], runs[against], "ndcg@10")
            text = f"{label} vs {against} {gain} (p {_p_text(p)})"
            # the direction of the test: the users' mean over the seeds both sides have
            seeds = [s for s in runs[label] if s in runs[against]]
            better = sum(
                runs[label][s]["test"]["ndcg@10"] - runs[against][s]["test"]["ndcg@10"]
                for s in seeds
            )
            if p >= 0.05:
                kinds["not significant"].append(text)
            elif better > 0:
                kinds["gains that hold"].append(text)
            else:
                kinds["losses that hold"].append(text)
        lines.append(f"- **{dataset}** ({len(tested)} tests):")
        for kind, items in kinds.items():
            lines.append(f"  - {kind}: {'; '.join(items) or 'none'}.")
    return lines


def dataset_table(study, folder):
    """The markdown section of one reproduce study (its runs in ``folder``), and the
    per-model means for the charts."""
    dataset = study["dataset"]
    runs = _by_label_and_seed(load_runs(folder))
    if not runs:
        return f"### {dataset}\n\nNo run yet.\n", {}
    baseline = studies.REPRODUCE_BASELINE
    loss = studies.REPRODUCE_LOSS
    base = runs.get(baseline, {})
    base_epoch = (
        statistics.median(r["seconds_per_epoch"] for r in base.values()) if base else 0
    )
    columns = study["columns"]
    header = ["model", "loss", "seeds"] + columns
    header += [
        f"NDCG@10 vs {baseline}",
        "NDCG@10 vs SASRec of its loss",
        "s/epoch ratio",
    ]
    header += ["device", "paper (this protocol)"]
    lines = [f"### {dataset}", "", "| " + " | ".join(header) + " |"]
    lines.append("|" + "---|" * len(header))
    # both gain columns: a paired t-test over users where the runs have per-user ranks,
    # Holm-corrected over every test in this table
    pvalues = gain_tests(runs)
    marks = holm_marks(pvalues)
    tested = sum(p is not None for p in pvalues.values())
    means = {}
    for label in studies.REPRODUCE_MODELS:
        if label not in runs:
            continue
        per_seed = runs[label]
        rs = list(per_seed.values())
        cells = [label, loss[label], str(len(rs))]
        cells += [fmt([r["test"][c] for r in rs if c in r["test"]]) for c in columns]
        cells.append(
            "baseline"
            if label == baseline
            else _gain(per_seed, base, "ndcg@10") + marks.get((label, baseline), "")
        )
        same = studies.SAME_LOSS_BASELINE[loss[label]]
        cells.append(
            "baseline"
            if label == same or (label == baseline)
            else f"{_gain(per_seed, runs.get(same, {}), 'ndcg@10')} (vs {same})"
            + marks.get((label, same), "")
        )
        epoch = statistics.median(r["seconds_per_epoch"] for r in rs)
        cells.append(f"{epoch / base_epoch:.2f}" if base_epoch else "-")
        cells.append(", ".join(sorted({r["device"] for r in rs})))
        paper = studies.REPRODUCE_PAPER.get((label, dataset))
        cells.append(
            ", ".join(f"{k} {v:.4f}" for k, v in paper.items()) if paper else "-"
        )
        lines.append("| " + " | ".join(cells) + " |")
        means[label] = {
            c: statistics.mean([r["test"][c] for r in rs])
            for c in columns
            if all(c in r["test"] for r in rs)
        }
        means[label]["std ndcg@10"] = (
            statistics.stdev([r["test"]["ndcg@10"] for r in rs]) if len(rs) > 1 else 0.0
        )
    if tested:
        lines += [
            "",
            f"p: paired t-test over the {dataset} test users of NDCG@10 (each user's "
            f"value averaged over the seeds), Holm-corrected over the {tested} tests of "
            "this table that have per-user results; * below .05.",
        ]
    with_ranks = [
        label
        for label in studies.REPRODUCE_MODELS
        if label in runs and all("test_ranks" in r for r in runs[label].values())
    ]
    without = [label for label in studies.REPRODUCE_MODELS if label in runs]
    without = [label for label in without if label not in with_ranks]
    lines += [
        "",
        "Per-user results (every test user's rank of the target, which the paired "
        "tests need): "
        + (
            f"all {len(with_ranks)} rows."
            if not without
            else f"{len(with_ranks)} of {len(with_ranks) + len(without)} rows"
            + (f" ({', '.join(with_ranks)})" if with_ranks else "")
            + f"; without them (run before the runner kept them): {', '.join(without)}."
        ),
    ]
    lines += rerun_lines(runs, os.path.join(os.path.dirname(folder), SUPERSEDED))
    skipped = study.get("skipped", [])
    if skipped:
        lines += [
            "",
            f"Not run on {dataset}: {', '.join(skipped)} (reads item categories; "
            f"{dataset} has none).",
        ]
    missing = [m for m in study["variants"] if m not in runs]
    if missing:
        lines += ["", f"Not run yet on {dataset}: {', '.join(missing)}."]
    one_seed = [m for m in studies.REPRODUCE_MODELS if len(runs.get(m, {})) == 1]
    if one_seed:
        which = "every model" if len(one_seed) == len(runs) else ", ".join(one_seed)
        lines += [
            "",
            f"One seed only for {which}: no spread over seeds, so a gain of a few "
            "percent may be seed noise (`--seeds` adds seeds; finished runs are kept).",
        ]
    return "\n".join(lines) + "\n", means


def plots(all_means, output):
    """Two PNGs: NDCG@10 per model and dataset (bars, std over seeds) and NDCG@10 against
    ILD@10 (accuracy vs diversity)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(studies.REPRODUCE_MODELS)
    loss = studies.REPRODUCE_LOSS
    datasets = [d for d in all_means if all_means[d]]
    labels = [m for m in models if any(m in all_means[d] for d in datasets)]
    paths = []
    fig, ax = plt.subplots(figsize=(2 + 1.2 * len(labels), 4))
    width = 0.8 / max(1, len(datasets))
    for j, dataset in enumerate(datasets):
        xs = [i + j * width for i, m in enumerate(labels) if m in all_means[dataset]]
        ys = [
            all_means[dataset][m]["ndcg@10"] for m in labels if m in all_means[dataset]
        ]
        err = [
            all_means[dataset][m]["std ndcg@10"]
            for m in labels
            if m in all_means[dataset]
        ]
        ax.bar(xs, ys, width, yerr=err, label=dataset, capsize=2)
    ax.set_xticks(
        [i + 0.4 - width / 2 for i in range(len(labels))], labels, rotation=30
    )
    ax.set_ylabel("test NDCG@10")
    ax.legend()
    fig.tight_layout()
    paths.append(os.path.join(output, "reproduction_accuracy.png"))
    fig.savefig(paths[-1], dpi=100)
    plt.close(fig)
    # accuracy vs diversity where the dataset has categories
    diverse = [d for d in datasets if any("ild@10" in v for v in all_means[d].values())]
    if not diverse:
        return paths
    legend_width = 2.4  # inches, right of the panels
    width = 4.5 * len(diverse) + legend_width
    fig, axes = plt.subplots(1, len(diverse), figsize=(width, 4))
    axes = axes if len(diverse) > 1 else [axes]
    marker = {"CE": "o", "BCE": "s", "BPR": "^"}
    handles = {}
    for ax, dataset in zip(axes, diverse):
        for label, values in all_means[dataset].items():
            if "ild@10" in values:
                # one color per model and one marker per loss, the same on every panel;
                # a legend, not labels at the points (models of one loss overlap)
                color = plt.cm.tab20(models.index(label) % 20)
                handles[label] = ax.scatter(
                    values["ndcg@10"],
                    values["ild@10"],
                    color=color,
                    marker=marker[loss[label]],
                    edgecolors="black",
                    linewidths=0.4,
                )
        ax.set_xlabel("test NDCG@10")
        ax.set_ylabel("test ILD@10")
        ax.set_title(dataset)
    labels = [m for m in models if m in handles]
    fig.legend(
        [handles[m] for m in labels],
        [m if f"({loss[m]})" in m else f"{m} ({loss[m]})" for m in labels],
        loc="center right",
        bbox_to_anchor=(0.99, 0.5),
        fontsize=8,
    )
    fig.tight_layout(rect=(0, 0, 1 - legend_width / width, 1))
    paths.append(os.path.join(output, "reproduction_diversity.png"))
    fig.savefig(paths[-1], dpi=100)
    plt.close(fig)
    return paths


def reproduce_page(sections, output, quick=False, gains=None):
    """The reproduce group's page: ``sections`` is a list of (study, runs folder), one
    per dataset; the two charts are written into ``output`` beside the page. ``gains``:
    the lines of :func:`gains_that_hold` of these sections, where the caller has them.
    """
    text = [
        "# All mechanisms under one protocol",
        "",
        "Leave-one-out, full ranking, history masked; test metrics at the epoch of best "
        "validation NDCG@10 (early stop after 10 validations without improvement, at most "
        "200 epochs); every model with its yaml's hyperparameters, its paper's (PAtt's "
        "dropout: its official README's 0.4, chosen on validation), AWRSR with "
        "M_simp. Mean ± std over seeds; the gains over SASRec are paired by seed (the "
        "papers train with different losses, so each model is also compared with SASRec "
        "trained with its own loss where that run exists). The s/epoch ratio is the "
        "median epoch time of these runs over SASRec's; they shared the machine with "
        "other runs, so it is rough: `../speed/models_Office.md` has interleaved "
        "measurements. The device column says where each row ran: a CPU run gives the "
        "same numbers again on the same releases, a GPU run does not (other arithmetic, "
        f"some kernels nondeterministic). Generated by `{RUNNER} --group=reproduce` "
        "(`--report` rebuilds this page).",
        "",
    ]
    if quick:
        text += ["**Quick mode: a synthetic fixture, one epoch: no meaning.**", ""]
    all_means = {}
    for study, folder in sections:
        table, means = dataset_table(study, folder)
        text += [table]
        all_means[study["dataset"]] = means
    if any(all_means.values()):
        for path in plots(all_means, output):
            text.append(f"![{os.path.basename(path)}]({os.path.basename(path)})")
            text.append("")
    text += [
        "## Which gains hold",
        "",
        "From the gain columns above: a difference holds when its paired t-test over "
        "the test users, Holm-corrected over its table's tests, is below .05.",
        "",
        *(gains if gains is not None else gains_that_hold(sections)),
        "",
    ]
    return "\n".join(text)


# ---------------------------------------------------------------------- budget studies


def replay_early_stopping(curve, patience, epochs=None):
    """RecBole's early stopping replayed on a stored validation curve (one score per
    evaluation, bigger is better): a score equal to or above the best so far is the new
    best, the run stops after ``patience`` + 1 evaluations in a row without one (RecBole's
    ``early_stopping``: ``cur_step > max_step``) or after ``epochs`` evaluations.
    Returns ``(selected, run)``: the 0-based index of the selected evaluation and how many
    evaluations ran."""
    best, selected, since = float("-inf"), -1, 0
    limit = len(curve) if epochs is None else min(epochs, len(curve))
    for i in range(limit):
        if curve[i] >= best:
            best, selected, since = curve[i], i, 0
        else:
            since += 1
            if since > patience:
                return selected, i + 1
    return selected, limit


def budget_table(study_name, study, runs, all_budgets=None):
    """What each early-stopping patience would have given, replayed on the stored
    validation curves of runs trained at the largest one: evaluations run, the selected
    epoch, its validation score and the test metrics of that epoch's model (stored per
    epoch); with ``all_budgets`` ({study name: (study, runs)} of every budget study), the
    patience the choice rule (``studies.BUDGET_RULE``) picks over all of them. None
    without a run."""
    runs = [r for r in runs if "valid_curve" in r and "test_curve" in r]
    if not runs:
        return None
    runs.sort(key=lambda r: r["seed"])
    cols = study["columns"]
    largest = max(study["patiences"])
    valid_metric = study["protocol"].get(
        "valid_metric", runs[0]["config"].get("valid_metric", "score")
    )
    lines = [
        f"# {study_name}: {study['dataset']}",
        "",
        f"{study['variants'][study['baseline']][0]} with the plain command's settings "
        f"(its yaml, full ranking), trained {study['protocol']['epochs']} epochs with "
        f"patience {largest}; every epoch's validation {valid_metric} and test metrics "
        "stored, each smaller patience replayed on the validation curve (RecBole's "
        "early stopping: the run ends after patience + 1 evaluations without a better "
        "score). Test numbers are those of the epoch each patience selects on "
        "validation. Seeds: " + ", ".join(str(r["seed"]) for r in runs) + ".",
        "",
        f"Choice rule: {studies.BUDGET_RULE}.",
        "",
        f"Command: `{RUNNER} --study={study_name} --threads=1`",
        "",
    ]
    header = (
        ["patience", "epochs run", "cost vs " + str(largest), "selected epochs"]
        + [f"valid {valid_metric}", "same epoch as " + str(largest)]
        + cols
    )
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    full = {
        r["seed"]: replay_early_stopping(
            r["valid_curve"], largest, study["protocol"]["epochs"]
        )
        for r in runs
    }
    for patience in study["patiences"]:
        picks = {
            r["seed"]: replay_early_stopping(
                r["valid_curve"], patience, study["protocol"]["epochs"]
            )
            for r in runs
        }
        run_total = sum(run for _, run in picks.values())
        full_total = sum(run for _, run in full.values())
        same = sum(picks[s][0] == full[s][0] for s in picks)
        row = [
            str(patience),
            ", ".join(str(picks[r["seed"]][1]) for r in runs),
            f"{run_total / full_total:.2f}",
            ", ".join(str(picks[r["seed"]][0] + 1) for r in runs),
            fmt([r["valid_curve"][picks[r["seed"]][0]] for r in runs]),
            f"{same}/{len(runs)}",
        ] + [fmt([r["test_curve"][picks[r["seed"]][0]][c] for r in runs]) for c in cols]
        lines.append("| " + " | ".join(row) + " |")
    seconds = [r["seconds_per_epoch"] for r in runs]
    lines += [
        "",
        f"Seconds per epoch (training and validation, the test trace not counted): "
        f"median {statistics.median(seconds):.2f} on {runs[0]['device']}.",
        "",
    ]
    if all_budgets:
        patience, reason = budget_choice(all_budgets)
        names = ", ".join(sorted(all_budgets))
        lines += [
            f"Chosen on validation over {names}: "
            + (f"patience {patience} ({reason})." if patience else reason + "."),
            "",
        ]
    return "\n".join(lines)


def budget_choice(tables):
    """The patience :data:`studies.BUDGET_RULE` picks from the replays of several budget
    studies: ``tables`` maps a study name to ``(study, runs)``. Returns ``(patience,
    reason)``, or ``(None, reason)`` when no run is stored."""
    per_study = {}
    for name, (study, runs) in tables.items():
        runs = [r for r in runs if "valid_curve" in r]
        if not runs:
            return None, f"{name} has no run with a validation curve"
        largest = max(study["patiences"])
        epochs = study["protocol"]["epochs"]
        per_study[name] = {}
        for p in study["patiences"]:
            picks = [replay_early_stopping(r["valid_curve"], p, epochs) for r in runs]
            full = [
                replay_early_stopping(r["valid_curve"], largest, epochs) for r in runs
            ]
            valid = statistics.mean(
                r["valid_curve"][s] for r, (s, _) in zip(runs, picks)
            )
            valid_full = statistics.mean(
                r["valid_curve"][s] for r, (s, _) in zip(runs, full)
            )
            per_study[name][p] = (
                all(a[0] == b[0] for a, b in zip(picks, full)),
                valid >= 0.99 * valid_full,
            )
    patiences = sorted(next(iter(tables.values()))[0]["patiences"])
    smaller = patiences[:-1]
    for p in smaller:
        if all(rows[p][0] for rows in per_study.values()):
            return p, "the same epoch as the largest patience in every seed"
    for p in smaller:
        if all(rows[p][1] for rows in per_study.values()):
            return p, (
                "no smaller patience selects the same epochs everywhere; its mean "
                "validation score is within 1 % of the largest patience's in every study"
            )
    return patiences[-1], "no smaller patience meets the rule"


# ---------------------------------------------------------------------- per-user tests


def user_values(run, metric, ranks="test_ranks"):
    """A run's per-user test values of a top-K accuracy metric (``recall@10``,
    ``ndcg@10``, ``mrr@20``, ``hit@5``, ``precision@5``; any cutoff below the stored
    cap, every cutoff where the ranks were stored whole: the study's ``full_ranks``),
    recomputed from its stored target ranks (leave-one-out: one target per user); None
    without ranks or for a metric the ranks do not give. ``ranks="valid_ranks"``: the
    validation users' values (a study with ``valid_ranks``)."""
    import math

    stored = run.get(ranks)
    name, _, k = metric.partition("@")
    if not stored or not k.isdigit() or int(k) >= stored["cap"]:
        return None
    k = int(k)
    value = {
        "recall": lambda r: float(r <= k),
        "hit": lambda r: float(r <= k),
        "precision": lambda r: float(r <= k) / k,
        "ndcg": lambda r: 1.0 / math.log2(r + 1) if r <= k else 0.0,
        "mrr": lambda r: 1.0 / r if r <= k else 0.0,
    }.get(name)
    return None if value is None else [value(r) for r in stored["ranks"]]


def paired_p(runs, base, metric, ranks="test_ranks"):
    """The paired t-test over users of ``runs`` against ``base`` (both {seed: run}):
    each user's value averaged over the seeds both sides have, then tested (scipy); None
    when a run has no per-user ranks or the two were tested on other data.
    ``ranks="valid_ranks"``: over the validation users."""
    from scipy import stats

    seeds = sorted(s for s in runs if s in base)
    if not seeds:
        return None
    sides = []
    for side in (runs, base):
        values = [user_values(side[s], metric, ranks) for s in seeds]
        if any(v is None for v in values):
            return None
        sides.append([statistics.mean(u) for u in zip(*values)])
    datas = {str(side[s][ranks]["data"]) for side in (runs, base) for s in seeds}
    if len(datas) != 1 or len(sides[0]) != len(sides[1]):
        return None
    if sides[0] == sides[1]:
        return 1.0
    return float(stats.ttest_rel(sides[0], sides[1]).pvalue)


def holm_adjusted(pvalues):
    """``{key: p or None}`` with every p Holm-adjusted across the keys that have one."""
    from recbole_attn.commands.compare import holm

    keys = [k for k, p in pvalues.items() if p is not None]
    adjusted = dict(zip(keys, holm([pvalues[k] for k in keys])))
    return {key: adjusted.get(key) for key in pvalues}


def _p_text(p):
    return f"{p:.3f}".lstrip("0") if p >= 0.001 else "<.001"


def holm_marks(pvalues, alpha=0.05):
    """``{key: text}`` for ``{key: p or None}``: Holm-corrected across the keys that
    have a p-value, ``p .003*`` (``*``: below ``alpha``); ``""`` without one."""
    return {
        key: "" if p is None else f" (p {_p_text(p)}{'*' if p < alpha else ''})"
        for key, p in holm_adjusted(pvalues).items()
    }


# ---------------------------------------------------------------------- STOSA's Table 1

#: the columns of STOSA's Table 1. Its MRR is the official code's: over the 40 items it
#: keeps per user (trainers.py, utils.cal_mrr), so MRR@40, from the per-user ranks
TABLE1_METRICS = ("recall@1", "recall@5", "ndcg@5", "mrr@40")
TABLE1_NAMES = {"recall@1": "R@1", "recall@5": "R@5", "ndcg@5": "N@5", "mrr@40": "MRR"}


def table1_value(run, metric):
    """A run's test value of a Table 1 column: RecBole's where the run computed it,
    else the mean of the per-user values its stored ranks give (None without them)."""
    if metric in run["test"]:
        return run["test"][metric]
    values = user_values(run, metric)
    return None if values is None else statistics.mean(values)


def _ratio(values, paper):
    return f"{statistics.mean(values) / paper:.2f}" if values and paper else "-"


def _table1_rows(sections, official_column=True):
    """The lines of STOSA's Table 1 over ``sections`` ([(study, runs folder)], one per
    dataset; the runs labelled STOSA and SASRec) and what each model's runs took:
    per dataset and metric the paper's STOSA and SASRec, ours (mean ± sd over seeds)
    and ours relative to the paper's, STOSA's gain over our SASRec (paired by seed, with
    the paired t-test over test users, each user averaged over the seeds both have,
    Holm-corrected over the whole table) beside the paper's gain. Returns (table lines,
    times: [(dataset, label, study, {seed: run})])."""
    rows, pvalues, times = [], {}, []
    for study, folder in sections:
        dataset = study["dataset"]
        paper = studies.STOSA_TABLE1_PAPER[dataset]
        official = studies.STOSA_TABLE1_OFFICIAL.get(dataset, {})
        runs = _by_label_and_seed(load_runs(folder))
        stosa, sasrec = runs.get("STOSA", {}), runs.get("SASRec", {})
        for label, of_label in (("STOSA", stosa), ("SASRec", sasrec)):
            if of_label:
                times.append((dataset, label, study, of_label))
        for metric in TABLE1_METRICS:
            ours = {
                label: [
                    v
                    for v in (table1_value(r, metric) for r in of.values())
                    if v is not None
                ]
                for label, of in (("STOSA", stosa), ("SASRec", sasrec))
            }
            paired = [
                table1_value(stosa[s], metric) / table1_value(sasrec[s], metric) - 1.0
                for s in sorted(set(stosa) & set(sasrec))
                if table1_value(sasrec[s], metric)
                and table1_value(stosa[s], metric) is not None
            ]
            pvalues[dataset, metric] = paired_p(stosa, sasrec, metric)
            rows.append(
                [
                    dataset,
                    TABLE1_NAMES[metric],
                    f"{paper['STOSA'][metric]:.4f}",
                    fmt(ours["STOSA"]),
                    _ratio(ours["STOSA"], paper["STOSA"][metric]),
                    *(
                        [f"{official[metric]:.4f}" if metric in official else "-"]
                        if official_column
                        else []
                    ),
                    f"{paper['SASRec'][metric]:.4f}",
                    fmt(ours["SASRec"]),
                    _ratio(ours["SASRec"], paper["SASRec"][metric]),
                    _change(paper["STOSA"][metric], paper["SASRec"][metric]),
                    (
                        f"{100.0 * statistics.mean(paired):+.1f} %"
                        + (
                            ""
                            if len(paired) < 2
                            else f" ± {100.0 * statistics.stdev(paired):.1f}"
                        )
                        if paired
                        else "-"
                    ),
                    (dataset, metric),
                ]
            )
    marks = holm_marks(pvalues)
    header = [
        "dataset",
        "metric",
        "paper STOSA",
        "ours STOSA",
        "ours / paper",
        *(["official code (run here)"] if official_column else []),
        "paper SASRec",
        "ours SASRec (BCE)",
        "ours / paper",
        "paper: STOSA over SASRec",
        "ours: STOSA over SASRec (p)",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for *cells, key in rows:
        if cells[-1] != "-":
            cells[-1] += marks.get(key, "")
        lines.append("| " + " | ".join(cells) + " |")
    return lines, times


def _cost_cells(runs):
    """What ``runs`` (of one model, seed order) took and where: their seeds, best / run
    epochs, median s / epoch, minutes per run, devices (the cells of a cost table)."""
    return [
        ", ".join(str(r["seed"]) for r in runs),
        ", ".join(f"{r['best_epoch']}/{r['epochs_run']}" for r in runs),
        f"{_median_epoch(runs):.2f}",
        ", ".join(f"{r['seconds'] / 60:.0f}" for r in runs),
        ", ".join(sorted({r["device"] for r in runs})),
    ]


def _table1_costs(times):
    """The lines of the table of what each model's runs took and where they ran."""
    lines = [
        "| dataset | model | seeds | best / run epochs | s / epoch | min / run | device |",
        "|---|---|---|---|---|---|---|",
    ]
    for dataset, label, study, of_label in times:
        runs_of = [of_label[s] for s in sorted(of_label)]
        lines.append(
            "| "
            + " | ".join(
                [
                    dataset,
                    label,
                    *_cost_cells(runs_of),
                ]
            )
            + " |"
        )
    return lines


def _table1_missing(sections):
    """The line that lists the runs not made yet (none when all are)."""
    missing = []
    for study, folder in sections:
        todo = {
            label: [
                str(seed)
                for seed in study["seeds"]
                if not os.path.isfile(
                    os.path.join(folder, f"{studies.slug(label)}__seed{seed}.json")
                )
            ]
            for label in study["variants"]
        }
        parts = [
            f"{label} {', '.join(seeds)}" for label, seeds in todo.items() if seeds
        ] + [
            f"{label}: its search has not finished"
            for label in study.get("searches", {})
            if label not in study["variants"]
        ]
        if parts:
            missing.append(f"{study['dataset']} ({'; '.join(parts)})")
    return ["", "Not run yet (seeds): " + ", ".join(missing) + "."] if missing else []


def _seeds_of(times):
    return sorted({s for _, _, _, of in times for s in of})


#: the short names of the searched keys on the stosa_tuned page (App. C's words)
SEARCHED_NAMES = {
    "hidden_size": "d",
    "MAX_ITEM_LIST_LENGTH": "T",
    "learning_rate": "lr",
    "weight_decay": "L2",
    "hidden_dropout_prob": "dropout",
    "n_layers": "layers",
    "n_heads": "heads",
}


def search_state(folder):
    """What a search's output folder holds (``recbole-attn ... --params_file=...
    --output=<folder>``): ``{"state", "trials", "total", "result"}``; state is
    ``finished`` (its result.json, written last), ``interrupted`` (its
    interrupted.json: the trials finished so far) or ``not started``."""
    for name, state in (
        ("result.json", "finished"),
        ("interrupted.json", "interrupted"),
    ):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                record = json.load(f)
            total = record.get("total", len(record["trials"]))
            return {
                "state": state,
                "trials": record["trials"],
                "total": total,
                "result": record if state == "finished" else None,
            }
    return {"state": "not started", "trials": [], "total": None, "result": None}


def searched_text(params):
    """``d 64, T 50, lr 0.001, ...``: a configuration of the searched keys."""
    return ", ".join(f"{SEARCHED_NAMES.get(k, k)} {v}" for k, v in params.items())


def _trial_hours(trials):
    """The trials' own wall time summed, in hours (``-`` unless every trial kept its
    ``seconds``: searches before 2026-12-03 kept none)."""
    if not trials or any(t.get("seconds") is None for t in trials):
        return "-"
    return f"{sum(t['seconds'] for t in trials) / 3600:.1f}"


def _search_rows(sections, root):
    """The lines of the table of the searches behind ``sections``' variants."""
    lines = [
        "| dataset | model | search | trials | stopped by ASHA | epochs trained "
        "| trial hours | selected on validation | its valid MRR@20 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for study, _ in sections:
        for label, search in study["searches"].items():
            state = search_state(os.path.join(root, search))
            trials = state["trials"]
            if state["state"] == "finished":
                best = state["result"]
                chosen = searched_text(best["best_params"])
                score = f"{best['best_valid_score']:.4f}"
            elif trials:
                best = max(trials, key=lambda t: t["best_valid_score"])
                chosen = f"none yet (best so far: {searched_text(best['params'])})"
                score = f"({best['best_valid_score']:.4f})"
            else:
                chosen, score = "none yet", "-"
            done = f"{len(trials)} of {state['total']}" if state["total"] else "0"
            cut = sum(t["stop_reason"] == "stopped by ASHA" for t in trials)
            lines.append(
                f"| {study['dataset']} | {label} | `{search}/` ({state['state']}) "
                f"| {done} | {cut} | {sum(t['epochs'] for t in trials)} "
                f"| {_trial_hours(trials)} | {chosen} | {score} |"
            )
    return lines


def stosa_tuned_page(group_name, sections, root):
    """STOSA's Table 1 as the paper tuned it (``sections``: [(study, runs folder)], one
    per dataset, each variant's configuration selected by its search, whose folder
    under ``root`` the study names): the searches (trials, what ASHA cut, the epochs
    they trained, the selection), then the table of :func:`_table1_rows` from three
    seeds of each selected configuration, and what each run took."""
    table, times = _table1_rows(sections, official_column=False)
    seeds = _seeds_of(times)
    protocol = studies.STOSA_PAPER_STOPPING
    lines = [
        f"# {group_name}: STOSA's Table 1 as the paper tuned it",
        "",
        "The paper's App. C: \"We grid search all parameters and report the test "
        "performance based on the best validation results\". Each model's configuration "
        "here is the one its search selected on validation MRR@20 "
        "(`recbole-attn ... --params_file=experiments/stosa_tuned/<model>.hyper`: the "
        "paper's grid with a weight decay of 0 added, 48 configurations drawn at random, "
        "ASHA with a grace period of 50 evaluations; experiments/stosa_tuned/README.md). "
        "The search's own test of its selection is not used: the rows below are fresh "
        "seeds of the selected configuration.",
        "",
        "Protocol: STOSA's Table 1 (the authors' sequence files, leave-one-out, full "
        "ranking with the user's already-seen items masked; R@K and N@K RecBole's, MRR "
        "the official code's MRR@40 from each test user's stored rank) with the paper's "
        f"stopping rule: early stop after {protocol['stopping_step']} validations "
        f"without a better {protocol['valid_metric']}, a cap of {protocol['epochs']} "
        "epochs, test at the best validation epoch, for every trial and every run. "
        "STOSA: its defaults (the reference code's value covariances) but the searched "
        "keys; SASRec: RecBole's SASRec layers on all positions with the SASRec paper's "
        "BCE loss, its defaults but the searched keys. Mean ± sd over seeds "
        f"({', '.join(map(str, seeds)) or 'none yet'}); gains paired by seed, p: paired "
        "t-test over the test users (each user averaged over the seeds), Holm-corrected "
        "over every cell of the table, * below .05.",
        "",
        f"Command: the searches of experiments/stosa_tuned/README.md, then "
        f"`{RUNNER} --group={group_name} --select` (declares each finished search's "
        f"selection), then `{RUNNER} --group={group_name} --jobs=2 --threads=1` "
        f"(resumable) and `{RUNNER} --group={group_name} --report`",
        "",
        "## The searches",
        "",
        "Trials: finished of drawn; epochs trained: by every finished trial (a trial that "
        "was running when a search was stopped starts again and is not counted); trial "
        "hours: the finished trials' own wall times summed (- for the searches that "
        "kept none, before 2026-12-03: their cost, from the logs, is in "
        "experiments/stosa_tuned/README.md). Two trials at a time on a 2-core CPU, one "
        "torch thread each.",
        "",
        *_search_rows(sections, root),
        "",
        "## Table 1 with the selected configurations",
        "",
        *table,
        "",
        "What each run took, where it ran (minutes of wall time per run; epochs: best / "
        "run; two runs at a time on a 2-core CPU, one torch thread each, unless the "
        "device says otherwise):",
        "",
        *_table1_costs(times),
        *_table1_missing(sections),
    ]
    return "\n".join(lines) + "\n"


def stosa_table1_page(group_name, sections):
    """STOSA's Table 1 (``sections``: [(study, runs folder)], one per dataset): the
    table of :func:`_table1_rows` with the official code's column, then what each run
    took and where it ran."""
    table, times = _table1_rows(sections)
    seeds = _seeds_of(times)
    protocol = studies.STOSA_TABLE1_PROTOCOL
    lines = [
        f"# {group_name}: STOSA's Table 1 on its four datasets",
        "",
        "Protocol (the paper's Table 1): the authors' sequence files, leave-one-out, full "
        "ranking over all items with the user's already-seen items masked. R@K and N@K "
        "are RecBole's; MRR is the official code's, which keeps 40 items per user "
        "(trainers.py, utils.cal_mrr: a target below them counts 0), so MRR@40, "
        "computed from each test user's stored rank. Both models "
        f"train with STOSA.yaml's budget: at most {protocol['epochs']} epochs, early stop "
        f"after {protocol['stopping_step']} validations without a better "
        f"{protocol['valid_metric']}, test at the best validation epoch. STOSA: its "
        "defaults (what `recbole-attn --model=STOSA` trains). SASRec: RecBole's SASRec "
        "layers and defaults (2 layers, 2 heads, d 64, dropout 0.5) trained on all "
        "positions with the SASRec paper's BCE loss (one sampled negative), T 100 as "
        "STOSA. Mean ± sd over seeds "
        f"({', '.join(map(str, seeds)) or 'none yet'}). Gains are paired by seed (mean ± "
        "sd of the per-seed relative gains); p: paired t-test over the test users (each "
        "user's value averaged over the seeds), Holm-corrected over every cell of the "
        "table, * below .05. The official STOSA code's numbers were run here on 2 CPU "
        "cores (seed 42; docs/results.md).",
        "",
        f"Command: `{RUNNER} --group={group_name} --jobs=2 --threads=1` (resumable; "
        f"`--seeds=2020` for one seed), then `{RUNNER} --group={group_name} --report`",
        "",
        *table,
        "",
        "What each run took, where it ran (minutes of wall time per run; epochs: best / "
        "run; two runs at a time on a 2-core CPU, one torch thread each, unless the "
        "device says otherwise):",
        "",
        *_table1_costs(times),
        *_table1_missing(sections),
    ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- the papers' tables


def paper_table_value(run, metric):
    """A run's test value of a paper-table column (as :func:`table1_value`)."""
    return table1_value(run, metric)


def _values(of_label, metric):
    return [
        v
        for v in (paper_table_value(r, metric) for _, r in sorted(of_label.items()))
        if v is not None
    ]


def _paired_gain(runs, base, metric):
    """The per-seed relative gains (in %) of ``runs`` over ``base`` ({seed: run})."""
    gains = []
    for seed in sorted(set(runs) & set(base)):
        new, old = (paper_table_value(side[seed], metric) for side in (runs, base))
        if new is not None and old:
            gains.append(100.0 * (new / old - 1.0))
    return gains


def _gain_text(gains):
    if not gains:
        return "-"
    mean = round(statistics.mean(gains), 1) + 0.0
    spread = "" if len(gains) < 2 else f" ± {statistics.stdev(gains):.1f}"
    return f"{mean:+.1f}{spread} %"


def _study_runs(study, folder):
    """{label: {seed: run}} of a paper-table study, with the rows it borrows from
    another study's runs (``borrowed``: label -> (study, label there))."""
    runs = _by_label_and_seed(load_runs(folder))
    root = os.path.dirname(os.path.dirname(folder))
    for label, (other, there) in study.get("borrowed", {}).items():
        theirs = _by_label_and_seed(load_runs(os.path.join(root, other, "runs")))
        runs[label] = theirs.get(there, {})
    return runs


def _selection_text(study, runs):
    """Which of the study's ``select_on_validation`` labels (the paper's "best variant")
    has the higher mean validation score: the one whose test numbers stand for the
    paper's model (never chosen on test)."""
    metric = study["protocol"]["valid_metric"].lower()
    means = {
        label: statistics.mean(r["best_valid"][metric] for r in runs[label].values())
        for label in study["select_on_validation"]
        if runs.get(label)
    }
    if not means:
        return "Chosen on validation: no run yet."
    best = max(means, key=means.get)
    scores = ", ".join(f"{label} {value:.4f}" for label, value in means.items())
    return (
        f"Chosen on validation (mean {study['protocol']['valid_metric']} over seeds: "
        f"{scores}): **{best}** stands for the paper's model."
    )


def sections_block(page):
    """What docs/results.md shows of a group's page (paper_tables, stosa_tuned): its
    sections, two heading levels down (the page's title and command stay in the
    report)."""
    body = page.split("\n## ", 1)[1] if "\n## " in page else ""
    body = "\n## " + body
    return body.replace("\n### ", "\n##### ").replace("\n## ", "\n#### ").lstrip("\n")


def paper_tables_page(group_name, sections):
    """Each paper's own table (``sections``: [(study, runs folder)], each study with
    ``paper_table``, ``paper_numbers``, ``paired``): per (dataset, model) the paper's
    numbers, ours (the mean, or the median where the paper reports medians, ± the sd
    over seeds) and ours relative to the paper's; per (model, baseline) our gain paired
    by seed, the paired t-test over the test users (each user's value averaged over the
    seeds both have) Holm-corrected over that paper's table, beside the paper's gain;
    then what each run took and where it ran."""
    papers = {}
    for study, folder in sections:
        papers.setdefault(study["paper_table"], []).append((study, folder))
    lines = [
        f"# {group_name}: each paper's own table on its own data",
        "",
        "One section per paper: its protocol, its numbers beside ours, and each gain it "
        "claims tested on ours. Ours: three seeds of every (dataset, model), each test "
        "user's rank stored. Levels are the mean ± sd over seeds (the median where the "
        "paper reports the median of its runs); `ours / paper` divides that centre by "
        "the paper's number. Gains are paired by seed (mean ± sd of the per-seed "
        "relative gains); p: paired t-test over the test users (each user's value "
        "averaged over the seeds both sides have), Holm-corrected over the paper's "
        "whole table (every dataset, model and metric of it), * below .05.",
        "",
        f"Command: `{RUNNER} --group={group_name} --jobs=2 --threads=1` (resumable), "
        f"then `{RUNNER} --group={group_name} --report`",
    ]
    times = []
    for paper, parts in papers.items():
        lines += ["", f"## {paper}", ""]
        pvalues, gain_rows, shown = {}, [], None
        for study, folder in parts:
            dataset, cols = study["dataset"], study["columns"]
            numbers = study["paper_numbers"]
            median = study.get("median", False)
            runs = _study_runs(study, folder)
            lines += [f"### {dataset}", ""]
            if study["protocol_text"] != shown:
                lines += [study["protocol_text"], ""]
                shown = study["protocol_text"]
            header = ["model", "seeds"] + [
                f"{c}: ours (paper, ours / paper)" for c in cols
            ]
            lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            for label in [*study.get("borrowed", {}), *study["variants"]]:
                of_label = runs.get(label, {})
                if of_label:
                    times.append((paper, dataset, label, of_label))
                cells = [label, ", ".join(map(str, sorted(of_label))) or "-"]
                for metric in cols:
                    values = _values(of_label, metric)
                    theirs = numbers.get(label, {}).get(metric)
                    centre = (
                        statistics.median(values)
                        if median and values
                        else (statistics.mean(values) if values else None)
                    )
                    text = fmt(values, median=median)
                    if theirs is not None:
                        ratio = f"{centre / theirs:.2f}" if centre is not None else "-"
                        text += f" ({theirs:.4f}, {ratio})"
                    cells.append(text)
                lines.append("| " + " | ".join(cells) + " |")
            lines.append("")
            for label, base in study["paired"]:
                mine, theirs_base = runs.get(label, {}), runs.get(base, {})
                for metric in cols:
                    pvalues[dataset, label, base, metric] = paired_p(
                        mine, theirs_base, metric
                    )
                gain_rows.append((dataset, label, base, mine, theirs_base, cols))
            if study.get("select_on_validation"):
                lines += [_selection_text(study, runs), ""]
        marks = holm_marks(pvalues)
        metrics = list(dict.fromkeys(c for *_, cols in gain_rows for c in cols))
        header = ["dataset", "model", "over"] + [
            f"{m}: ours (p) / paper" for m in metrics
        ]
        lines += [
            f"Gains ({paper}):",
            "",
            "| " + " | ".join(header) + " |",
            "|" + "---|" * len(header),
        ]
        for dataset, label, base, mine, theirs_base, cols in gain_rows:
            study = next(s for s, _ in papers[paper] if s["dataset"] == dataset)
            numbers = study["paper_numbers"]
            cells = [dataset, label, base]
            for metric in metrics:
                if metric not in cols:
                    cells.append("")
                    continue
                ours = _gain_text(_paired_gain(mine, theirs_base, metric))
                if ours != "-":
                    ours += marks.get((dataset, label, base, metric), "")
                new = numbers.get(label, {}).get(metric)
                old = numbers.get(base, {}).get(metric)
                cells.append(f"{ours} / {_change(new, old) if new and old else '-'}")
            lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "What each run took, where it ran (minutes of wall time per run; epochs: best / "
        "run; two runs at a time on a 2-core CPU, one torch thread each, beside other "
        "work, unless the device says otherwise):",
        "",
        "| paper | dataset | model | seeds | best / run epochs | s / epoch | min / run "
        "| device |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for paper, dataset, label, of_label in times:
        runs_of = [of_label[s] for s in sorted(of_label)]
        lines.append(
            "| "
            + " | ".join(
                [
                    paper,
                    dataset,
                    label,
                    *_cost_cells(runs_of),
                ]
            )
            + " |"
        )
    missing = []
    for study, folder in sections:
        parts = []
        for label in study["variants"]:
            seeds = [
                str(seed)
                for seed in study["seeds"]
                if not os.path.isfile(
                    os.path.join(folder, f"{studies.slug(label)}__seed{seed}.json")
                )
            ]
            if seeds:
                parts.append(f"{label} {', '.join(seeds)}")
        if parts:
            missing.append(
                f"{study['paper_table']}, {study['dataset']} ({'; '.join(parts)})"
            )
    if missing:
        lines += ["", "Not run yet (seeds): " + "; ".join(missing) + "."]
    return "\n".join(lines) + "\n"
