"""The runner of the research wing: trains the variants of the studies declared in
``experiments/studies.py`` (several seeds, resumable, one JSON per run) and writes their
reports from the stored runs.

    python -m experiments.runner --list
    python -m experiments.runner --study=parec_beauty [--study=...] [--jobs=8]
        [--device=cuda] [--seeds=2020,2021,2022] [--variants=SASRec,PARec] [--epochs=N]
        [--stopping_step=N] [--threads=N] [--data_path=dataset]
    python -m experiments.runner --group=reproduce [same options]
    python -m experiments.runner --study=parec_beauty --report    # only rebuild reports
    python -m experiments.runner --report                         # every report
    python -m experiments.runner --study=rksa_beauty_full --rescore
    python -m experiments.runner --group=reproduce --quick [--root=DIR]   # seconds

A run trains one variant of a study with one seed in a fresh process (``--jobs`` of them
at a time) through the library's training loop (``recbole_attn.engine.quick_start.build`` and
``train_and_evaluate``) and writes ``experiments/<study>/runs/<variant>__seed<k>.json``
when it finishes; a run whose file exists is skipped, so a study can be split over
processes or machines and resumed. After the runs, the reports of the studies (``report:
table``: ``experiments/<study>/report.md``) and of the groups that hold them (the
reproduce group: ``experiments/reproduce/report.md`` and two charts) are rebuilt from
all stored runs. ``--seeds`` defaults to each study's ``seeds`` (2020 alone, or
2020-2022 for the reproduce group).

Datasets are RecBole atomic files under ``--data_path`` (default ``dataset``), e.g.
``python dataset_scripts/seqfile.py --sequences ../shared/datasets/raw/office/Office_Products.txt --name Office --output_dir dataset``
(docs/datasets.md).
"""

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import active_children, get_context

from experiments import reports, research
from experiments.studies import GROUPS, MEASUREMENTS, QUICK_STUDIES, STUDIES, slug

#: experiments/: every study's folder (runs/ and report.md) and every group's
HERE = os.path.dirname(os.path.abspath(__file__))
#: category metrics, which a dataset without item categories cannot compute
CATEGORY_METRICS = ("CC", "ILD", "F1")


# ---------------------------------------------------------------------- paths


def runs_folder(root, study_name):
    return os.path.join(root, study_name, "runs")


def run_path(folder, label, seed):
    return os.path.join(folder, f"{slug(label)}__seed{seed}.json")


# ---------------------------------------------------------------------- one run


def model_options(config, model_class, options):
    """The run's values of every key of the model's own yaml files
    (:func:`recbole_attn.engine.config.model_yaml_files`): what a change of the model's defaults
    changes, recorded so that a run made with older defaults can be told from one made
    with today's."""
    from recbole_attn.engine.config import model_yaml_files
    from recbole_attn.options.check import yaml_keys

    keys = set()
    for path in model_yaml_files(model_class, options):
        keys |= yaml_keys(path)
    return {k: config[k] for k in sorted(keys)}


