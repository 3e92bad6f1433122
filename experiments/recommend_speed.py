"""Time of ``recbole_attn.commands.recommend`` (every user's top-K) against one full-ranking test
evaluation of the same model, measured in one process, interleaved over repeats.

    python -m experiments.recommend_speed --dataset=Beauty --data_path=dataset [--model=SASRecAP]
        [--topk=20] [--repeats=3] [--threads=2] [--out=experiments/speed]

The model is trained for one epoch first (its scores, not its quality, matter here). Every
repeat loads the checkpoint and the dataset (``load_data_and_model``), runs one test
evaluation, then ``recommend()`` for every user, which loads them again itself: its time
includes loading, the evaluation's does not. Writes ``<out>/recommend_<dataset>.md`` with
the command and the machine at the top; the ratio is what we report (seconds depend on the
load of the machine).
"""

import argparse
import datetime
import logging
import os
import platform
import shlex
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def measure(model, dataset, data_path, topk, repeats):
    from recbole_attn.engine.quick_start import load_data_and_model, run
    from recbole_attn.commands.recommend import recommend

    config = {
        "data_path": data_path,
        "epochs": 1,
        "state": "ERROR",
        "threads": torch.get_num_threads(),  # as main() set them
    }
    model_file = run(model, dataset, config_dict={**config, "show_progress": False})[
        "saved_model_file"
    ]
    logging.getLogger().handlers.clear()
    rows = []
    for _ in range(repeats):
        start = time.perf_counter()
        _, _, trainer, (_, _, test) = load_data_and_model(
            model_file, {"state": "ERROR"}
        )
        loaded = time.perf_counter()
        trainer.evaluate(test, model_file=model_file, show_progress=False)
        evaluated = time.perf_counter()
        result = recommend(model_file, k=topk)
        done = time.perf_counter()
        users = len({row[0] for row in result["rows"]})
        rows.append((loaded - start, evaluated - loaded, done - evaluated, users))
    return rows


def report(args, rows):
    load, evaluation, recommended, users = zip(*rows)
    ratios = [r / e for r, e in zip(recommended, evaluation)]
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    command = "python -m experiments.recommend_speed " + shlex.join(sys.argv[1:])
    return (
        f"# Top-{args.topk} of every user of {args.dataset} against one test evaluation\n\n"
        f"Command: `{command}`\n\n"
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} logical "
        f"cores, torch {torch.__version__} ({args.threads} threads), Python "
        f"{platform.python_version()}, device cpu. Date: {now}.\n\n"
        f"{args.model} after one training epoch; {users[0]:,} users, K = {args.topk}; "
        f"{args.repeats} repeats (median; per-repeat ratio).\n\n"
        "| step | seconds (median) |\n|---|---|\n"
        f"| load checkpoint and dataset | {statistics.median(load):.2f} |\n"
        f"| one full-ranking test evaluation | {statistics.median(evaluation):.2f} |\n"
        f"| recommend(), every user (loading included) | {statistics.median(recommended):.2f} |\n\n"
        f"recommend / test evaluation: **{statistics.median(ratios):.2f}** "
        f"(repeats: {', '.join(f'{r:.2f}' for r in ratios)}).\n"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="Beauty")
    parser.add_argument("--data_path", default="dataset")
    parser.add_argument("--model", default="SASRecAP")
    parser.add_argument("--topk", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=os.path.join(HERE, "speed"))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = measure(args.model, args.dataset, args.data_path, args.topk, args.repeats)
    text = report(args, rows)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"recommend_{args.dataset}.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    print(text)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
