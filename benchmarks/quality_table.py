"""Accuracy and diversity of PAtt^2, PAtt^3, DPAtt^2, DPAtt^3, SASRec and STOSA under one
protocol: Recall, NDCG, CC, ILD and F1 at 5 and 20, test metrics at the best validation
NDCG@20, leave-one-out, full ranking, history masked, same T and epoch budget for all.

    python benchmarks/quality_table.py --dataset=Beauty --data_path=dataset [--epochs=30]
        [--variants="PAtt2,DPAtt2"] [--max_len=30] [--seed=2020] [--name=quality_Beauty]
    python benchmarks/quality_table.py --dataset=Beauty --report   # only rebuild the table

Each variant runs in a temporary directory (RecBole's log/ and saved/ go there) and writes
its result to ``benchmarks/results/<name>/<variant>.json`` as soon as it finishes; a variant
whose JSON exists is skipped, so the runs can be split over several processes
(``--variants``) or resumed. ``benchmarks/results/<name>.md`` is rebuilt from all JSON files
after every run. Every model keeps its own yaml defaults (layers, heads, dropout, loss)
except the shared settings listed in the table's header.
"""

import argparse
import json
import logging
import os
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from recbole_attn.quick_start import build  # noqa: E402

#: label -> (model, overrides)
VARIANTS = {
    "SASRec (BCE)": ("SASRecAP", {"loss_type": "BCE"}),
    "SASRec (CE)": ("SASRecAP", {"loss_type": "CE"}),
    "SASRec (BPR)": ("SASRecAP", {"loss_type": "BPR"}),
    "STOSA": ("STOSA", {}),
    "PAtt2": ("PAtt", {"dpp_k": 2}),
    "PAtt3": ("PAtt", {"dpp_k": 3}),
    "DPAtt2": ("DPAtt", {"dpp_k": 2}),
    "DPAtt3": ("DPAtt", {"dpp_k": 3}),
}
DPP_MODELS = ("PAtt", "DPAtt")
MEASURES = ["recall", "ndcg", "cc", "ild", "f1"]
CUTOFFS = [5, 20]


def slug(label):
    return "".join(c if c.isalnum() else "_" for c in label).strip("_")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="Beauty")
    p.add_argument("--data_path", default="dataset")
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument(
        "--eval_step", type=int, default=1, help="epochs between validations"
    )
    p.add_argument(
        "--stopping_step", type=int, default=10, help="validations without improvement"
    )
    p.add_argument("--threads", type=int, default=None, help="torch threads")
    p.add_argument(
        "--dpp_lambda",
        type=float,
        default=None,
        help="lambda of the PAtt/DPAtt variants (default: their yaml)",
    )
    p.add_argument("--max_len", type=int, default=30)
    p.add_argument("--seed", type=int, default=2020)
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--name", default=None, help="default: quality_<dataset>")
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    p.add_argument("--report", action="store_true", help="only rebuild the table")
    return p.parse_args()


def shared_config(args):
    return {
        "data_path": os.path.abspath(args.data_path),
        "epochs": args.epochs,
        "eval_step": args.eval_step,
        "stopping_step": args.stopping_step,
        "MAX_ITEM_LIST_LENGTH": args.max_len,
        "metrics": ["Recall", "NDCG", "CC", "ILD", "F1"],
        "topk": CUTOFFS,
        "valid_metric": "NDCG@20",
        "eval_mask_history": True,
        "train_batch_size": 256,
        "learning_rate": 1e-3,
        "seed": args.seed,
        "state": "ERROR",
        "show_progress": False,
    }