def run_one(study_name, label, seed, args, study=None):
    """Train one variant with one seed (in its own process); return its result dict.
    ``study`` defaults to the declared one (a worker receives it with the job)."""
    import torch

    from recbole_attn.engine.quick_start import build, train_and_evaluate

    study = study or STUDIES[study_name]
    model, overrides = study["variants"][label]
    config_dict = {
        "data_path": os.path.abspath(args.data_path),
        "seed": seed,
        "state": "ERROR",
        "show_progress": False,
        "device": args.device,
        **study["protocol"],
        **overrides,
    }
    if args.epochs:
        config_dict["epochs"] = args.epochs
    if args.stopping_step:
        config_dict["stopping_step"] = args.stopping_step
    if args.threads:
        config_dict["threads"] = args.threads
    os.chdir(tempfile.mkdtemp(prefix="study-"))
    start = time.perf_counter()
    # a variant that sets a research-wing option (a leak) trains the research class
    config, net, trainer, (train, valid, test) = build(
        research.model_for(model, config_dict),
        study["dataset"],
        config_dict=config_dict,
    )
    logging.getLogger().setLevel(logging.ERROR)
    epochs = []
    last = [time.perf_counter()]

    def record(epoch, score):
        now = time.perf_counter()
        epochs.append({"epoch": epoch, "valid_score": float(score), "s": now - last[0]})
        if study.get("trace_test"):
            # the test metrics of this epoch's model, for budget studies only: what a
            # shorter budget (picked on validation) would have reported. Evaluation
            # draws no random numbers, so the training is the one without the trace
            epochs[-1]["test"] = {
                k: float(v)
                for k, v in trainer.evaluate(test, load_best_model=False).items()
            }
        last[0] = time.perf_counter()
        if getattr(args, "progress", False):
            print(
                f"{study_name}: {label} seed {seed} epoch {epoch} valid {score:.4f} "
                f"({epochs[-1]['s']:.1f} s)",
                flush=True,
            )

    try:
        result = train_and_evaluate(
            config, trainer, train, valid, None, saved=True, callback=record
        )
        whole = study.get("full_ranks", False)
        result["test_result"], ranks = ranked_test(config, trainer, test, whole=whole)
        if study.get("valid_ranks"):  # the paired test of a choice made on validation
            _, valid_ranks = ranked_test(config, trainer, valid, whole=whole)
    finally:
        trainer.release()  # the claimed model file, if nothing was saved into it
    model_file = result["saved_model_file"]
    rescored = {
        mode: rescore(model_file, eval_args)
        for mode, eval_args in study.get("rescore", {}).items()
    }
    # the epoch whose model was kept: RecBole's early stopping takes a score equal to the
    # best as the new best, so the last of equal best scores
    best_epoch = -1
    if epochs:
        top = max(e["valid_score"] for e in epochs)
        best_epoch = [e["epoch"] for e in epochs if e["valid_score"] == top][-1]
    device = (
        f"GPU ({torch.cuda.get_device_name()})"
        if config["device"].type == "cuda"
        else f"CPU ({torch.get_num_threads()} threads)"
    )
    return {
        "study": study_name,
        "label": label,
        "model": model,
        "seed": seed,
        "overrides": overrides,
        "config": {
            k: config[k]
            for k in sorted(
                set(study["protocol"])
                | set(overrides)
                | {"n_layers", "n_heads", "hidden_size", "MAX_ITEM_LIST_LENGTH"}
            )
            if k not in ("eval_args",)
        },
        "model_options": model_options(config, type(net), config_dict),
        "eval_mode": study["protocol"]["eval_args"]["mode"],
        "best_valid": {k: float(v) for k, v in result["best_valid_result"].items()},
        "test": {k: float(v) for k, v in result["test_result"].items()},
        **({"rescored": rescored} if rescored else {}),
        "best_epoch": best_epoch + 1,
        "epochs_run": len(epochs),
        # the validation score after every evaluation (epoch = index + 1 with eval_step 1)
        "valid_curve": [round(e["valid_score"], 6) for e in epochs],
        **(
            {
                "test_curve": [
                    {k: round(v, 6) for k, v in e["test"].items()} for e in epochs
                ]
            }
            if study.get("trace_test")
            else {}
        ),
        "seconds_per_epoch": statistics.median(e["s"] for e in epochs[1:] or epochs),
        "seconds": round(time.perf_counter() - start, 1),
        "parameters": sum(p.numel() for p in net.parameters() if p.requires_grad),
        **({"test_ranks": ranks} if ranks else {}),
        **({"valid_ranks": valid_ranks} if study.get("valid_ranks") else {}),
        "device": device,
        # the releases that computed it: another torch build moves the last digits of
        # some models' metrics (experiments/reproduce: RKSA, PARec and FPARec)
        "stack": stack_versions(),
        # the best model (the runner's scratch folder; for heatmaps, not kept by the repo)
        "model_file": os.path.abspath(model_file),
    }


