"""Reproduction studies: every model against its baseline under one stated protocol,
resumable, several seeds (a study's ``one_seed`` variants run the first seed only, and
``max_seeds`` caps the count), one JSON per (variant, seed).

    python benchmarks/studies.py --study=parec_beauty [--jobs=8] [--device=cuda]
        [--seeds=2020,2021,2022] [--variants=SASRec,PARec] [--epochs=N]
    python benchmarks/studies.py --study=parec_beauty --report     # only rebuild the table
    python benchmarks/studies.py --list

A study fixes the dataset, the evaluation protocol (split, ranking, history masking,
metrics, the validation metric that picks the checkpoint) and the shared training budget;
each variant is a model with its overrides. Runs write
``benchmarks/results/studies/<study>/<variant>__seed<k>.json`` when they finish; existing
files are skipped, so a study can be split over processes (``--jobs``, one fresh process
per run) or machines and resumed. ``benchmarks/results/studies/<study>.md`` is rebuilt from
all JSON files: test metrics as mean +- std over seeds (and the median where the paper
reports medians), the validation score, epochs, seconds per epoch as a ratio to the
study's baseline, and the device every number came from.

Datasets are RecBole atomic files under ``--data_path`` (default ``dataset``), e.g.
``python dataset_scripts/seqfile.py --sequences ../shared/datasets/raw/office/Office_Products.txt --name Office --output_dir dataset``.
"""

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)

FULL = {"split": {"LS": "valid_and_test"}, "order": "TO", "mode": "full"}
UNI100 = {"split": {"LS": "valid_and_test"}, "order": "TO", "mode": "uni100"}
STOSA_METRICS = {
    "metrics": ["Recall", "NDCG", "MRR"],
    "topk": [1, 5, 10, 20],
    "valid_metric": "MRR@20",
}
AWRSR_METRICS = {
    "metrics": ["Recall", "NDCG"],
    "topk": [1, 5, 10],
    "valid_metric": "NDCG@5",
}
HIT_METRICS = {"metrics": ["Hit", "NDCG"], "topk": [5, 10], "valid_metric": "NDCG@10"}


#: STOSA as the paper writes it (the default until the Office ablation below; the studies
#: that ran it pin it, so that they still rerun as recorded)
STOSA_PAPER = {
    "position_alignment": "first",
    "stosa_layer_means": "paper",
    "stosa_input": "paper",
    "stosa_ffn": "paper",
    "stosa_init": "recbole",
}
#: every official-code behaviour of STOSA that has an option (docs/models.md, "What the
#: official code does differently"); neg_exclude_heldout is a leak of held-out items.
#: Without the leak, this is STOSA's default (STOSA.yaml; a test checks it)
STOSA_OFFICIAL = {
    "position_alignment": "last",
    "stosa_layer_means": "official",
    "stosa_input": "official",
    "stosa_ffn": "official",
    "stosa_init": "official",
    "neg_exclude_heldout": True,
}
#: one official option reverted to ours (the leave-one-out ablations)
STOSA_REVERTS = {
    "no held-out leak": {"neg_exclude_heldout": False},
    "RecBole init": {"stosa_init": "recbole"},
    "paper input": {"stosa_input": "paper"},
    "paper FFN": {"stosa_ffn": "paper"},
    "no mean bug": {"stosa_layer_means": "paper"},
    "first alignment": {"position_alignment": "first"},
}


def _awrsr(backbone, refinement):
    """AWRSR on a backbone, trained with the backbone's loss (SASRec: the SASRec paper's
    BCE, as its baseline variant; STOSA: BPR + pvn, the paper's STOSA as these studies
    ran it)."""
    loss = {"loss_type": "BCE"} if backbone == "SASRec" else STOSA_PAPER
    return ("AWRSR", {"backbone": backbone, "refinement": refinement, **loss})


