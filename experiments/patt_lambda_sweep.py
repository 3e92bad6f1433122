"""lambda sweep of PAtt (D = exp(-lambda P)) on RecBole's bundled ml-100k, with SASRecAP as
reference, few epochs; test Recall/NDCG @5/@20 at the best validation NDCG@20.

    python -m experiments.patt_lambda_sweep [--epochs=40] [--lambdas=1,16,64,256,1024] [--ks=2,3]
        [--no_baselines] [--name=patt_lambda_sweep]

Runs in a temporary directory (RecBole's log/ and saved/ go there). Writes
``experiments/patt_lambda_sweep/<name>.md`` (an existing file of that name is replaced).
One of the measurements beside the runner (experiments/README.md): its tables predate
the runner's JSON runs, so they stay as this script wrote them.
"""

import argparse
import logging
import os
import sys
import tempfile
import time

import recbole

from recbole_attn.engine.quick_start import run

#: experiments/ (the tables go to its patt_lambda_sweep/ folder)
HERE = os.path.dirname(os.path.abspath(__file__))

METRICS = ["recall@5", "recall@20", "ndcg@5", "ndcg@20"]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=40)
    p.add_argument("--lambdas", default="1,16,64,256,1024")
    p.add_argument("--ks", default="2,3")
    p.add_argument("--seed", type=int, default=2020)
    p.add_argument("--out", default=os.path.join(HERE, "patt_lambda_sweep"))
    p.add_argument("--name", default="patt_lambda_sweep", help="output file stem")
    p.add_argument(
        "--no_baselines", action="store_true", help="skip the two SASRecAP runs"
    )
    return p.parse_args()


def main():
    args = parse_args()
    shared = {
        "data_path": os.path.join(os.path.dirname(recbole.__file__), "dataset_example"),
        "epochs": args.epochs,
        "stopping_step": 10,
        "topk": [5, 20],
        "metrics": ["Recall", "NDCG"],
        "valid_metric": "NDCG@20",
        "hidden_size": 64,
        "inner_size": 256,
        "n_layers": 1,
        "n_heads": 1,
        "hidden_dropout_prob": 0.5,
        "attn_dropout_prob": 0.0,
        "MAX_ITEM_LIST_LENGTH": 30,
        "seed": args.seed,
        "state": "ERROR",
    }
    runs = []
    if not args.no_baselines:
        runs += [
            ("SASRecAP (CE)", "SASRecAP", {}),
            ("SASRecAP (BPR)", "SASRecAP", {"loss_type": "BPR"}),
        ]
    for k in map(int, args.ks.split(",")):
        for lam in map(float, args.lambdas.split(",")):
            runs.append(
                (f"PAtt{k} lambda={lam:g}", "PAtt", {"dpp_k": k, "dpp_lambda": lam})
            )
    command = " ".join(sys.argv[1:])
    os.chdir(tempfile.mkdtemp(prefix="patt-sweep-"))
    rows = []
    for label, model, extra in runs:
        start = time.perf_counter()
        result = run(model, "ml-100k", config_dict={**shared, **extra}, saved=True)
        logging.getLogger().handlers.clear()
        test = result["test_result"]
        rows.append(
            [label, f"{result['best_valid_result']['ndcg@20']:.4f}"]
            + [f"{test[m]:.4f}" for m in METRICS]
            + [f"{time.perf_counter() - start:.0f}"]
        )
        print(rows[-1], flush=True)
    header = ["variant", "valid ndcg@20"] + [f"test {m}" for m in METRICS]
    header += ["seconds"]
    lines = [
        "# PAtt lambda sweep on ml-100k",
        "",
        f"RecBole's bundled ml-100k, leave-one-out, full ranking, history not masked; "
        f"d=64, 1 layer, 1 head, T=30, dropout 0.5, lr 1e-3, batch 256, all-position "
        f"training, at most {args.epochs} epochs (early stop on valid NDCG@20, patience "
        f"10), seed {args.seed}, one run each. PAtt: BCE with one negative per position; "
        f"rows of D normalized. Test metrics at the best validation epoch; choose "
        f"lambda by the validation column.",
        "",
        f"Command: `python -m experiments.patt_lambda_sweep {command}`",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, args.name + ".md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
