"""Build time and memory of RKSA's sparse co-occurrence table on a real dataset and on a
synthetic scale-up, from training histories (every user's sequence without its last two
items, the leave-one-out validation and test items).

    python -m experiments.rksa_cooccurrence [--sequences=../shared/datasets/raw/beauty/Beauty.txt]
        [--scale=10]

The scale-up repeats the dataset ``--scale`` times with disjoint item ids (``scale`` times
the users, items and pairs: the non-zeros grow linearly, a dense table would grow
quadratically). Memory is the table's buffers (sorted int64 keys, float32 counts, the
float32 diagonal); the dense equivalent would be ``4 |V|^2`` bytes. Writes
``experiments/rksa_cooccurrence/report.md``.
"""

import argparse
import os
import time

import torch

from recbole_attn.data.histories import TrainingHistories
from recbole_attn.model.rksa import CooccurrenceTable

#: experiments/ (the table goes to its rksa_cooccurrence/ folder)
HERE = os.path.dirname(os.path.abspath(__file__))


def read_histories(path):
    """Training histories (all but the last two items) of a ``uid i1 i2 ...`` file,
    item ids as in the file."""
    rows = []
    with open(path) as f:
        for line in f:
            items = [int(t) for t in line.split()[1:]]
            rows.append(items[:-2])
    return rows


def histories(rows, copies, n_items):
    users, items, offsets = [], [], [0]
    for c in range(copies):
        for u, row in enumerate(rows):
            users.append(c * len(rows) + u)
            items.extend(i + c * n_items for i in row)
            offsets.append(len(items))
    return TrainingHistories(
        torch.tensor(users), torch.tensor(offsets), torch.tensor(items)
    )


def measure(rows, copies, n_items):
    h = histories(rows, copies, n_items)
    start = time.perf_counter()
    users = torch.repeat_interleave(h.users, h.lengths).numpy()
    table = CooccurrenceTable(users, h.items.numpy(), copies * n_items + 1)
    seconds = time.perf_counter() - start
    v = copies * n_items + 1
    table_bytes = sum(b.numel() * b.element_size() for b in table.buffers())
    return {
        "users": len(h.users),
        "items": v - 1,
        "interactions": int(h.items.numel()),
        "nnz": int(table.keys.numel()),
        "seconds": seconds,
        "table MB": table_bytes / 2**20,
        "dense MB": 4 * v * v / 2**20,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--sequences",
        default=os.path.join(
            os.path.dirname(HERE),
            "..",
            "shared",
            "datasets",
            "raw",
            "beauty",
            "Beauty.txt",
        ),
    )
    p.add_argument("--scale", type=int, default=10)
    p.add_argument("--out", default=os.path.join(HERE, "rksa_cooccurrence"))
    args = p.parse_args()
    rows = read_histories(args.sequences)
    n_items = max(max(r) for r in rows if r)
    results = [measure(rows, 1, n_items), measure(rows, args.scale, n_items)]
    header = list(results[0])
    name = os.path.basename(args.sequences)
    lines = [
        "# RKSA co-occurrence table: build time and memory",
        "",
        f"Training histories of `{name}` (last two items of every user held out) and "
        f"a {args.scale}x scale-up with disjoint item ids; 2-core CPU, one process.",
        "",
        f"Command: `python -m experiments.rksa_cooccurrence --scale={args.scale}`",
        "",
        "| dataset | " + " | ".join(header) + " |",
        "|" + "---|" * (len(header) + 1),
    ]
    for label, r in zip([name, f"{name} x{args.scale}"], results):
        cells = [f"{v:.2f}" if isinstance(v, float) else f"{v:,}" for v in r.values()]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