#: name -> protocol (config), columns shown, baseline label, variants {label: (model,
#: overrides)}, a note on the paper's own protocol
STUDIES = {
    "stosa_office": {
        "dataset": "Office",
        "protocol": {
            "eval_args": FULL,
            "eval_mask_history": True,
            **STOSA_METRICS,
            "epochs": 200,
            "stopping_step": 20,
        },
        "columns": ["recall@1", "recall@5", "ndcg@5", "mrr@20"],
        "baseline": "STOSA (first)",
        "one_seed": [
            "STOSA legacy (last)",
            "SASRecAP BPR (first)",
            "SASRecAP BPR (last)",
        ],
        "variants": {
            "STOSA (first)": ("STOSA", STOSA_PAPER),
            "STOSA (last)": ("STOSA", {**STOSA_PAPER, "position_alignment": "last"}),
            "STOSA legacy (last)": (
                "STOSA",
                {
                    **STOSA_PAPER,
                    "position_alignment": "last",
                    "stosa_layer_means": "official",
                },
            ),
            "SASRecAP BPR (first)": (
                "SASRecAP",
                {"loss_type": "BPR", "MAX_ITEM_LIST_LENGTH": 100},
            ),
            "SASRecAP BPR (last)": (
                "SASRecAP",
                {
                    "loss_type": "BPR",
                    "MAX_ITEM_LIST_LENGTH": 100,
                    "position_alignment": "last",
                },
            ),
        },
        "paper": "STOSA Table 1 (Office): R@1 .0234, R@5 .0677, N@5 .0461, MRR .0502; "
        "official code, 200 epochs on 2 CPU cores: .0210 / .0616 / .0415 / .0444 "
        "(full ranking, history masked, MRR over the whole list).",
    },
    "stosa_office_ablation": {
        "dataset": "Office",
        "protocol": {
            "eval_args": FULL,
            "eval_mask_history": True,
            **STOSA_METRICS,
            "epochs": 200,
            "stopping_step": 100,  # the official code's patience
        },
        "columns": ["recall@1", "recall@5", "ndcg@5", "mrr@20"],
        "baseline": "official-like",
        "variants": {
            "official-like": ("STOSA", STOSA_OFFICIAL),
            "paper model (last)": (
                "STOSA",
                {**STOSA_PAPER, "position_alignment": "last"},
            ),
            **{
                f"official-like: {name}": ("STOSA", {**STOSA_OFFICIAL, **revert})
                for name, revert in STOSA_REVERTS.items()
            },
        },
        "paper": "STOSA Table 1 (Office): R@1 .0234, R@5 .0677, N@5 .0461, MRR .0502; "
        "official code, 200 epochs on 2 CPU cores: .0210 / .0616 / .0415 / .0444 "
        "(full ranking, history masked, MRR over the whole list). Official-like = every "
        "official-code option on; each other official-like row reverts ONE option to ours.",
    },
    "stosa_beauty": {
        "dataset": "Beauty",
        "protocol": {
            "eval_args": FULL,
            "eval_mask_history": True,
            **STOSA_METRICS,
            "epochs": 500,  # the official README's Beauty run
            "stopping_step": 100,
        },
        "columns": ["recall@1", "recall@5", "ndcg@5", "mrr@20"],
        "baseline": "STOSA (default)",
        "variants": {
            "STOSA (default)": ("STOSA", {}),
            "paper model": ("STOSA", STOSA_PAPER),
        },
        "paper": "STOSA Table 1 (Beauty, 22,363 users): R@1 .0193, R@5 .0504, N@5 .0351, "
        "MRR .0360 (full ranking, history masked, MRR over the whole list); the official "
        "README run: d 64, T 100, 500 epochs.",
    },
    "awrsr_office": {
        "dataset": "Office",
        "protocol": {
            "eval_args": FULL,
            "eval_mask_history": True,
            **AWRSR_METRICS,
            "epochs": 200,
            "stopping_step": 20,
            "n_layers": 1,
        },
        "columns": ["recall@1", "recall@5", "ndcg@5", "recall@10", "ndcg@10"],
        "baseline": "SASRec",
        "max_seeds": 1,
        "variants": {
            "SASRec": ("SASRecAP", {"loss_type": "BCE"}),
            "SASRec + simp": _awrsr("SASRec", "simp"),
            "SASRec + value": _awrsr("SASRec", "value"),
            "SASRec + add": _awrsr("SASRec", "add"),
            "STOSA": ("STOSA", STOSA_PAPER),
            "STOSA + simp": _awrsr("STOSA", "simp"),
            "STOSA + value": _awrsr("STOSA", "value"),
            "STOSA + add": _awrsr("STOSA", "add"),
            "STOSA + stoc": _awrsr("STOSA", "stoc"),
        },
        "paper": "AWRSR Table 2 reports Beauty (52k users), ML-1M and Anime: e.g. "
        "Beauty NDCG@5 SASRec .0234 -> simp .0243 (+3.85 %), STOSA .0285 -> simp .0304 "
        "(+6.67 %). 1 layer, early stopping on NDCG@5.",
    },
    "parec_beauty": {
        "dataset": "Beauty",
        "protocol": {
            "eval_args": FULL,
            "eval_mask_history": False,
            "metrics": ["Hit", "NDCG"],
            "topk": [10],
            "valid_metric": "NDCG@10",
            "epochs": 200,
            "stopping_step": 10,
            "MAX_ITEM_LIST_LENGTH": 50,
        },
        "columns": ["hit@10", "ndcg@10"],
        "baseline": "SASRec (CE)",
        "median": True,
        "one_seed": [
            "PARec + position emb. + FFN after",
            "average",
            "linear annealing",
            "exponential annealing",
        ],
        "variants": {
            "SASRec (CE)": (
                "SASRecAP",
                {"loss_type": "CE", "position_alignment": "last"},
            ),
            "PARec": ("PARec", {}),
            "FPARec": ("FPARec", {}),
            "PARec + position emb. + FFN after": (
                "PARec",
                {"add_position_embedding": True, "ffn_placement": "after"},
            ),
            "average": ("PARec", {"positional_pattern": "average"}),
            "linear annealing": ("PARec", {"positional_pattern": "linear"}),
            "exponential annealing": ("PARec", {"positional_pattern": "exponential"}),
        },
        "paper": "PARec/FPARec Table 3 (Beauty, full ranking, history not excluded, "
        "median of 3): SASRec .0813 / .0405, PARec .0806 / .0395, FPARec .0821 / .0402 "
        "(HR@10 / NDCG@10).",
    },
}
STUDIES["parec_ml100k"] = {
    **STUDIES["parec_beauty"],
    "dataset": "ml-100k",
    "one_seed": [],
    "paper": "PARec/FPARec Table 4 (ablation, HR@10 / NDCG@10, ML-1M): FPARec .2419 / "
    ".1232, PARec .2255 / .1130, SASRec .2346 / .1186, average .2025 / .0986, linear "
    "annealing .2056 / .0997, exponential annealing .2386 / .1283 (here on ml-100k).",
}
STUDIES["awrsr_beauty"] = {
    **STUDIES["awrsr_office"],
    "dataset": "Beauty",
    "protocol": {
        **STUDIES["awrsr_office"]["protocol"],
        "MAX_ITEM_LIST_LENGTH": 20,  # the paper's best SASRec setting on Beauty
        "hidden_size": 128,
    },
    # the paper's headline claim (M_simp on both backbones); the other refinements run
    # on Office
    "variants": {
        k: STUDIES["awrsr_office"]["variants"][k]
        for k in ("SASRec", "SASRec + simp", "STOSA", "STOSA + simp")
    },
}
STUDIES["bucket_office"] = {
    "dataset": "Office",
    "protocol": {
        "eval_args": FULL,
        "eval_mask_history": True,
        "metrics": ["Recall", "NDCG", "MRR"],
        "topk": [5, 10, 20],
        "valid_metric": "NDCG@10",
        "epochs": 200,
        "stopping_step": 10,
    },
    "columns": ["recall@10", "ndcg@10", "mrr@20"],
    "baseline": "SASRecAP",
    "variants": {
        "SASRecAP": ("SASRecAP", {}),
        "SASRecAP (bucket batches)": ("SASRecAP", {"train_batch_grouping": "bucket"}),
        "PAtt": ("PAtt", {}),
        "PAtt (bucket batches)": ("PAtt", {"train_batch_grouping": "bucket"}),
    },
    "paper": "none (issue: length-bucketed batches change batch composition; quality "
    "over 3 seeds next to the speed, off by default unless unchanged within noise).",
}
for _dataset, _name in (("Beauty", "beauty"), ("ml-100k", "ml100k")):
    for _mode, _args in (("full", FULL), ("uni100", UNI100)):
        STUDIES[f"rksa_{_name}_{_mode}"] = {
            "dataset": _dataset,
            "protocol": {
                "eval_args": _args,
                "eval_mask_history": False,
                **HIT_METRICS,
                "epochs": 200,
                "stopping_step": 10,
                "train_batch_size": 128,
                "MAX_ITEM_LIST_LENGTH": 50,
            },
            "columns": ["hit@5", "ndcg@5", "hit@10", "ndcg@10"],
            "baseline": "SASRec (BCE)",
            # more seeds (--seeds) for the paper's model and its baseline only
            "one_seed": ["RKSA C", "RKSA I", "RKSA U", "RKSA I+U"],
            # the best model of a full-ranking run is also scored with 100 sampled
            # negatives (the paper's ranking): the uni100 numbers at half the training
            # (the uni100 study trains again and selects on sampled validation)
            **({"rescore": {"uni100": UNI100}} if _mode == "full" else {}),
            "variants": {
                "SASRec (BCE)": (
                    "SASRecAP",
                    {
                        "loss_type": "BCE",
                        "n_layers": 2,
                        "n_heads": 1,
                        "inner_size": 64,
                        "hidden_act": "relu",
                    },
                ),
                "RKSA C": ("RKSA", {"kernels": ["count"]}),
                "RKSA I": ("RKSA", {"kernels": ["item"]}),
                "RKSA U": ("RKSA", {"kernels": ["user"]}),
                "RKSA I+U": ("RKSA", {"kernels": ["item", "user"]}),
                "RKSA C+I+U": ("RKSA", {"kernels": ["count", "item", "user"]}),
            },
            "paper": "RKSA Table 2 (its own Beauty: 52k users, 100 sampled negatives): "
            "SASRec Hit@5 .3735 NDCG@5 .2846 Hit@10 .4720 NDCG@10 .3164; RKSA .3999 / "
            ".2998 / .5015 / .3326. Table 3 (Hit@10, Beauty): C .5015, I .4982, U "
            ".4958, I+U .4951, C+I+U .5011.",
        }


