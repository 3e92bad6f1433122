"""The official PAtt code (github.com/l-lyl/PAtt) on our data and under our protocol, its
results stored as runs of a study (``experiments/<study>/runs/``), beside our variants.

    git clone https://github.com/l-lyl/PAtt ../PAtt        # GPL: run it, never copy it
    python -m experiments.patt_official --official_dir=../PAtt \\
        --sequences=../shared/datasets/raw/beauty/Beauty.txt \\
        --attributes=../shared/datasets/raw/beauty/Beauty_item2attributes.json \\
        --seeds=2020,2021,2022 [--device=cpu|cuda] [--threads=2] [--epochs=N]

Nothing of the official code is copied or edited: a child process imports its modules,
adjusts them at run time (:data:`CHANGES`, each listed in the run's JSON and in
docs/patt.md) and runs its ``main.py`` with the README's Beauty command, one seed per
process, resumable (a seed whose run file exists is skipped).

Its input files are written from the raw S3-Rec files through our own converter's steps
(``recbole_attn.data.convert``: the same k-core, the same categories as
``recbole-attn convert seqfile``), so the official code and our models read the same
users, items, order and categories:

* ``<name>.txt``: one line per user, ``uid i1 i2 ...`` in time order (the raw file
  again when the filter removes nothing);
* ``<name>/cate.txt``: ``<item id - 1> <category id> ...`` for every item, the category
  tokens of our ``.item`` file (brand-like attribute ids dropped, as
  ``--attributes_mode categories``);
* ``<name>/item_kernel_3.pkl``: the diversity kernel's item vectors, which the release
  reads and never uses in its attention or loss (docs/patt.md): zeros of its shape.

Protocol (ours, docs/patt.md "Against the official code"): leave-one-out, every item ranked
(the official code also ranks the padding and mask ids), the user's history excluded (the
official code gives history items the score 0 instead of removing them); early stopping,
checkpoint and budget are the official code's own (validation NDCG@5, patience 50, the
README's 200 epochs).

On a GPU (``--device=cuda``) the release does not run on torch 2.11 (seen on an H100):
``seqmodels.finetune`` indexes its item-kernel table, a CPU tensor, with CUDA ids. No
run-time adjustment covers that; the runs stored were made on the CPU.
"""

import argparse
import ast
import json
import os
import pickle
import statistics
import subprocess
import sys
import time

#: experiments/ (the child process imports nothing of the research wing or the library)
HERE = os.path.dirname(os.path.abspath(__file__))

#: the study whose runs these are, and the label of the official code's rows in it
STUDY = "patt_beauty_official"
LABEL = "official code"
#: the README's Beauty command (github.com/l-lyl/PAtt, README.md), less its paths and GPU
README_ARGS = {
    "model_name": "DPPSAModel",
    "lr": "0.001",
    "hidden_size": "64",
    "max_seq_length": "10",
    "hidden_dropout_prob": "0.4",
    "num_hidden_layers": "1",
    "weight_decay": "0.0",
    "num_attention_heads": "1",
    "attention_probs_dropout_prob": "0.0",
    "pvn_weight": "0.005",
    "epochs": "200",
}
#: what the run-time adjustments change, as the run JSON records them
CHANGES = [
    "CPU only: Tensor.cuda() returns the tensor itself (the release calls it "
    "unconditionally in its model and attention)",
    "numpy >= 1.24: np.float is an alias of float (removed from numpy; its MRR uses it)",
    "the Levenshtein package, needed only by --diverse_kernel=1, is a stub when missing",
    "evaluation ranks only real items and excludes the user's history, as ours: "
    "predict_full returns the scores shifted in float64 so that every real item's is "
    ">= 1 (exact: same order, no new ties), the padding and mask columns 0; after the "
    "release sets history scores to 0, history ranks below every unseen item (the "
    "release: history scores 0, so a seen item outranks negative-scored unseen ones, "
    "and the padding and mask ids are ranked)",
    "item_kernel_3.pkl (never used by the released attention or loss): zeros",
    "torch.triu of a 1-D tensor of n*n entries reads it as its n x n matrix: the "
    "release's normalizer calls torch.triu on each sequence's flat vector of T*T pair "
    "determinants, which torch refuses (at least 2 dimensions); its sum over pairs "
    "i < j is meant, as the release's later view(B, T, T) of the same vector shows",
]
#: the official metric names -> ours (one target per user: HIT@K is Recall@K)
METRIC_NAMES = {"HIT": "recall", "NDCG": "ndcg", "cc": "cc"}


