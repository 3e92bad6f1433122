"""STOSA's last-row prediction path against the full sequence, the justification of that
path in STOSA's pull request: the model file's ``full_sort_predict`` computes only the
last position in its last layer (``forward``, exact: the attention is causal); the
alternative encodes every position (``encode``) and gathers the last, as RecBole's
SASRec does. Both on one test batch, in one process, interleaved over repeats.

    python -m experiments.stosa_last_row [--dataset=ml-100k] [--data_path=...]
        [--repeats=7] [--threads=1] [--out=experiments/speed]

The model is untrained (its scores' speed, not their quality, matters). Writes
``<out>/stosa_last_row_<dataset>.md`` with the command and the machine at the top; the
ratio is what we report (seconds depend on the load of the machine).
"""

import argparse
import datetime
import os
import shlex
import statistics
import sys
import time

import torch

from experiments.runner import cpu_name

HERE = os.path.dirname(os.path.abspath(__file__))


def measure(dataset, data_path, repeats):
    """Median seconds of the two paths on one test batch, and the batch's shape."""
    from recbole_attn.engine.quick_start import build
    from recbole_attn.model import stosa

    config_dict = {"state": "ERROR", "show_progress": False, "epochs": 1}
    if data_path:
        config_dict["data_path"] = os.path.abspath(data_path)
    _, net, _, (_, _, test) = build("STOSA", dataset, config_dict=config_dict)
    net.eval()
    batch = next(iter(test))[0]
    seq, lengths = batch[net.ITEM_SEQ], batch[net.ITEM_SEQ_LEN]

    def last_row():  # the model file's path
        return stosa.STOSA.full_sort_predict(net, batch)

    def every_row():  # encode every position, gather the last (RecBole's SASRec way)
        mean, cov = stosa.STOSA.encode(net, seq, lengths)
        last = lengths - 1
        output = net.gather_indexes(mean, last), net.gather_indexes(cov, last)
        return stosa.STOSA.all_item_scores(net, output)

    times = {"last row": [], "every row": []}
    with torch.no_grad():
        torch.testing.assert_close(last_row(), every_row(), rtol=1e-5, atol=1e-5)
        for _ in range(repeats):
            for name, path in (("last row", last_row), ("every row", every_row)):
                start = time.perf_counter()
                path()
                times[name].append(time.perf_counter() - start)
    return {k: statistics.median(v) for k, v in times.items()}, tuple(seq.shape)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="ml-100k")
    p.add_argument("--data_path", default=None)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=os.path.join(HERE, "speed"))
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    seconds, (users, length) = measure(args.dataset, args.data_path, args.repeats)
    ratio = seconds["every row"] / seconds["last row"]
    command = "python -m experiments.stosa_last_row " + shlex.join(sys.argv[1:])
    lines = [
        f"# STOSA's last-row prediction path on {args.dataset}",
        "",
        f"Command: `{command.strip()}` ({datetime.date.today()}, {cpu_name()}, "
        f"torch {torch.__version__}, {args.threads} thread(s), median of "
        f"{args.repeats} interleaved repeats; the same scores to 1e-5).",
        "",
        "| path | seconds | ratio |",
        "|---|---|---|",
        f"| every position, then the last gathered | {seconds['every row']:.3f} | "
        f"{ratio:.2f} |",
        f"| the last position only (stosa.py) | {seconds['last row']:.3f} | 1.00 |",
        "",
        f"Full ranking of {users} test users at T {length}: the last-row path is "
        f"{ratio:.1f}x faster.",
        "",
    ]
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"stosa_last_row_{args.dataset}.md")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
