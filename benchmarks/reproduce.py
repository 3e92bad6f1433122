"""All five mechanisms and their SASRec baseline under ONE protocol, on Office, Beauty and
ml-100k: the comparison no paper makes (docs/reproduction.md).

    python benchmarks/reproduce.py [--datasets=Office,Beauty,ml-100k] [--seeds=2020,2021,2022]
        [--models=STOSA,PAtt] [--jobs=N] [--device=cuda] [--threads=N]
    python benchmarks/reproduce.py --report        # only rebuild docs/reproduction.md
    python benchmarks/reproduce.py --quick [--output=DIR]   # a fixture, one epoch, seconds

Protocol (every model, every dataset): leave-one-out, full ranking, history masked, test
metrics Recall/NDCG/MRR @5/@10/@20 (and CC/ILD/F1 @10 where the dataset has categories:
Beauty and ml-100k; Office has none) at
the epoch of best validation NDCG@10, early stop after 10 validations without improvement, at
most 200 epochs. Each model keeps its paper's hyperparameters (its yaml); AWRSR is M_simp on
both backbones. Runs are resumable, one JSON per (model, dataset, seed), through the runner of
``benchmarks/studies.py``; the report gives mean ± std over seeds, the gain over SASRec with
its spread over seeds (paired by seed), seconds per epoch as a ratio to SASRec, the device,
and each paper's number where its protocol is this one.

Datasets are atomic files under ``--data_path`` (``dataset_scripts/``; ``docs/datasets.md``).
"""

import argparse
import os
import statistics
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, REPO)

import studies  # noqa: E402
from recbole_attn.model import MODELS as MODEL_CLASSES  # noqa: E402
from recbole_attn.quick_start import has_categories  # noqa: E402

DATA_PATH = "dataset"
BASELINE = "SASRec"
#: label -> (model, overrides); the paper's hyperparameters are each model's yaml
MODELS = {
    BASELINE: ("SASRecAP", {}),
    "SASRec (BCE)": ("SASRecAP", {"loss_type": "BCE"}),
    "SASRec (BPR)": ("SASRecAP", {"loss_type": "BPR"}),
    "STOSA": ("STOSA", {}),
    "PAtt": ("PAtt", {}),
    "DPAtt": ("DPAtt", {}),
    "AWRSR simp (SASRec)": ("AWRSR", {"backbone": "SASRec", "refinement": "simp"}),
    "AWRSR simp (STOSA)": ("AWRSR", {"backbone": "STOSA", "refinement": "simp"}),
    "PARec": ("PARec", {}),
    "FPARec": ("FPARec", {}),
    "RKSA": ("RKSA", {}),
}
#: the training loss of each label (its yaml's loss_type; a test checks it): the papers
#: train with different losses, and the loss moves the numbers as much as the attention
LOSS = {
    BASELINE: "CE",
    "SASRec (BCE)": "BCE",
    "SASRec (BPR)": "BPR",
    "STOSA": "BPR",
    "PAtt": "BCE",
    "DPAtt": "BCE",
    "AWRSR simp (SASRec)": "CE",
    "AWRSR simp (STOSA)": "BPR",
    "PARec": "CE",
    "FPARec": "CE",
    "RKSA": "BCE",
}
#: the SASRec each loss is compared with
SAME_LOSS_BASELINE = {"CE": BASELINE, "BCE": "SASRec (BCE)", "BPR": "SASRec (BPR)"}
DATASETS = ("Office", "Beauty", "ml-100k")
ACCURACY = ["recall@5", "ndcg@5", "recall@10", "ndcg@10", "mrr@20"]
DIVERSITY = ["cc@10", "ild@10", "f1@10"]
ACCURACY_METRICS = ("Recall", "NDCG", "MRR")
PROTOCOL = {
    "eval_args": studies.FULL,
    "eval_mask_history": True,
    "metrics": ["Recall", "NDCG", "MRR", "CC", "ILD", "F1"],
    "topk": [5, 10, 20],
    "valid_metric": "NDCG@10",
    "epochs": 200,
    "stopping_step": 10,
}
#: paper numbers measured under THIS protocol (dataset, full ranking, history masked):
#: (label, dataset) -> {metric: value}; the other papers' protocols differ (docs/results.md)
#: (STOSA's Table 1: its Office and its 22,363-user Beauty, the datasets here)
PAPER = {
    ("STOSA", "Office"): {"recall@5": 0.0677, "ndcg@5": 0.0461},
    ("STOSA", "Beauty"): {"recall@5": 0.0504, "ndcg@5": 0.0351},
}
QUICK_COLUMNS = {
    "inter": ["user_id", "item_id", "timestamp"],
    "item": ["item_id", "categories"],
}
QUICK_MODEL = {
    "hidden_size": 16,
    "inner_size": 32,
    "n_layers": 1,
    "n_heads": 2,
    "MAX_ITEM_LIST_LENGTH": 12,
    "train_batch_size": 32,
}