def stack_versions():
    """``{package: version}`` of Python and the releases a run's numbers depend on."""
    import platform
    from importlib import metadata

    import torch

    # torch's own string names its build (+cpu, +cu132), which the metadata omits
    out = {"python": platform.python_version(), "torch": torch.__version__}
    out["cpu"] = cpu_name()
    for name in ("numpy", "scipy", "pandas", "recbole"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:  # pragma: no cover
            out[name] = None
    return out


def cpu_name():
    """The CPU a run's seconds (and last digits) come from, e.g. ``AMD EPYC (family 25
    model 17, AVX-512)``: this project's machines differ by about 2x in speed."""
    import platform

    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if not line.strip():
                    break  # the first processor is enough
                fields.setdefault(key.strip(), value.strip())
    except OSError:  # not Linux
        return platform.processor() or platform.machine()
    flags = fields.get("flags", "").split()
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else None
    name = fields.get("model name") or platform.machine()
    detail = [
        (
            f"family {fields['cpu family']} model {fields['model']}"
            if "cpu family" in fields and "model" in fields
            else None
        ),
        isa,
    ]
    detail = ", ".join(d for d in detail if d)
    return f"{name} ({detail})" if detail else name


def ranked_test(config, trainer, test, whole=False):
    """The best model's test metrics (or validation metrics, given the validation data)
    and, from the same evaluation, every evaluated user's rank of the target: ordered by the dataset's user ids and capped at the largest
    cutoff + 1 (enough to recompute every top-K metric per user:
    ``reports.user_values``), or not capped (``whole``: the cap is the number of item
    ids + 1, beyond any rank: every cutoff). Under a sampled ranking (``uni100``) a rank
    is among the target and its sampled negatives, drawn once for both: the ranks give
    exactly the metrics returned."""
    import torch

    from recbole_attn.evaluator.per_user import PerUserRecorder

    from recbole_attn.engine.quick_start import is_full_ranking

    recorder = PerUserRecorder(trainer)
    with recorder.recording():
        result = trainer.evaluate(test, load_best_model=True)
    users = torch.cat(recorder.users).tolist()
    ranks = torch.cat(recorder.ranks).tolist()
    cap = (test._dataset.item_num if whole else max(config["topk"])) + 1
    ordered = [min(rank, cap) for _, rank in sorted(zip(users, ranks))]
    stored = {"cap": cap, "data": trainer.data_signature, "ranks": ordered}
    if not is_full_ranking(config):
        mode = config["eval_args"]["mode"]
        stored["ranking"] = mode.get("test", mode) if isinstance(mode, dict) else mode
    return result, stored


def rescore(model_file, eval_args):
    """Test metrics of a saved best model under another ranking (``eval_args``, e.g. 100
    sampled negatives): the same split, model and selected epoch, only the candidates
    ranked differ."""
    from recbole_attn.engine.quick_start import load_data_and_model

    _, _, trainer, (_, _, test) = load_data_and_model(
        model_file, {"eval_args": eval_args}
    )
    logging.getLogger().setLevel(logging.ERROR)
    return {k: float(v) for k, v in trainer.evaluate(test).items()}


def rescore_missing(study_name, folder, study=None):
    """Add the study's ``rescore`` results to finished runs (in ``folder``) that lack
    them (runs that predate the option), where the run's best model file still exists;
    returns the runs still missing them."""
    study = study or STUDIES[study_name]
    missing = []
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if not name.endswith(".json"):
            continue
        path = os.path.join(folder, name)
        with open(path) as f:
            r = json.load(f)
        todo = {
            mode: eval_args
            for mode, eval_args in study.get("rescore", {}).items()
            if mode not in r.get("rescored", {})
        }
        if not todo:
            continue
        if not os.path.isfile(r.get("model_file", "")):
            missing.append(f"{r['label']} seed {r['seed']} (model file gone)")
            continue
        for mode, eval_args in todo.items():
            r.setdefault("rescored", {})[mode] = rescore(r["model_file"], eval_args)
        with open(path, "w") as f:
            json.dump(r, f, indent=1)
    return missing


def _work(job):
    """One run in a fresh worker process; writes its JSON file."""
    study_name, study, label, seed, args, folder = job
    from recbole_attn.files import write_replacing

    result = run_one(study_name, label, seed, args, study=study)
    # whole or not at all: a run killed while its file is written runs again
    write_replacing(
        run_path(folder, label, seed), lambda f: json.dump(result, f, indent=1)
    )
    return study_name, label, seed, result["test"], result["seconds"]


# ---------------------------------------------------------------------- reports


def report(study_name, root=HERE, study=None):
    """Rebuild ``<root>/<study>/report.md`` from the study's runs; returns its text (a
    one-line note, and no file, while there is no run). A study of the reproduce group
    is reported on its group's page (:func:`group_report`)."""
    study = study or STUDIES[study_name]
    kind = study.get("report", "table")
    if kind in GROUP_REPORTS:
        return f"{study_name} is reported on its group's page"
    build = {
        "table": reports.study_table,
        "archive_quality": reports.archive_quality_table,
        "budget": reports.budget_table,
    }[kind]
    runs = reports.load_runs(runs_folder(root, study_name))
    if kind == "budget":
        text = build(study_name, study, runs, budget_studies(root))
    else:
        text = build(study_name, study, runs)
    if text is None:
        return f"no results for {study_name} yet"
    with open(os.path.join(root, study_name, "report.md"), "w") as f:
        f.write(text)
    if study.get("pr_notes"):
        write_pr_notes(study_name, study, runs, root)
    if study.get("docs") and os.path.abspath(root) == HERE:
        write_docs_block(
            study["docs"],
            reports.docs_markers(study_name),
            reports.docs_block(study, text),
            study_name,
        )
    return text


def budget_studies(root=HERE):
    """{name: (study, runs)} of every budget study (the choice is made over all)."""
    return {
        name: (study, reports.load_runs(runs_folder(root, name)))
        for name, study in STUDIES.items()
        if study.get("report") == "budget"
    }


#: the page of conclusions, which shows the reproduce group's "Which gains hold"
RESULTS_PAGE = "docs/results.md"


def write_docs_block(page, markers, block, name):
    """Put ``block`` between ``markers`` in the docs page ``page`` (relative to the
    repository root; ``name``: what the block shows, for the error of a page without
    the markers): docs show generated text, never a typed copy."""
    path = os.path.join(os.path.dirname(HERE), page)
    with open(path) as f:
        updated = reports.with_docs_block(f.read(), markers, block, name)
    with open(path, "w") as f:
        f.write(updated)


def write_pr_notes(study_name, study, runs, root=HERE):
    """``<root>/<study>/pr_notes/<Model>.md``: what each exported model's pull request
    says was measured (``recbole-attn export-upstream --pr_notes=<that folder>``)."""
    from experiments.studies import REPRODUCE_DATASETS, reproduce_name

    reproduce = {
        dataset: reports.load_runs(runs_folder(root, reproduce_name(dataset)))
        for dataset in REPRODUCE_DATASETS
    }
    folder = os.path.join(root, study_name, "pr_notes")
    os.makedirs(folder, exist_ok=True)
    for model, text in reports.pr_notes(study_name, study, runs, reproduce).items():
        with open(os.path.join(folder, f"{model}.md"), "w") as f:
            f.write(text)


def group_report(group_name, root=HERE, names=None, quick=False):
    """Rebuild ``<root>/<group>/report.md`` (and its charts) from the runs of all the
    group's studies (``names``: other studies in their place, as ``--quick`` does);
    returns the page's path."""
    group = GROUPS[group_name]
    if group["report"] not in GROUP_REPORTS:
        raise ValueError(f"unknown group report {group['report']!r}")
    names = names or group["studies"]
    if group["report"] in PAGES:
        return page_report(group_name, root, names)
    sections = [(_study(name, quick), runs_folder(root, name)) for name in names]
    output = os.path.join(root, group_name)
    os.makedirs(output, exist_ok=True)
    gains = reports.gains_that_hold(sections)
    text = reports.reproduce_page(sections, output, quick=quick, gains=gains)
    path = os.path.join(output, "report.md")
    with open(path, "w") as f:
        f.write(text)
    if not quick and os.path.abspath(root) == HERE:
        write_docs_block(
            RESULTS_PAGE, reports.GAINS_MARKERS, "\n".join(gains), group_name
        )
    return path


#: the kinds of report written over a group's studies (their studies have no page)
GROUP_REPORTS = ("reproduce", "stosa_table1", "paper_tables", "stosa_tuned")


def page_report(group_name, root, names):
    """``<root>/<group>/report.md`` of a group whose page its report kind writes
    (:data:`PAGES`) from the runs of ``names``, and the page's tables in
    docs/results.md (between the group's markers)."""
    kind = GROUPS[group_name]["report"]
    write_page, what, block = PAGES[kind]
    sections = [(STUDIES[name], runs_folder(root, name)) for name in names]
    text = write_page(group_name, sections, root)
    output = os.path.join(root, group_name)
    os.makedirs(output, exist_ok=True)
    path = os.path.join(output, "report.md")
    with open(path, "w") as f:
        f.write(text)
    if os.path.abspath(root) == HERE:
        write_docs_block(
            RESULTS_PAGE,
            reports.docs_markers(group_name, what, option="--group"),
            block(text),
            group_name,
        )
    return path


#: report kind -> (its page from (group, sections, root), what docs/results.md shows of
#: it, that part of the page)
PAGES = {
    "stosa_table1": (
        lambda group, sections, root: reports.stosa_table1_page(group, sections),
        "the table",
        reports.first_table,
    ),
    "paper_tables": (
        lambda group, sections, root: reports.paper_tables_page(group, sections),
        "the tables",
        reports.sections_block,
    ),
    "stosa_tuned": (reports.stosa_tuned_page, "the tables", reports.sections_block),
}


#: the lines around the searches' selections in experiments/studies.py
SELECTED_MARKERS = (
    "# the searches' selections (generated)\n",
    "# end of the searches' selections\n",
)


def _literal(value):
    """A Python literal of a searched value, in black's quotes."""
    return json.dumps(value) if isinstance(value, str) else repr(value)


def selected_block(root=HERE):
    """The declaration of :data:`experiments.studies.STOSA_TUNED_SELECTED` that the
    stored searches give: each finished search's (its result.json's) best_params."""
    from experiments.studies import STOSA_TUNED_DATASETS, STOSA_TUNED_MODELS
    from experiments.studies import stosa_tuned_search

    selected = {}
    for dataset in STOSA_TUNED_DATASETS:
        for label in STOSA_TUNED_MODELS:
            search = stosa_tuned_search(label, dataset)
            state = reports.search_state(os.path.join(root, search))
            if state["state"] == "finished":
                selected[search] = state["result"]["best_params"]
    if not selected:
        return "STOSA_TUNED_SELECTED = {}\n"
    # black's layout of the dict (JSON's quotes are black's), so the file stays black
    lines = ["STOSA_TUNED_SELECTED = {"]
    for search, params in selected.items():
        lines.append(f"    {json.dumps(search)}: {{")
        lines += [f"        {json.dumps(k)}: {_literal(v)}," for k, v in params.items()]
        lines.append("    },")
    return "\n".join(lines + ["}"]) + "\n"


def write_selected(root=HERE):
    """Rewrite the generated block of experiments/studies.py from the stored searches;
    returns the block."""
    path = os.path.join(HERE, "studies.py")
    with open(path) as f:
        text = f.read()
    start, end = SELECTED_MARKERS
    if start not in text or end not in text:
        raise SystemExit(
            f"{path} lacks the lines {start.strip()!r} and {end.strip()!r}"
        )
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    block = selected_block(root)
    with open(path, "w") as f:
        f.write(head + start + block + end + tail)
    return block


def _study(name, quick=False):
    if quick:
        for group, study in QUICK_STUDIES.items():
            if name == quick_name(group):
                return study
    return STUDIES[name]


def quick_name(group):
    return f"{group}_quick"


# ---------------------------------------------------------------------- planning


def groups_of(study_name):
    return [g for g, group in GROUPS.items() if study_name in group["studies"]]


def plan(names, args, root, quick=False):
    """The jobs of the runs not done yet: (study, definition, label, seed, args,
    folder)."""
    from recbole_attn.plugin import MODELS as MODEL_CLASSES
    from experiments.categories import has_categories

    jobs = []
    wanted = args.variants.split(",") if args.variants else None
    known = {label for name in names for label in _study(name, quick)["variants"]}
    unknown = [v for v in wanted or () if v not in known]
    if unknown:
        raise SystemExit(
            f"--variants: no variant {', '.join(map(repr, unknown))} in "
            f"{', '.join(names)}; its variants: {', '.join(sorted(known))} "
            "(labels are comma-separated, so a label cannot contain a comma)"
        )
    for name in names:
        study = _study(name, quick)
        if study.get("archive"):
            print(f"{name}: an archive (report only; the runner trains nothing)")
            continue
        folder = runs_folder(root, name)
        os.makedirs(folder, exist_ok=True)
        labels = list(study["variants"])
        for label in study.get("skipped", []):
            if wanted is None or label in wanted:
                print(
                    f"skipped {label} on {study['dataset']}: it needs item categories"
                )
        if wanted is not None:
            labels = [v for v in wanted if v in labels]
        categories = has_categories(study["dataset"], args.data_path)
        seeds = args.seeds or list(study.get("seeds", (2020,)))
        if quick:
            seeds = seeds[:1]
        one_seed = set(study.get("one_seed", ()))
        for seed in seeds[: study.get("max_seeds", len(seeds))]:
            for label in labels:
                if label in one_seed and seed != seeds[0]:
                    continue  # a single run (study definition)
                model = study["variants"][label][0]
                needs = getattr(
                    MODEL_CLASSES.get(model), "needs_item_categories", False
                )
                reads = set(study["protocol"].get("metrics", ())) & set(
                    CATEGORY_METRICS
                )
                if not categories and (needs or reads):
                    print(
                        f"skipped {label} on {study['dataset']}: it needs item "
                        f"categories, which {args.data_path} has not"
                    )
                    continue
                if not os.path.isfile(run_path(folder, label, seed)):
                    jobs.append((name, study, label, seed, args, folder))
    return jobs


def execute(jobs, workers):
    """Run the jobs, ``workers`` fresh processes at a time; a failed run does not stop
    the others. Ctrl-C (or SIGINT to this process alone) stops the running runs too,
    keeps the finished ones and says so: the same command runs the rest."""
    if not jobs:
        return
    pool = ProcessPoolExecutor(
        max_workers=workers, mp_context=get_context("spawn"), max_tasks_per_child=1
    )
    finished = 0
    try:
        futures = [pool.submit(_work, job) for job in jobs]
        for future in as_completed(futures):
            try:
                name, label, seed, test, seconds = future.result()
                finished += 1
                print(
                    f"done {name}: {label} seed {seed} ({seconds:.0f} s): {test}",
                    flush=True,
                )
            except Exception as err:  # keep the other runs going
                print(f"FAILED: {err!r}", flush=True)
    except KeyboardInterrupt:
        for child in active_children():  # the pool's workers, in their runs
            child.terminate()
        pool.shutdown(wait=True, cancel_futures=True)
        print(
            f"stopped: {finished} of {len(jobs)} runs finished and kept; the running "
            "ones are dropped; the same command runs the rest",
            file=sys.stderr,
            flush=True,
        )
        raise SystemExit(130) from None
    pool.shutdown(wait=True)


# ---------------------------------------------------------------------- main


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--study", action="append", default=[], help="repeatable")
    p.add_argument("--group", action="append", default=[], help="repeatable")
    p.add_argument("--list", action="store_true", help="studies, groups, measurements")
    p.add_argument("--data_path", default="dataset")
    p.add_argument("--device", default="cpu")
    p.add_argument(
        "--seeds", default=None, help="comma-separated (default: each study's seeds)"
    )
    p.add_argument("--variants", default=None, help="comma-separated labels")
    p.add_argument("--epochs", type=int, default=None, help="override the budget")
    p.add_argument("--stopping_step", type=int, default=None, help="override patience")
    p.add_argument("--jobs", type=int, default=1, help="parallel processes")
    p.add_argument("--threads", type=int, default=None, help="torch threads per run")
    p.add_argument(
        "--progress", action="store_true", help="print every run's epochs as they end"
    )
    p.add_argument(
        "--root",
        default=None,
        help="folder of the study folders (default experiments/; with --quick a "
        "scratch folder)",
    )
    p.add_argument(
        "--report",
        action="store_true",
        help="only rebuild the reports (of every study and group without "
        "--study/--group)",
    )
    p.add_argument(
        "--rescore",
        action="store_true",
        help="score finished runs' best models with the study's other rankings "
        "(its `rescore` option) where missing, then rebuild the reports",
    )
    p.add_argument(
        "--select",
        action="store_true",
        help="--group=stosa_tuned: declare each finished search's selected "
        "configuration (rewrites the generated block of experiments/studies.py)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="a group on a synthetic fixture, one epoch, one seed (seconds)",
    )
    args = p.parse_args(argv)
    if args.seeds:
        args.seeds = [int(s) for s in args.seeds.split(",")]
    return args


def print_list():
    print("studies:")
    for name, study in STUDIES.items():
        kind = " (archive)" if study.get("archive") else ""
        print(
            f"  {name}{kind}: {study['dataset']}, variants: "
            f"{', '.join(study['variants'])}"
        )
        for label, external in study.get("external", {}).items():
            print(f"    {label} (not trained here): {external['command']}")
    print("groups:")
    for name, group in GROUPS.items():
        print(f"  {name}: {', '.join(group['studies'])} ({group['what']})")
    print("measurements (their own scripts):")
    for name, m in MEASUREMENTS.items():
        print(f"  {name}: {m['what']}; `{m['command']}` -> {m['outputs']}")


def main(argv=None):
    """Returns the paths of the reports written."""
    args = parse_args(argv)
    if args.select:
        if args.group != ["stosa_tuned"] or args.study:
            raise SystemExit(
                "--select declares the searches' selections: "
                "--group=stosa_tuned --select"
            )
        print(write_selected())
        return []
    if args.list or not (args.study or args.group or args.report):
        print_list()
        return []
    for name in args.study:
        if name not in STUDIES:
            raise SystemExit(f"unknown study {name!r}; --list shows them")
    for name in args.group:
        if name not in GROUPS:
            raise SystemExit(f"unknown group {name!r}; --list shows them")
    if args.quick:
        return main_quick(args)
    root = os.path.abspath(args.root or HERE)
    names = list(args.study)
    for group in args.group:
        names += [n for n in GROUPS[group]["studies"] if n not in names]
    groups = list(dict.fromkeys(args.group + [g for n in names for g in groups_of(n)]))
    if not names and not groups:  # --report alone: everything
        names, groups = list(STUDIES), list(GROUPS)
    if not (args.report or args.rescore):
        execute(plan(names, args, root), args.jobs)
    written = []
    for name in names:
        if args.rescore:
            for run in rescore_missing(name, runs_folder(root, name)):
                print(f"not rescored: {run}")
        text = report(name, root)
        print(text)
        if os.path.isfile(os.path.join(root, name, "report.md")):
            written.append(os.path.join(root, name, "report.md"))
    for group in groups:
        written.append(group_report(group, root))
        print(written[-1])
    return written


def main_quick(args):
    """``--quick``: each ``--group``'s quick study (the group's models on the synthetic
    fixture, one epoch, the first seed) in a scratch folder (or ``--root``); its report
    says it means nothing."""
    from experiments.synthetic import write_synthetic_dataset

    if args.study or not args.group:
        raise SystemExit("--quick runs a group: --group=reproduce --quick")
    root = os.path.abspath(args.root or tempfile.mkdtemp(prefix="experiments-quick-"))
    args.data_path = os.path.join(root, "data")
    written = []
    for group in args.group:
        if group not in QUICK_STUDIES:
            raise SystemExit(f"group {group!r} has no quick mode")
        study = QUICK_STUDIES[group]
        write_synthetic_dataset(args.data_path, name=study["dataset"])
        name = quick_name(group)
        if not args.report:
            execute(plan([name], args, root, quick=True), args.jobs)
        written.append(group_report(group, root, names=[name], quick=True))
        print(written[-1])
    return written


if __name__ == "__main__":
    main()
