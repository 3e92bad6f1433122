"""Scale benchmark: every model at 10 k, 100 k and 1 M items, one training epoch and one
full-ranking test evaluation per loss, with time and peak memory.

    python -m experiments.scale [--items=10000,100000,1000000] [--users=5000]
        [--losses=SSM,CE] [--negatives=100] [--models=SASRecAP,STOSA,...]
        [--threads=2] [--timeout=1800] [--data_path=/tmp/scale_data]
    python -m experiments.scale --report          # only rebuild the report
    python -m experiments.scale --quick [--out=DIR]   # tiny sizes, seconds

Data: synthetic RecBole datasets (``experiments.synthetic.write_zipf_dataset``:
Zipf item popularity with exponent 1, Beauty-like sequence lengths, 1-3 of 20 categories
per item, the whole catalogue in the .item file), one per catalogue size with the same
number of users, written once under ``--data_path``. Each run is a fresh process (so that
its peak resident memory is its own): it loads the dataset and builds the model with its
yaml defaults (``train_batch_size`` 256, full ranking with the history masked, Recall,
NDCG, MRR, CC and ILD at 10), trains one epoch and evaluates the test split once.
Stored: ``experiments/scale/runs/<model>__<loss>__<items>.json`` (a run whose file exists
is skipped; ``--timeout`` ends a run and stores that it did not finish); the report
``experiments/scale/report.md`` and the curve ``scale.png`` are generated from them, with
every time also as a ratio to SASRecAP's at the same catalogue and loss (same machine,
same invocation).

Losses: ``SSM`` = the sampled softmax with ``--negatives`` negatives per position drawn by
popularity (log-Q corrected), ``CE`` = the softmax over all items (memory-bounded by
``ce_logits_budget_mb``), ``BCE``/``BPR`` = one uniform negative (the papers' losses).
"""

import argparse
import datetime
import json
import os
import platform
import resource
import shlex
import subprocess
import sys
import time

from experiments import studies

#: experiments/scale/: runs/ and the report
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scale")
MODELS = {
    "SASRecAP": ("SASRecAP", {}),
    "STOSA": ("STOSA", {}),
    "PAtt": ("PAtt", {}),
    "DPAtt": ("DPAtt", {}),
    "AWRSR": ("AWRSR", {"backbone": "SASRec", "refinement": "simp"}),
    "PARec": ("PARec", {}),
    "FPARec": ("FPARec", {}),
    "RKSA": ("RKSA", {}),
}
BASELINE = "SASRecAP"
CATEGORIES = 20
COLUMNS = {
    "inter": ["user_id", "item_id", "timestamp"],
    "item": ["item_id", "categories"],
}
FULL = {"items": "10000,100000,1000000", "users": 5000, "negatives": 100}
QUICK = {"items": "300,1000", "users": 60, "negatives": 5}
QUICK_MODEL = {**studies.QUICK_MODEL, "dpp_cat_steps": 5, "dpp_cat_rank": 4}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--items", default=None, help="default 10000,100000,1000000")
    p.add_argument("--users", type=int, default=None, help="default 5000")
    p.add_argument("--losses", default="SSM,CE")
    p.add_argument("--negatives", type=int, default=None, help="default 100")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--timeout", type=int, default=1800, help="seconds per run")
    p.add_argument("--data_path", default=os.path.join("/tmp", "scale_data"))
    p.add_argument("--out", default=HERE)
    p.add_argument("--report", action="store_true", help="only rebuild the report")
    p.add_argument("--quick", action="store_true", help="tiny sizes, seconds")
    p.add_argument("--one", help=argparse.SUPPRESS)  # a run, in its own process
    args = p.parse_args(argv)
    defaults = QUICK if args.quick else FULL
    for key, value in defaults.items():  # what is not given explicitly
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


def dataset_name(items, users):
    return f"zipf_i{items}_u{users}"


def loss_options(loss, negatives):
    if loss == "SSM":
        return {
            "loss_type": "SSM",
            "neg_sample_num": negatives,
            "neg_sample_distribution": "popularity",
        }
    return {"loss_type": loss}


def run_file(out, label, loss, items):
    return os.path.join(out, "runs", f"{label}__{loss}__{items}.json")