def study_name(dataset):
    return "reproduce_" + studies.slug(dataset)


def register(datasets=DATASETS, data_path=DATA_PATH, quick=False):
    """Add one study per dataset to the runner's table (also in every worker process,
    which imports this module). Where a dataset has no item categories, the diversity
    metrics and the models that read categories are left out."""
    for dataset in datasets:
        protocol = dict(PROTOCOL)
        columns = ACCURACY + DIVERSITY
        categories = has_categories(dataset, data_path)
        if not categories:
            protocol["metrics"] = [
                m for m in PROTOCOL["metrics"] if m in ACCURACY_METRICS
            ]
            columns = list(ACCURACY)
        variants = {
            label: (model, overrides)
            for label, (model, overrides) in MODELS.items()
            if categories or not MODEL_CLASSES[model].needs_item_categories
        }
        if quick:  # the fixture's categories are its .item file's `categories`
            protocol.update(epochs=1, stopping_step=1, load_col=QUICK_COLUMNS)
            variants = {k: (m, {**o, **QUICK_MODEL}) for k, (m, o) in variants.items()}
        studies.STUDIES[study_name(dataset)] = {
            "dataset": dataset,
            "protocol": protocol,
            "columns": columns,
            "baseline": BASELINE,
            "variants": variants,
            "paper": "each model's own paper (docs/models.md)",
        }


def _work(job):
    """One run in a fresh worker process: its study is registered from the job's
    arguments (as ``main`` registered it)."""
    *run, dataset = job
    register([dataset], run[3].data_path, quick=run[3].quick)
    return studies._work(tuple(run))


# ---------------------------------------------------------------------- report


def _results(folder):
    import json

    runs = {}
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if name.endswith(".json"):
            with open(os.path.join(folder, name)) as f:
                r = json.load(f)
            runs.setdefault(r["label"], {})[r["seed"]] = r
    return runs


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


def dataset_table(dataset, folder):
    """The markdown table of one dataset, and the per-model means for the plots."""
    runs = _results(folder)
    if not runs:
        return f"### {dataset}\n\nNo run yet.\n", {}
    base = runs.get(BASELINE, {})
    base_epoch = (
        statistics.median(r["seconds_per_epoch"] for r in base.values()) if base else 0
    )
    columns = studies.STUDIES[study_name(dataset)]["columns"]
    header = ["model", "loss", "seeds"] + columns
    header += [
        f"NDCG@10 vs {BASELINE}",
        "NDCG@10 vs SASRec of its loss",
        "s/epoch ratio",
    ]
    header += ["device", "paper (this protocol)"]
    lines = [f"### {dataset}", "", "| " + " | ".join(header) + " |"]
    lines.append("|" + "---|" * len(header))
    means = {}
    for label in MODELS:
        if label not in runs:
            continue
        per_seed = runs[label]
        rs = list(per_seed.values())
        cells = [label, LOSS[label], str(len(rs))]
        cells += [
            studies._fmt([r["test"][c] for r in rs if c in r["test"]]) for c in columns
        ]
        cells.append(
            "baseline" if label == BASELINE else _gain(per_seed, base, "ndcg@10")
        )
        same = SAME_LOSS_BASELINE[LOSS[label]]
        cells.append(
            "baseline"
            if label == same or (label == BASELINE)
            else f"{_gain(per_seed, runs.get(same, {}), 'ndcg@10')} (vs {same})"
        )
        epoch = statistics.median(r["seconds_per_epoch"] for r in rs)
        cells.append(f"{epoch / base_epoch:.2f}" if base_epoch else "-")
        cells.append(", ".join(sorted({r["device"] for r in rs})))
        paper = PAPER.get((label, dataset))
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
    variants = studies.STUDIES[study_name(dataset)]["variants"]
    skipped = [m for m in MODELS if m not in variants]
    if skipped:
        lines += [
            "",
            f"Not run on {dataset}: {', '.join(skipped)} (reads item categories; "
            f"{dataset} has none).",
        ]
    missing = [m for m in MODELS if m in variants and m not in runs]
    if missing:
        lines += ["", f"Not run yet on {dataset}: {', '.join(missing)}."]
    one_seed = [m for m in MODELS if len(runs.get(m, {})) == 1]
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

    datasets = [d for d in all_means if all_means[d]]
    labels = [m for m in MODELS if any(m in all_means[d] for d in datasets)]
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
                color = plt.cm.tab20(list(MODELS).index(label) % 20)
                handles[label] = ax.scatter(
                    values["ndcg@10"],
                    values["ild@10"],
                    color=color,
                    marker=marker[LOSS[label]],
                    edgecolors="black",
                    linewidths=0.4,
                )
        ax.set_xlabel("test NDCG@10")
        ax.set_ylabel("test ILD@10")
        ax.set_title(dataset)
    labels = [m for m in MODELS if m in handles]
    fig.legend(
        [handles[m] for m in labels],
        [m if f"({LOSS[m]})" in m else f"{m} ({LOSS[m]})" for m in labels],
        loc="center right",
        bbox_to_anchor=(0.99, 0.5),
        fontsize=8,
    )
    fig.tight_layout(rect=(0, 0, 1 - legend_width / width, 1))
    paths.append(os.path.join(output, "reproduction_diversity.png"))
    fig.savefig(paths[-1], dpi=100)
    plt.close(fig)
    return paths