def slug(text):
    return "".join(c if c.isalnum() else "_" for c in text).strip("_")


def run_one(study_name, label, seed, args):
    """Train one variant with one seed (in its own process); return its result dict."""
    import torch

    from recbole_attn.quick_start import build

    study = STUDIES[study_name]
    model, overrides = study["variants"][label]
    config_dict = {
        "data_path": os.path.abspath(args.data_path),
        "seed": seed,
        "state": "ERROR",
        "show_progress": False,
        "device": args.device,
        **study["protocol"],
        **overrides,
    }
    if args.epochs:
        config_dict["epochs"] = args.epochs
    if args.stopping_step:
        config_dict["stopping_step"] = args.stopping_step
    if args.threads:
        torch.set_num_threads(args.threads)
    os.chdir(tempfile.mkdtemp(prefix="study-"))
    start = time.perf_counter()
    config, net, trainer, (train, valid, test) = build(
        model, study["dataset"], config_dict=config_dict
    )
    logging.getLogger().setLevel(logging.ERROR)
    epochs = []
    last = [time.perf_counter()]

    def record(epoch, score):
        now = time.perf_counter()
        epochs.append({"epoch": epoch, "valid_score": float(score), "s": now - last[0]})
        last[0] = now

    _, best_valid = trainer.fit(train, valid, saved=True, callback_fn=record)
    test_result = trainer.evaluate(test, load_best_model=True)
    rescored = {
        mode: rescore(trainer.saved_model_file, eval_args)
        for mode, eval_args in study.get("rescore", {}).items()
    }
    best_epoch = max(epochs, key=lambda e: e["valid_score"])["epoch"] if epochs else -1
    device = (
        f"GPU ({torch.cuda.get_device_name()})"
        if config["device"].type == "cuda"
        else f"CPU ({torch.get_num_threads()} threads)"
    )
    return {
        "study": study_name,
        "label": label,
        "model": model,
        "seed": seed,
        "overrides": overrides,
        "config": {
            k: config[k]
            for k in sorted(
                set(study["protocol"])
                | set(overrides)
                | {"n_layers", "n_heads", "hidden_size", "MAX_ITEM_LIST_LENGTH"}
            )
            if k not in ("eval_args",)
        },
        "eval_mode": study["protocol"]["eval_args"]["mode"],
        "best_valid": {k: float(v) for k, v in best_valid.items()},
        "test": {k: float(v) for k, v in test_result.items()},
        **({"rescored": rescored} if rescored else {}),
        "best_epoch": best_epoch + 1,
        "epochs_run": len(epochs),
        "seconds_per_epoch": statistics.median(e["s"] for e in epochs[1:] or epochs),
        "seconds": round(time.perf_counter() - start, 1),
        "parameters": sum(p.numel() for p in net.parameters() if p.requires_grad),
        "device": device,
        # the best model (the runner's scratch folder; for heatmaps, not kept by the repo)
        "model_file": os.path.abspath(trainer.saved_model_file),
    }


