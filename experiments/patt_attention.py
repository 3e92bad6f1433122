"""What PAtt's and DPAtt's trained attention looks like at the default scale
(``dpp_lambda`` = 1/sqrt(d_h), the official code's): for the stored one-protocol runs
whose model file is still on this machine, the evaluation-time attention of every test
sequence, summarized per row t (valid keys r <= t):

* self weight / equal share: ``A_tt (t + 1)``, averaged over rows (1 = the current item
  gets what a uniform mean would give it);
* spread of the earlier keys: ``max_r A_tr / min_r A_tr`` over r < t (rows with t >= 2),
  its median, 99th percentile and maximum. Since 0 <= P <= 1 it cannot exceed
  ``exp(lambda)`` (tests/test_patt.py); 1 means a uniform mean of the earlier items.

    python -m experiments.patt_attention [--studies=reproduce_Office,reproduce_ml_100k,reproduce_Beauty]
        [--variants=PAtt,DPAtt] [--users=1000] [--threads=1]

The model files are the runs' ``model_file`` (left in the runner's temporary folders,
not kept in the repository): runs whose file is gone are listed as such. Writes
``experiments/patt_attention/report.md``.
"""

import argparse
import datetime
import math
import os
import platform

import numpy as np
import torch

from experiments.reports import load_runs

#: experiments/ (the report goes to its patt_attention/ folder)
HERE = os.path.dirname(os.path.abspath(__file__))


def row_statistics(attention, lengths):
    """``(self_share, spread)`` lists over the valid rows of ``attention [B, T, T]``
    (one head) for sequences of ``lengths`` (left-aligned)."""
    self_share, spread = [], []
    for a, n in zip(attention, lengths.tolist()):
        for t in range(1, n):
            self_share.append(float(a[t, t]) * (t + 1))
            if t >= 2:
                keys = a[t, :t]
                spread.append(float(keys.max() / keys.min()))
    return self_share, spread


def measure(model_file, users):
    from recbole_attn.engine.quick_start import load_data_and_model

    config, net, _, (_, _, test_data) = load_data_and_model(model_file)
    net.eval()
    self_share, spread, seen = [], [], 0
    with torch.no_grad():
        for batch in test_data:
            interaction = batch[0].to(config["device"])
            lengths = interaction[net.ITEM_SEQ_LEN].cpu()
            for layer in net.attention_weights(interaction):
                for h in range(layer.size(1)):
                    s, p = row_statistics(layer[:, h].cpu(), lengths)
                    self_share += s
                    spread += p
            seen += len(lengths)
            if seen >= users:
                break
    return {
        "users": seen,
        "rows": len(self_share),
        "lambda": float(config["dpp_lambda"]),
        "self share": float(np.mean(self_share)),
        "spread median": float(np.median(spread)),
        "spread p99": float(np.percentile(spread, 99)),
        "spread max": float(np.max(spread)),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--studies", default="reproduce_Office,reproduce_ml_100k,reproduce_Beauty"
    )
    p.add_argument("--variants", default="PAtt,DPAtt")
    p.add_argument("--users", type=int, default=1000, help="test sequences per run")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)

    import recbole_attn  # noqa: F401  (switches RecBole's anomaly detection off)

    labels = args.variants.split(",")
    rows, missing = [], []
    for study in args.studies.split(","):
        for run in load_runs(os.path.join(HERE, study, "runs")):
            if run["label"] not in labels:
                continue
            name = f"{study} | {run['label']} | {run['seed']}"
            if not os.path.exists(run["model_file"]):
                missing.append(name)
                continue
            r = measure(run["model_file"], args.users)
            print(name, r, flush=True)
            rows.append((name, r))

    lines = [
        "# PAtt / DPAtt: the trained attention at the default scale",
        "",
        f"Written by `python -m experiments.patt_attention --studies={args.studies} "
        f"--variants={args.variants} --users={args.users}` on "
        f"{datetime.date.today()} ({platform.machine()}, CPU), from the best model of each "
        "stored one-protocol run (evaluation mode, test sequences). `self / equal`: the "
        "current item's weight times (t + 1), mean over rows (1 = a uniform mean). "
        "`spread`: max / min weight of the earlier keys of a row (1 = uniform; at most "
        "exp(lambda)).",
        "",
        "| study | variant | seed | users | rows | lambda | exp(lambda) | self / equal "
        "| spread median | spread p99 | spread max |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in rows:
        lines.append(
            f"| {name} | {r['users']} | {r['rows']} | {r['lambda']:.3f} "
            f"| {math.exp(r['lambda']):.3f} | {r['self share']:.3f} "
            f"| {r['spread median']:.4f} | {r['spread p99']:.4f} "
            f"| {r['spread max']:.4f} |"
        )
    if missing:
        lines += ["", "Model files no longer on the machine: " + "; ".join(missing)]
    out = os.path.join(HERE, "patt_attention")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