# ---------------------------------------------------------------------- data


def official_inputs(sequences, attributes, name, out_dir, k=5):
    """Write ``<out_dir>/<name>.txt`` and ``<out_dir>/<name>/{cate.txt,
    item_kernel_3.pkl}`` from the raw S3-Rec files through our converter's steps;
    returns their statistics (users, items, categories)."""
    from recbole_attn.data.convert import clean, seqfile

    inter = seqfile.parse_seqfile(sequences)
    categories, brands = seqfile.split_attributes(
        seqfile.parse_item2attributes(attributes)
    )
    result = clean.convert(inter, categories, brands, clean.Options(k=k))
    df = result.inter
    tokens = sorted(set(df["item_id"]), key=int)
    if tokens != [str(i) for i in range(1, len(tokens) + 1)]:  # keep ids 1..n as is
        order = dict.fromkeys(df["item_id"])
        ids = {token: str(i) for i, token in enumerate(order, start=1)}
    else:
        ids = {token: token for token in tokens}
    lines = []
    for user, group in df.groupby("user_id", sort=False):
        items = group.sort_values("timestamp", kind="stable")["item_id"]
        lines.append(" ".join([str(user)] + [ids[i] for i in items]))
    os.makedirs(os.path.join(out_dir, name), exist_ok=True)
    with open(os.path.join(out_dir, f"{name}.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    cat_ids = {}
    rows = {ids[item]: cats for item, cats, _ in result.item_rows}
    with open(os.path.join(out_dir, name, "cate.txt"), "w") as f:
        for i in range(1, len(ids) + 1):
            cats = [cat_ids.setdefault(c, len(cat_ids)) for c in rows.get(str(i), [])]
            f.write(" ".join(str(x) for x in [i - 1] + cats) + "\n")
    import numpy as np

    with open(os.path.join(out_dir, name, "item_kernel_3.pkl"), "wb") as f:
        pickle.dump({"V": np.zeros((len(ids), 64), dtype=np.float32)}, f)
    return {"users": len(lines), "items": len(ids), "categories": len(cat_ids)}


# ---------------------------------------------------------------------- child process


def our_order(scores, mask_id):
    """The official ``[B, mask_id + 1]`` full-ranking scores (column 0 the padding id,
    ``mask_id`` the mask id) made to rank as ours once the release has set the user's
    history to 0: shifted in float64 so that every real item's score is >= 1 (float32
    scores shifted in float64 are exact: the same order, no new ties), the padding and
    mask columns 0."""
    scores = scores.double()
    real = scores[:, 1:mask_id]
    shifted = scores - real.min(-1, keepdim=True).values + 1.0
    shifted[:, 0] = 0.0
    shifted[:, mask_id:] = 0.0
    return shifted


def _adjust(official_dir, record):
    """The run-time adjustments of :data:`CHANGES` (in the child process)."""
    import types

    import numpy as np
    import torch

    sys.path.insert(0, official_dir)
    if not torch.cuda.is_available():
        torch.Tensor.cuda = lambda self, *args, **kwargs: self
    if "float" not in np.__dict__:
        np.float = float
    try:
        import Levenshtein  # noqa: F401
    except ImportError:
        stub = types.ModuleType("Levenshtein")

        def distance(*_):
            raise RuntimeError("--diverse_kernel=1 needs: pip install Levenshtein")

        stub.distance = distance
        sys.modules["Levenshtein"] = stub

    triu = torch.triu

    def square_triu(x, *args, **kwargs):
        n = int(round(x.numel() ** 0.5))
        if x.dim() == 1 and n * n == x.numel():
            x = x.view(n, n)
        return triu(x, *args, **kwargs)

    torch.triu = square_triu

    import trainers

    base = trainers.DPPTrainer
    predict_full = base.predict_full

    def ranked(self, seq_out):
        return our_order(predict_full(self, seq_out), self.args.mask_id)

    full_sort_score = base.get_full_sort_score

    def scored(self, epoch, answers, pred_list):
        out = full_sort_score(self, epoch, answers, pred_list)
        post_fix = ast.literal_eval(out[1])
        record["evaluations"].append(
            {"epoch": epoch, "time": time.perf_counter(), **_metrics(post_fix)}
        )
        return out

    init = base.__init__

    def counted(self, model, *args, **kwargs):
        init(self, model, *args, **kwargs)
        record["parameters"] = sum(p.numel() for p in model.parameters())

    base.predict_full = ranked
    base.get_full_sort_score = scored
    base.__init__ = counted


def _metrics(post_fix):
    """Our metric names and floats from one of the official evaluation dicts."""
    out = {}
    for key, value in post_fix.items():
        name, _, k = key.partition("@")
        if name in METRIC_NAMES and k:
            out[f"{METRIC_NAMES[name]}@{k}"] = float(value)
    return out


def child(spec):
    """Run the official ``main.py`` once under :func:`_adjust` (``spec``: a JSON dict
    with official_dir, argv, threads, record)."""
    import runpy

    import torch

    if spec.get("threads"):
        torch.set_num_threads(spec["threads"])
    record = {"evaluations": [], "start": time.perf_counter()}
    _adjust(spec["official_dir"], record)
    sys.argv = ["main.py"] + spec["argv"]
    runpy.run_path(os.path.join(spec["official_dir"], "main.py"), run_name="__main__")
    record["end"] = time.perf_counter()
    record["device"] = (
        f"GPU ({torch.cuda.get_device_name()})"
        if torch.cuda.is_available() and "--no_cuda" not in spec["argv"]
        else f"CPU ({torch.get_num_threads()} threads)"
    )
    with open(spec["record"], "w") as f:
        json.dump(record, f)


# ---------------------------------------------------------------------- one run


def run_seed(args, seed, data_dir, name):
    """One official run (a child process); returns the run dict of the study."""
    work = os.path.join(args.work_dir, f"seed{seed}")
    os.makedirs(work, exist_ok=True)
    readme = {**README_ARGS, **({"epochs": str(args.epochs)} if args.epochs else {})}
    argv = [f"--{k}={v}" for k, v in readme.items()] + [
        f"--data_dir={data_dir}/",
        f"--data_name={name}",
        f"--output_dir={work}/",
        f"--seed={seed}",
    ]
    argv += ["--no_cuda"] if args.device == "cpu" else ["--gpu_id=0"]
    spec = {
        "official_dir": os.path.abspath(args.official_dir),
        "argv": argv,
        "threads": args.threads,
        "record": os.path.join(work, "record.json"),
    }
    root = os.path.dirname(HERE)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.patt_official",
            "--child",
            json.dumps(spec),
        ],
        cwd=root,
        check=True,
    )
    with open(spec["record"]) as f:
        record = json.load(f)
    return run_dict(record, seed, readme, _commit(args.official_dir))