def rescore(model_file, eval_args):
    """Test metrics of a saved best model under another ranking (``eval_args``, e.g. 100
    sampled negatives): the same split, model and selected epoch, only the candidates
    ranked differ."""
    from recbole_attn.quick_start import load_data_and_model

    _, _, trainer, (_, _, test) = load_data_and_model(
        model_file, {"eval_args": eval_args}
    )
    logging.getLogger().setLevel(logging.ERROR)
    return {k: float(v) for k, v in trainer.evaluate(test).items()}


def rescore_missing(study_name, folder):
    """Add the study's ``rescore`` results to finished runs that lack them (runs that
    predate the option), where the run's best model file still exists; returns the
    runs still missing them."""
    missing = []
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        path = os.path.join(folder, name)
        with open(path) as f:
            r = json.load(f)
        todo = {
            mode: eval_args
            for mode, eval_args in STUDIES[study_name].get("rescore", {}).items()
            if mode not in r.get("rescored", {})
        }
        if not todo:
            continue
        if not os.path.isfile(r.get("model_file", "")):
            missing.append(f"{r['label']} seed {r['seed']} (model file gone)")
            continue
        for mode, eval_args in todo.items():
            r.setdefault("rescored", {})[mode] = rescore(r["model_file"], eval_args)
        with open(path, "w") as f:
            json.dump(r, f, indent=1)
    return missing


