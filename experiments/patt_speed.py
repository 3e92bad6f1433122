"""Training epoch time and peak memory of PAtt^2, PAtt^3 (exact and sampled) and DPAtt^2 as
ratios against SASRecAP at equal d, layers, heads, T and loss family (one sampled
negative per position), on a synthetic dataset, at T = 30 and T = 50.

    python -m experiments.patt_speed [--users=2000] [--items=3000] [--repeats=2]

Every (variant, T) runs in its own subprocess: it builds the model, trains one warm-up
epoch, then ``--repeats`` timed epochs (median reported). Peak memory is the growth of the
process's maximum resident set size during training (``resource.getrusage``) over what
data loading and model construction already used. Variants run one after another, so load
on the machine is not shared equally; repeat the run to see the noise. Writes
``experiments/patt_speed/report.md``.
"""

import argparse
import json
import logging
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

#: experiments/ (the table goes to its patt_speed/ folder)
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

VARIANTS = [
    ("SASRecAP (BPR)", "SASRecAP", {"loss_type": "BPR"}),
    ("PAtt2", "PAtt", {"dpp_k": 2}),
    ("PAtt3 exact", "PAtt", {"dpp_k": 3}),
    ("PAtt3 sampled (4)", "PAtt", {"dpp_k": 3, "dpp_triple_samples": 4}),
    ("DPAtt2", "DPAtt", {"dpp_k": 2}),
]


def write_dataset(root, users, items, categories, seed=0):
    rng = np.random.default_rng(seed)
    folder = os.path.join(root, "synth")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "synth.inter"), "w") as f:
        f.write("user_id:token\titem_id:token\ttimestamp:float\n")
        for u in range(users):
            length = int(rng.integers(20, 80))
            for t, i in enumerate(rng.integers(1, items + 1, size=length)):
                f.write(f"{u}\t{i}\t{t}\n")
    with open(os.path.join(folder, "synth.item"), "w") as f:
        f.write("item_id:token\tcategories:token_seq\n")
        for i in range(1, items + 1):
            cats = rng.choice(categories, size=int(rng.integers(1, 3)), replace=False)
            f.write(f"{i}\t{' '.join(f'c{c}' for c in cats)}\n")
    return root


def child(spec):
    """Run in a subprocess: build, warm up, time ``repeats`` epochs, report JSON."""
    from recbole_attn.engine.quick_start import build

    os.chdir(spec["workdir"])
    config, net, trainer, (train, _, _) = build(
        spec["model"],
        "synth",
        config_dict={**spec["config"], "threads": spec["threads"]},
    )
    logging.getLogger().setLevel(logging.ERROR)
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    trainer._train_epoch(train, 0)
    times = []
    for rep in range(spec["repeats"]):
        start = time.perf_counter()
        trainer._train_epoch(train, rep + 1)
        times.append(time.perf_counter() - start)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base_rss
    print(json.dumps({"epoch_s": statistics.median(times), "peak_mb": peak / 1024}))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--users", type=int, default=2000)
    p.add_argument("--items", type=int, default=3000)
    p.add_argument("--lengths", default="30,50")
    p.add_argument("--hidden_size", type=int, default=64)
    p.add_argument("--n_layers", type=int, default=2)
    p.add_argument("--n_heads", type=int, default=2)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--skip", default="", help="comma-separated variant labels to skip")
    p.add_argument("--out", default=os.path.join(HERE, "patt_speed"))
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    return p.parse_args()


def main():
    args = parse_args()
    if args.child:
        child(json.loads(args.child))
        return
    workdir = tempfile.mkdtemp(prefix="patt-speed-")
    data_path = write_dataset(workdir, args.users, args.items, categories=20)
    skip = set(filter(None, args.skip.split(",")))
    results = {}
    for length in map(int, args.lengths.split(",")):
        for label, model, extra in VARIANTS:
            if label in skip:
                continue
            config = {
                "data_path": data_path,
                "load_col": {
                    "inter": ["user_id", "item_id", "timestamp"],
                    "item": ["item_id", "categories"],
                },
                "hidden_size": args.hidden_size,
                "inner_size": 4 * args.hidden_size,
                "n_layers": args.n_layers,
                "n_heads": args.n_heads,
                "MAX_ITEM_LIST_LENGTH": length,
                "train_batch_size": args.batch,
                "hidden_dropout_prob": 0.3,
                "attn_dropout_prob": 0.0,
                "hidden_act": "gelu",
                "state": "ERROR",
                **extra,
            }
            spec = {
                "model": model,
                "config": config,
                "workdir": workdir,
                "repeats": args.repeats,
                "threads": args.threads,
            }
            out = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "experiments.patt_speed",
                    "--child",
                    json.dumps(spec),
                ],
                capture_output=True,
                text=True,
                cwd=REPO,
            )
            if out.returncode:
                sys.stderr.write(out.stderr[-3000:])
                raise SystemExit(f"{label} at T={length} failed")
            results[(label, length)] = json.loads(out.stdout.strip().splitlines()[-1])
            print(label, length, results[(label, length)], flush=True)
    lengths = list(map(int, args.lengths.split(",")))
    labels = [v[0] for v in VARIANTS if v[0] not in skip]
    base = labels[0]
    header = ["variant"]
    for length in lengths:
        header += [
            f"T={length} epoch s",
            f"T={length} time ratio",
            f"T={length} peak MB",
            f"T={length} mem ratio",
        ]
    rows = []
    for label in labels:
        row = [label]
        for length in lengths:
            r, b = results[(label, length)], results[(base, length)]
            row += [
                f"{r['epoch_s']:.2f}",
                f"{r['epoch_s'] / b['epoch_s']:.2f}",
                f"{r['peak_mb']:.0f}",
                f"{r['peak_mb'] / max(b['peak_mb'], 1e-9):.2f}",
            ]
        rows.append(row)
    lines = [
        "# PAtt training speed and memory vs SASRecAP",
        "",
        f"Synthetic data: {args.users} users with 20-79 interactions, {args.items} items, "
        f"20 categories. d={args.hidden_size}, {args.n_layers} layers, {args.n_heads} "
        f"heads, batch {args.batch}, all-position training, one sampled negative per "
        f"position (SASRecAP: BPR, PAtt/DPAtt: BCE), {args.threads} torch threads, "
        f"CPU; median of {args.repeats} epochs after a warm-up epoch. Peak MB = growth of "
        "the max RSS during training.",
        "",
        "Command: `python -m experiments.patt_speed " + " ".join(sys.argv[1:]) + "`",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