def report(datasets, results_root, output, quick=False):
    """Write ``reproduction.md`` (and the two PNGs) into ``output``; returns its path."""
    os.makedirs(output, exist_ok=True)
    text = [
        "# All mechanisms under one protocol",
        "",
        "Leave-one-out, full ranking, history masked; test metrics at the epoch of best "
        "validation NDCG@10 (early stop after 10 validations without improvement, at most "
        "200 epochs); every model with its paper's hyperparameters (its yaml), AWRSR with "
        "M_simp. Mean ± std over seeds; the gains over SASRec are paired by seed (the "
        "papers train with different losses, so each model is also compared with SASRec "
        "trained with its own loss where that run exists). The s/epoch ratio is the "
        "median epoch time of these runs over SASRec's; they shared the machine with "
        "other runs, so it is rough: `docs/results.md` has interleaved measurements. "
        "Generated by `python benchmarks/reproduce.py` (`--report` rebuilds this page).",
        "",
    ]
    if quick:
        text += ["**Quick mode: a synthetic fixture, one epoch: no meaning.**", ""]
    all_means = {}
    for dataset in datasets:
        table, means = dataset_table(
            dataset, os.path.join(results_root, study_name(dataset))
        )
        text += [table]
        all_means[dataset] = means
    if any(all_means.values()):
        for path in plots(all_means, output):
            text.append(f"![{os.path.basename(path)}]({os.path.basename(path)})")
            text.append("")
    path = os.path.join(output, "reproduction.md")
    with open(path, "w") as f:
        f.write("\n".join(text))
    return path


# ---------------------------------------------------------------------- main


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", default=",".join(DATASETS))
    p.add_argument("--models", default=None, help="comma-separated labels")
    p.add_argument("--seeds", default="2020,2021,2022")
    p.add_argument("--data_path", default=DATA_PATH)
    p.add_argument("--device", default="cpu")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--results", default=os.path.join(HERE, "results", "reproduce"))
    p.add_argument("--output", default=os.path.join(REPO, "docs"))
    p.add_argument("--report", action="store_true", help="only rebuild the page")
    p.add_argument("--quick", action="store_true", help="fixture, one epoch, seconds")
    args = p.parse_args(argv)
    # the runner's options that this script does not expose
    args.epochs = args.stopping_step = None
    return args


def main(argv=None):
    args = parse_args(argv)
    datasets = args.datasets.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.quick:
        from recbole_attn.data.synthetic import write_synthetic_dataset

        scratch = tempfile.mkdtemp(prefix="reproduce-quick-")
        datasets, seeds = ["quick"], seeds[:1]
        args.data_path = scratch
        write_synthetic_dataset(scratch, name="quick")
        args.results = os.path.join(scratch, "results")
        if args.output == os.path.join(REPO, "docs"):
            args.output = os.path.join(scratch, "docs")
        register(datasets, args.data_path, quick=True)
    else:
        # the page shows every dataset, not only those of this call (it is rewritten whole)
        shown = list(dict.fromkeys(list(DATASETS) + datasets))
        register(shown, args.data_path)
    labels = list(MODELS) if not args.models else args.models.split(",")
    jobs = []
    for dataset in datasets:
        folder = os.path.join(args.results, study_name(dataset))
        os.makedirs(folder, exist_ok=True)
        for seed in seeds:
            for label in labels:
                if label not in studies.STUDIES[study_name(dataset)]["variants"]:
                    print(f"skipped {label} on {dataset}: it needs item categories")
                    continue
                done = os.path.isfile(studies._path(folder, label, seed))
                if not args.report and not done:
                    jobs.append(
                        (study_name(dataset), label, seed, args, folder, dataset)
                    )
    if jobs:
        with ProcessPoolExecutor(
            max_workers=args.jobs,
            mp_context=get_context("spawn"),
            max_tasks_per_child=1,
        ) as pool:
            futures = [pool.submit(_work, job) for job in jobs]
            for future in as_completed(futures):
                try:
                    label, seed, test, seconds = future.result()
                    print(f"done {label} seed {seed} ({seconds:.0f} s)", flush=True)
                except Exception as err:  # keep the other runs going
                    print(f"FAILED: {err!r}", flush=True)
    path = report(
        datasets if args.quick else shown, args.results, args.output, quick=args.quick
    )
    print(path)
    return path


if __name__ == "__main__":
    main()