def _path(folder, label, seed):
    return os.path.join(folder, f"{slug(label)}__seed{seed}.json")


def _work(job):
    study_name, label, seed, args, folder = job
    result = run_one(study_name, label, seed, args)
    with open(_path(folder, label, seed), "w") as f:
        json.dump(result, f, indent=1)
    return label, seed, result["test"], result["seconds"]


def _fmt(values, median=False):
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.4f}"
    center = statistics.median(values) if median else statistics.mean(values)
    return f"{center:.4f} ± {statistics.stdev(values):.4f}"


def report(study_name, folder, out):
    study = STUDIES[study_name]
    results = {}
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        with open(os.path.join(folder, name)) as f:
            r = json.load(f)
        results.setdefault(r["label"], []).append(r)
    if not results:
        return f"no results for {study_name} yet"
    protocol = study["protocol"]
    median = study.get("median", False)
    base = results.get(study["baseline"], [])
    base_epoch = statistics.median(r["seconds_per_epoch"] for r in base) if base else 0
    cols = study["columns"]
    header = (
        ["variant", "seeds"]
        + cols
        + [
            f"valid {protocol['valid_metric']}",
            "best / run epochs",
            "s / epoch",
            f"time ratio vs {study['baseline']}",
            "device",
        ]
    )
    any_run = next(iter(results.values()))[0]
    lines = [
        f"# {study_name}: {study['dataset']}",
        "",
        f"Protocol: leave-one-out, {protocol['eval_args']['mode']} ranking, history "
        f"{'masked' if protocol['eval_mask_history'] else 'not masked'}, test metrics at "
        f"the epoch of best validation {protocol['valid_metric']} (early stop after "
        f"{any_run['config'].get('stopping_step', protocol['stopping_step'])} "
        "validations without improvement, at most "
        f"{any_run['config'].get('epochs', protocol['epochs'])} epochs). "
        f"{'Median' if median else 'Mean'} ± std over seeds. Each model keeps its "
        "yaml defaults besides the protocol and its overrides (JSON files).",
        "",
        f"Paper: {study['paper']}",
        "",
        f"Command: `python benchmarks/studies.py --study={study_name} --jobs=N "
        "--device=cuda|cpu`",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for label in study["variants"]:
        runs = results.get(label)
        if not runs:
            continue
        cells = [label, str(len(runs))]
        cells += [_fmt([r["test"][c] for r in runs], median) for c in cols]
        cells.append(
            _fmt([r["best_valid"][protocol["valid_metric"].lower()] for r in runs])
        )
        cells.append(", ".join(f"{r['best_epoch']}/{r['epochs_run']}" for r in runs))
        per_epoch = statistics.median(r["seconds_per_epoch"] for r in runs)
        cells.append(f"{per_epoch:.2f}")
        cells.append(f"{per_epoch / base_epoch:.2f}" if base_epoch else "-")
        cells.append(", ".join(sorted({r["device"] for r in runs})))
        lines.append("| " + " | ".join(cells) + " |")
    for mode in study.get("rescore", {}):
        lines += [
            "",
            f"The same best models (selected on {protocol['eval_args']['mode']}-ranking "
            f"validation above), test ranked with {mode}: "
            f"`python benchmarks/studies.py --study={study_name} --rescore` fills in runs "
            "that lack it while their model files exist.",
            "",
            "| " + " | ".join(["variant", "seeds", *cols]) + " |",
            "|" + "---|" * (len(cols) + 2),
        ]
        for label in study["variants"]:
            runs = [r for r in results.get(label, []) if mode in r.get("rescored", {})]
            if runs:
                cells = [label, str(len(runs))]
                cells += [
                    _fmt([r["rescored"][mode][c] for r in runs], median) for c in cols
                ]
                lines.append("| " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, f"{study_name}.md"), "w") as f:
        f.write(text)
    return text


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--study", action="append", help="study name (repeatable)")
    p.add_argument("--list", action="store_true")
    p.add_argument("--data_path", default="dataset")
    p.add_argument("--device", default="cpu")
    p.add_argument("--seeds", default="2020")
    p.add_argument("--variants", default=None, help="comma-separated labels")
    p.add_argument("--epochs", type=int, default=None, help="override the budget")
    p.add_argument("--stopping_step", type=int, default=None, help="override patience")
    p.add_argument("--jobs", type=int, default=1, help="parallel processes")
    p.add_argument("--threads", type=int, default=None, help="torch threads per run")
    p.add_argument("--out", default=os.path.join(HERE, "results", "studies"))
    p.add_argument("--report", action="store_true", help="only rebuild the tables")
    p.add_argument(
        "--rescore",
        action="store_true",
        help="score finished runs' best models with the study's other rankings "
        "(its `rescore` option) where missing, then rebuild the tables",
    )
    return p.parse_args()