# ---------------------------------------------------------------- one run
def peak_rss_mb():
    """The process's peak resident set size so far (Linux: ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def one_run(spec):
    """Build, train one epoch, evaluate the test split once; returns the measurements."""
    import torch

    from recbole_attn.engine.quick_start import build

    if spec.get("threads"):
        torch.set_num_threads(spec["threads"])
    model, overrides = MODELS[spec["label"]]
    config = {
        "data_path": spec["data_path"],
        "load_col": COLUMNS,
        "category_field": "categories",
        "metrics": ["Recall", "NDCG", "MRR", "CC", "ILD"],
        "topk": [10],
        "valid_metric": "NDCG@10",
        "eval_mask_history": True,
        "state": "ERROR",
        "show_progress": False,
        "seed": 2020,
        "device": "cpu",
        **overrides,
        **loss_options(spec["loss"], spec["negatives"]),
        **spec.get("model_options", {}),
    }
    start = time.perf_counter()
    cfg, net, trainer, (train, _, test) = build(
        model, spec["dataset"], config_dict=config
    )
    built = time.perf_counter() - start
    after_build = peak_rss_mb()
    start = time.perf_counter()
    loss = trainer._train_epoch(train, 0, show_progress=False)
    epoch = time.perf_counter() - start
    start = time.perf_counter()
    result = trainer.evaluate(test, load_best_model=False)
    evaluation = time.perf_counter() - start
    loss = sum(loss) if isinstance(loss, tuple) else loss
    return {
        "label": spec["label"],
        "loss": spec["loss"],
        "items": spec["items"],
        "n_items": int(train.dataset.item_num),
        "users": int(train.dataset.user_num - 1),
        "training_positions": int(train.dataset.inter_feat.length),
        "parameters": sum(p.numel() for p in net.parameters()),
        "eval_batch_size": int(cfg["eval_batch_size"]),
        "seconds_build": round(built, 2),
        "seconds_epoch": round(epoch, 2),
        "seconds_eval": round(evaluation, 2),
        "peak_rss_mb_after_build": round(after_build),
        "peak_rss_mb": round(peak_rss_mb()),
        "train_loss": float(loss),
        "test": {k: float(v) for k, v in result.items()},
        "threads": torch.get_num_threads(),
        "finished": True,
    }


# ---------------------------------------------------------------- the runs
def ensure_dataset(data_path, items, users):
    from experiments.synthetic import write_zipf_dataset

    name = dataset_name(items, users)
    if not os.path.isfile(os.path.join(data_path, name, f"{name}.item")):
        write_zipf_dataset(data_path, name, users, items, n_categories=CATEGORIES)
    return name


def run_all(args):
    os.makedirs(os.path.join(args.out, "runs"), exist_ok=True)
    for items in [int(i) for i in args.items.split(",")]:
        name = ensure_dataset(args.data_path, items, args.users)
        for loss in args.losses.split(","):
            for label in args.models.split(","):
                path = run_file(args.out, label, loss, items)
                if os.path.isfile(path):
                    continue
                spec = {
                    "label": label,
                    "loss": loss,
                    "items": items,
                    "negatives": args.negatives,
                    "dataset": name,
                    "data_path": os.path.abspath(args.data_path),
                    "threads": args.threads,
                }
                if args.quick:
                    spec["model_options"] = QUICK_MODEL
                record = run_in_process(spec, args.timeout)
                record.update(spec_of(spec))
                tmp = path + ".tmp"
                with open(tmp, "w") as f:
                    json.dump(record, f, indent=1, sort_keys=True)
                os.replace(tmp, path)
                print(summary_line(record), flush=True)


def spec_of(spec):
    return {"negatives": spec["negatives"], "dataset": spec["dataset"]}


def run_in_process(spec, timeout):
    """One run in a fresh Python process; a run that fails or runs out of time is
    stored as such (with the end of its output)."""
    command = [sys.executable, "-m", "experiments.scale", "--one", json.dumps(spec)]
    start = time.perf_counter()
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return {
            "label": spec["label"],
            "loss": spec["loss"],
            "items": spec["items"],
            "finished": False,
            "why": f"not finished in {timeout} s",
        }
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return {
            "label": spec["label"],
            "loss": spec["loss"],
            "items": spec["items"],
            "finished": False,
            "why": f"exit {done.returncode} after {time.perf_counter() - start:.0f} s: "
            + (done.stderr.strip().splitlines() or ["no output"])[-1][-300:],
        }
    return json.loads(lines[-1])


def summary_line(r):
    if not r.get("finished"):
        return f"{r['label']} {r['loss']} {r['items']}: {r['why']}"
    return (
        f"{r['label']} {r['loss']} {r['items']}: epoch {r['seconds_epoch']} s, "
        f"eval {r['seconds_eval']} s, peak {r['peak_rss_mb']} MB"
    )


# ---------------------------------------------------------------- the report
def load_runs(out):
    folder = os.path.join(out, "runs")
    if not os.path.isdir(folder):
        return []
    runs = []
    for name in sorted(os.listdir(folder)):
        if name.endswith(".json"):
            with open(os.path.join(folder, name)) as f:
                runs.append(json.load(f))
    return runs


def _ratio(value, base):
    return f"{value / base:.2f}" if base else "-"


def report_text(runs, command):
    """The report's markdown, from stored runs."""
    if not runs:
        return "no runs yet\n"
    finished = [r for r in runs if r.get("finished")]
    first = finished[0] if finished else runs[0]
    lines = [
        "# Every model at 10 k to 1 M items: one epoch and one full-ranking evaluation",
        "",
        f"Generated from the stored runs (`experiments/scale/runs/`) by `{command}`.",
        "",
        "Synthetic datasets (`write_zipf_dataset`: Zipf popularity, exponent 1; "
        "Beauty-like lengths; 1-3 of 20 categories per item; the .item file lists the "
        f"whole catalogue), {first.get('users', '?')} users each "
        f"({first.get('training_positions', '?')} training sequences). Each run: a "
        "fresh process, the model's yaml defaults, one training epoch, one test "
        "evaluation (full ranking, history masked, Recall/NDCG/MRR/CC/ILD@10). Peak "
        "memory: the process's peak resident set (dataset, model, training and "
        "evaluation together). Ratios: to SASRecAP at the same catalogue and loss. "
        "SSM: sampled softmax, popularity negatives with log-Q correction; CE: softmax "
        "over all items (chunked).",
        "",
        "| model | loss | items | s / epoch | ratio | s / evaluation | ratio "
        "| peak MB | eval batch | build s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    base = {(r["loss"], r["items"]): r for r in finished if r["label"] == BASELINE}
    order = {label: i for i, label in enumerate(MODELS)}
    for r in sorted(
        runs,
        key=lambda r: (r["loss"], r["items"], order.get(r["label"], 99), r["label"]),
    ):
        if not r.get("finished"):
            lines.append(
                f"| {r['label']} | {r['loss']} | {r['items']:,} | {r['why']} |"
                " | | | | | |"
            )
            continue
        b = base.get((r["loss"], r["items"]), {})
        lines.append(
            f"| {r['label']} | {r['loss']}"
            + (f" ({r['negatives']})" if r["loss"] == "SSM" else "")
            + f" | {r['items']:,} | {r['seconds_epoch']:.1f} | "
            f"{_ratio(r['seconds_epoch'], b.get('seconds_epoch'))} | "
            f"{r['seconds_eval']:.1f} | {_ratio(r['seconds_eval'], b.get('seconds_eval'))}"
            f" | {r['peak_rss_mb']:,} | {r['eval_batch_size']} | {r['seconds_build']:.1f} |"
        )
    devices = sorted({f"CPU ({r['threads']} threads)" for r in finished})
    lines += ["", f"Device: {', '.join(devices) or '-'}."]
    return "\n".join(lines) + "\n"


def write_report(out, command):
    runs = load_runs(out)
    text = report_text(runs, command)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(text)
    if any(r.get("finished") for r in runs):
        plot(runs, os.path.join(out, "scale.png"))
    return text


def plot(runs, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    finished = [r for r in runs if r.get("finished")]
    losses = sorted({r["loss"] for r in finished})
    panels = [
        ("seconds_epoch", "s / epoch"),
        ("seconds_eval", "s / evaluation"),
        ("peak_rss_mb", "peak MB"),
    ]
    fig, axes = plt.subplots(
        len(losses), 3, figsize=(13, 3.6 * len(losses)), squeeze=False
    )
    for row, loss in enumerate(losses):
        for col, (key, title) in enumerate(panels):
            ax = axes[row][col]
            for label in MODELS:
                points = sorted(
                    (r["items"], r[key])
                    for r in finished
                    if r["label"] == label and r["loss"] == loss
                )
                if points:
                    ax.plot(*zip(*points), marker="o", label=label)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("items")
            ax.set_title(f"{title} ({loss})")
            ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    args = parse_args(argv)
    if args.one:
        print(json.dumps(one_run(json.loads(args.one))), flush=True)
        return
    command = "python -m experiments.scale " + " ".join(
        shlex.quote(a)
        for a in (argv if argv is not None else sys.argv[1:])
        if a != "--report"
    )
    if not args.report:
        print(f"{datetime.datetime.now():%Y-%m-%d %H:%M} {platform.node()}: {command}")
        run_all(args)
    print(write_report(args.out, command.strip()))


if __name__ == "__main__":
    main()