def run_variant(label, args, folder):
    model, extra = VARIANTS[label]
    if args.dpp_lambda is not None and model in DPP_MODELS:
        extra = {**extra, "dpp_lambda": args.dpp_lambda}
    config_dict = {**shared_config(args), **extra}
    history = []
    start = time.perf_counter()
    os.chdir(tempfile.mkdtemp(prefix="quality-"))
    config, net, trainer, (train, valid, test) = build(
        model, args.dataset, config_dict=config_dict
    )
    logging.getLogger().setLevel(logging.ERROR)
    _, best_valid = trainer.fit(
        train,
        valid,
        saved=True,
        show_progress=False,
        callback_fn=lambda epoch, score: history.append((epoch, score)),
    )
    test_result = trainer.evaluate(test, load_best_model=True, show_progress=False)
    result = {
        "label": label,
        "model": model,
        "overrides": extra,
        "config": {k: config[k] for k in sorted(config_dict) if k != "data_path"},
        "model_config": {
            k: config[k]
            for k in (
                "n_layers",
                "n_heads",
                "hidden_size",
                "hidden_dropout_prob",
                "loss_type",
                "dpp_lambda",
            )
            if config[k] is not None and (k != "dpp_lambda" or model in DPP_MODELS)
        },
        "valid_curve": history,  # (0-based epoch, valid NDCG@20) of every validation
        "best_valid": {k: float(v) for k, v in best_valid.items()},
        "test": {k: float(v) for k, v in test_result.items()},
        "seconds": round(time.perf_counter() - start),
        "threads": torch.get_num_threads(),
    }
    with open(os.path.join(folder, slug(label) + ".json"), "w") as f:
        json.dump(result, f, indent=1)
    return result


def report(args, folder, name):
    results = []
    for label in VARIANTS:
        path = os.path.join(folder, slug(label) + ".json")
        if os.path.isfile(path):
            with open(path) as f:
                results.append(json.load(f))
    columns = [f"{m}@{k}" for k in CUTOFFS for m in MEASURES]
    header = ["variant"] + [c.replace("recall", "Re").upper() for c in columns]
    header += ["best / run epochs", "valid NDCG@20", "model settings"]
    lines = [
        f"# Accuracy and diversity on {args.dataset}",
        "",
        f"Leave-one-out, full ranking over all items, history masked "
        f"(`eval_mask_history: True`), test metrics at the epoch of best validation "
        f"NDCG@20; T = {args.max_len}, d = 64, batch 256, lr 1e-3, at most {args.epochs} "
        f"epochs, validation every {args.eval_step} epoch(s), early stop after "
        f"{args.stopping_step} validations without improvement, seed {args.seed}, one run "
        f"each; all-position training for every model. Every model "
        f"keeps its own yaml defaults otherwise (last column). CC and ILD use the item "
        f"categories; F1 = 2ad/(a+d) with a = mean(Recall, NDCG), d = mean(CC, ILD) at the "
        f"same cutoff (dataset-level means, docs/metrics.md).",
        "",
        f"Command: `python benchmarks/quality_table.py --dataset={args.dataset} "
        f"--data_path=<dir> --epochs={args.epochs} --eval_step={args.eval_step} "
        f"--stopping_step={args.stopping_step} --max_len={args.max_len} "
        f"--seed={args.seed}"
        + (f" --dpp_lambda={args.dpp_lambda:g}" if args.dpp_lambda else "")
        + "`",
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
    with open(os.path.join(args.out, name + ".md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return "\n".join(lines)


def main():
    args = parse_args()
    name = args.name or f"quality_{args.dataset}"
    folder = os.path.join(args.out, name)
    os.makedirs(folder, exist_ok=True)
    labels = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in labels if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variants {unknown}; choose from {list(VARIANTS)}")
    if args.threads:
        torch.set_num_threads(args.threads)
    cwd = os.getcwd()
    for label in labels if not args.report else []:
        if os.path.isfile(os.path.join(folder, slug(label) + ".json")):
            print(f"{label}: done already, skipped", flush=True)
            continue
        result = run_variant(label, args, folder)
        os.chdir(cwd)
        print(label, result["test"], flush=True)
        logging.getLogger().handlers.clear()
        report(args, folder, name)
    print(report(args, folder, name))


if __name__ == "__main__":
    main()