def main():
    args = parse_args()
    if args.list or not args.study:
        for name, study in STUDIES.items():
            print(
                f"{name}: {study['dataset']}, variants: {', '.join(study['variants'])}"
            )
        return
    seeds = [int(s) for s in args.seeds.split(",")]
    jobs = []
    for name in args.study:
        if name not in STUDIES:
            raise SystemExit(f"unknown study {name!r}; --list shows them")
        folder = os.path.join(args.out, name)
        os.makedirs(folder, exist_ok=True)
        labels = list(STUDIES[name]["variants"])
        if args.variants:
            labels = [v for v in args.variants.split(",") if v in labels]
        one_seed = set(STUDIES[name].get("one_seed", ()))
        for seed in seeds[: STUDIES[name].get("max_seeds", len(seeds))]:
            for label in labels:
                if label in one_seed and seed != seeds[0]:
                    continue  # a single run (study definition)
                if args.report or args.rescore:
                    continue
                if not os.path.isfile(_path(folder, label, seed)):
                    jobs.append((name, label, seed, args, folder))
    if jobs:
        context = get_context("spawn")
        with ProcessPoolExecutor(
            max_workers=args.jobs, mp_context=context, max_tasks_per_child=1
        ) as pool:
            futures = [pool.submit(_work, job) for job in jobs]
            for future in as_completed(futures):
                try:
                    label, seed, test, seconds = future.result()
                    print(
                        f"done {label} seed {seed} ({seconds:.0f} s): {test}",
                        flush=True,
                    )
                except Exception as err:  # keep the other runs going
                    print(f"FAILED: {err!r}", flush=True)
    for name in args.study:
        if args.rescore:
            for run in rescore_missing(name, os.path.join(args.out, name)):
                print(f"not rescored: {run}")
        print(report(name, os.path.join(args.out, name), args.out))


if __name__ == "__main__":
    main()