def run_dict(record, seed, readme, commit):
    """The study's run dict of one official run's ``record`` (every evaluation: the
    per-epoch validations, then the best model's validation and test)."""
    evals = record["evaluations"]
    per_epoch = [e for e in evals if isinstance(e["epoch"], int)]
    best_valid, test = [e for e in evals if e["epoch"] == "best"][-2:]
    # the official early stopping: validation NDCG@5, strictly better, from epoch 1
    best = max(per_epoch[1:] or per_epoch, key=lambda e: e["ndcg@5"])
    times = [b["time"] - a["time"] for a, b in zip(per_epoch, per_epoch[1:])]
    strip = lambda e: {k: v for k, v in e.items() if k not in ("epoch", "time")}
    return {
        "study": STUDY,
        "label": LABEL,
        "model": "DPPSAModel (github.com/l-lyl/PAtt)",
        "seed": seed,
        "overrides": {},
        "config": {
            "official_commit": commit,
            "readme_args": readme,
            "early_stopping": "validation NDCG@5, patience 50 (the release's)",
            "eval_mask_history": True,
        },
        "eval_mode": "full",
        "best_valid": strip(best_valid),
        "test": strip(test),
        "best_epoch": best["epoch"] + 1,
        "epochs_run": len(per_epoch),
        "seconds_per_epoch": statistics.median(times) if times else 0.0,
        "seconds": round(record["end"] - record["start"], 1),
        "parameters": record.get("parameters"),
        "device": record["device"],
        "changes": CHANGES,
    }


