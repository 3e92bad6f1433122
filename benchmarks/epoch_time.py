"""Seconds per epoch (training and full-ranking validation) of several model / training-mode
variants, as ratios against RecBole's SASRec in its own (prefix) mode, measured in one run.

    python benchmarks/epoch_time.py --dataset=Office --data_path=dataset [--repeats=2]

Variants are timed interleaved (one epoch of each, then again), so that load on the machine
affects all of them alike; the table reports the median over repeats. Writes
``benchmarks/results/epoch_time_<dataset>.md`` and ``.csv``.

Office: convert it first with
``python dataset_scripts/seqfile.py --sequences ../shared/datasets/raw/office/Office_Products.txt --name Office --output_dir dataset``.
"""

import argparse
import csv
import logging
import os
import statistics
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from recbole_attn.quick_start import build  # noqa: E402

#: (label, model, overrides); the shared sizes come from --hidden_size etc. The
#: "anomaly detection on" variants time what plain RecBole 1.2.1 does: its sine.py switches
#: autograd anomaly detection on at import (recbole_attn switches it off; docs/environment.md).
ANOMALY = "autograd_anomaly_detection"
VARIANTS = [
    ("SASRec (RecBole, prefix, CE)", "SASRec", {"training_mode": "last_position"}),
    (
        "SASRec (RecBole, prefix, CE), anomaly detection on",
        "SASRec",
        {"training_mode": "last_position", ANOMALY: True},
    ),
    ("SASRecAP (all-position, CE)", "SASRecAP", {}),
    ("SASRecAP (all-position, BPR)", "SASRecAP", {"loss_type": "BPR"}),
    ("STOSA (all-position)", "STOSA", {}),
    ("STOSA (all-position, no trimming)", "STOSA", {"trim_batch": False}),
    ("STOSA (prefix)", "STOSA", {"training_mode": "last_position"}),
    ("STOSA (all-position), anomaly detection on", "STOSA", {ANOMALY: True}),
    ("PAtt2 (all-position)", "PAtt", {"dpp_k": 2}),
    ("PAtt3 (all-position)", "PAtt", {"dpp_k": 3}),
    ("PARec (all-position)", "PARec", {}),
    ("FPARec (all-position)", "FPARec", {}),
    (
        "AWRSR simp on SASRec (all-position, CE)",
        "AWRSR",
        {"backbone": "SASRec", "refinement": "simp"},
    ),
    (
        "AWRSR simp on STOSA (all-position)",
        "AWRSR",
        {"backbone": "STOSA", "refinement": "simp"},
    ),
    ("RKSA C+I+U (all-position, BCE)", "RKSA", {}),
]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="Office")
    p.add_argument("--data_path", default="dataset")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--hidden_size", type=int, default=64)
    p.add_argument("--n_layers", type=int, default=1)
    p.add_argument("--n_heads", type=int, default=4)
    p.add_argument("--max_len", type=int, default=100)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument(
        "--skip",
        default="",
        help="';'-separated variant labels or model names to skip",
    )
    p.add_argument(
        "--only",
        default="",
        help="';'-separated model names or labels to time (the baseline always runs)",
    )
    p.add_argument("--name", default=None, help="result file stem (epoch_time_<name>)")
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    return p.parse_args()


def main():
    command = sys.argv[1:]
    args = parse_args()
    shared = {
        "data_path": os.path.abspath(args.data_path),
        "hidden_size": args.hidden_size,
        "inner_size": 4 * args.hidden_size,
        "n_layers": args.n_layers,
        "n_heads": args.n_heads,
        "MAX_ITEM_LIST_LENGTH": args.max_len,
        "train_batch_size": args.batch,
        "state": "ERROR",
        "hidden_dropout_prob": 0.3,
        "attn_dropout_prob": 0.0,
    }
    skip = set(filter(None, args.skip.split(";")))
    only = set(filter(None, args.only.split(";")))
    sys.argv = sys.argv[:1]  # older versions' RecBole Config parsed --key=value
    workdir = tempfile.mkdtemp(prefix="bench-")
    os.chdir(workdir)  # RecBole writes log/ and saved/ into the working directory
    runs = []
    for label, model, overrides in VARIANTS:
        if label in skip or model in skip:
            continue
        if only and not {model, label} & only and label != VARIANTS[0][0]:
            continue
        overrides = dict(overrides)
        anomaly = overrides.pop(ANOMALY, False)
        config, net, trainer, (train, valid, _) = build(
            model, args.dataset, config_dict={**shared, **overrides}
        )
        logging.getLogger().setLevel(logging.ERROR)
        trainer.eval_collector.data_collect(train)
        runs.append((label, trainer, train, valid, len(train.dataset), anomaly))
    times = {label: {"train": [], "valid": []} for label, *_ in runs}
    for rep in range(args.repeats):
        for label, trainer, train, valid, _, anomaly in runs:
            start = time.perf_counter()
            with torch.autograd.set_detect_anomaly(anomaly):
                trainer._train_epoch(train, rep)
            mid = time.perf_counter()
            trainer._valid_epoch(valid)
            end = time.perf_counter()
            times[label]["train"].append(mid - start)
            times[label]["valid"].append(end - mid)
            print(
                f"{label}: train {mid - start:.1f}s, valid {end - mid:.1f}s", flush=True
            )
    baseline = runs[0][0]
    base_total = statistics.median(
        t + v for t, v in zip(times[baseline]["train"], times[baseline]["valid"])
    )
    rows = []
    for label, _, _, _, samples, _ in runs:
        train_s = statistics.median(times[label]["train"])
        valid_s = statistics.median(times[label]["valid"])
        total = statistics.median(
            t + v for t, v in zip(times[label]["train"], times[label]["valid"])
        )
        rows.append(
            {
                "variant": label,
                "train samples": samples,
                "train s": round(train_s, 2),
                "valid s": round(valid_s, 2),
                "epoch s": round(total, 2),
                f"ratio vs {baseline}": round(total / base_total, 3),
            }
        )
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, f"epoch_time_{args.name or args.dataset}")
    with open(stem + ".csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    header = list(rows[0])
    lines = [
        f"# Epoch time on {args.dataset}",
        "",
        f"d={args.hidden_size}, T={args.max_len}, {args.n_layers} layer(s), "
        f"{args.n_heads} heads, batch {args.batch}, {torch.get_num_threads()} torch "
        f"threads, median of {args.repeats} interleaved repeats.",
        "",
        "Command: `python benchmarks/epoch_time.py " + " ".join(command) + "`",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    lines += ["| " + " | ".join(str(r[h]) for h in header) + " |" for r in rows]
    with open(stem + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