def _commit(official_dir):
    try:
        return subprocess.run(
            ["git", "-C", official_dir, "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


# ---------------------------------------------------------------------- main


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--official_dir", help="a checkout of github.com/l-lyl/PAtt")
    p.add_argument("--sequences", help="S3-Rec sequence file (uid i1 i2 ...)")
    p.add_argument("--attributes", help="S3-Rec *_item2attributes.json")
    p.add_argument("--name", default="beauty", help="the official --data_name")
    p.add_argument("--seeds", default="2020", help="comma-separated")
    p.add_argument(
        "--device",
        default="cpu",
        choices=["cpu", "cuda"],
        help="cuda: the release fails there on torch 2.11 (seqmodels.finetune indexes "
        "its CPU item-kernel table with CUDA ids; seen on an H100); no adjustment for it",
    )
    p.add_argument("--threads", type=int, default=None, help="torch threads")
    p.add_argument("--epochs", type=int, default=None, help="override the README's 200")
    p.add_argument("--root", default=HERE, help="folder of the study folders")
    p.add_argument(
        "--work_dir", default=None, help="scratch folder (default: a new temp one)"
    )
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        return child(json.loads(args.child))
    for option in ("official_dir", "sequences", "attributes"):
        if not getattr(args, option):
            raise SystemExit(f"--{option} is needed (python -m {__spec__.name} -h)")
    if args.epochs is not None and args.epochs < 2:
        raise SystemExit(
            "--epochs must be >= 2: the official early stopping saves its first "
            "checkpoint after epoch 1 (counting from 0)"
        )
    if not os.path.isfile(os.path.join(args.official_dir, "main.py")):
        raise SystemExit(
            f"{args.official_dir} has no main.py: clone github.com/l-lyl/PAtt there"
        )
    import tempfile

    args.work_dir = os.path.abspath(
        args.work_dir or tempfile.mkdtemp(prefix="patt-official-")
    )
    data_dir = os.path.join(args.work_dir, "data")
    stats = official_inputs(args.sequences, args.attributes, args.name, data_dir)
    print(f"official inputs in {data_dir}: {stats}", flush=True)
    from experiments.runner import run_path, runs_folder

    folder = runs_folder(args.root, STUDY)
    os.makedirs(folder, exist_ok=True)
    for seed in [int(s) for s in args.seeds.split(",")]:
        path = run_path(folder, LABEL, seed)
        if os.path.isfile(path):
            print(f"seed {seed}: {path} exists, skipped")
            continue
        result = run_seed(args, seed, data_dir, args.name)
        with open(path, "w") as f:
            json.dump(result, f, indent=1)
        print(f"seed {seed}: test {result['test']}", flush=True)


if __name__ == "__main__":
    main()
