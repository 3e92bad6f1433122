"""Speed and memory benchmark of every model: seconds per training epoch, full-ranking
validation time and peak memory, as ratios against SASRecAP (all-position, length grouping
on) measured in the same process, at equal T (``MAX_ITEM_LIST_LENGTH``), d, layers, heads,
FFN width and batch size.

    python -m experiments.speed [--dataset=Office] [--data_path=dataset] [--repeats=3]
    python -m experiments.speed --curve=T [--lengths=30,50,100,200]
    python -m experiments.speed --curve=users [--datasets=Office,Beauty:0.25,Beauty:0.5,Beauty]
    python -m experiments.speed --quick [--curve=...] [--out=DIR]   # tiny fixture, seconds
    python -m experiments.speed --device=cuda --amp=bf16,fp16 [--no_memory]

Every variant is built once; then every repeat runs one training epoch and one validation
of each variant in turn (interleaved), so that load on the machine falls on all of them
alike, and the tables report medians over repeats: seconds (which depend on the load) and
the median over repeats of each variant's ratio to SASRecAP of the same repeat (what we
report). Peak memory is measured in one more pass after the timed ones: on a GPU
``torch.cuda.max_memory_allocated`` over the epoch and validation minus what was allocated
before; on a CPU the growth of the process's resident set size over the same span, sampled
every millisecond by a thread after ``gc.collect()`` and glibc's ``malloc_trim`` (an
approximation: the allocator may keep freed memory).

``--amp`` adds each model's variant again under RecBole's ``enable_amp`` in each dtype
named (the label says it; fp16 trains with RecBole's gradient scaler). On a CPU, the
distance to the machine's limit is measured too (``--no_flops`` skips it): the matmul
FLOPs of an epoch against the fp32 peak, and a profile of where the rest of the time goes.

Sections: the default compares every model (and length grouping on/off for SASRecAP and
STOSA, and RecBole's own SASRec in its prefix mode); ``--curve=T`` times SASRecAP and STOSA,
grouping on and off, at several T; ``--curve=users`` on datasets of growing size
(``Name:fraction`` = a deterministic subsample of the users of ``Name``, written once under
``--data_path``). Writes ``<out>/<name>.md`` and ``.csv`` (default ``experiments/speed/``)
with the exact command line and the machine at the top.

Datasets are RecBole atomic files under ``--data_path``; convert them first, e.g.
``python dataset_scripts/seqfile.py --sequences ../shared/datasets/raw/office/Office_Products.txt --name Office --output_dir dataset``
(``docs/datasets.md``). ``--quick`` writes its own tiny dataset and needs nothing.
"""

import argparse
import csv
import ctypes
import datetime
import gc
import logging
import os
import platform
import shlex
import shutil
import statistics
import sys
import tempfile
import threading
import time

import numpy as np
import torch

from experiments.synthetic import write_synthetic_dataset
from experiments.categories import has_categories
from recbole_attn.plugin import get_model_class
from recbole_attn.engine.quick_start import build

#: experiments/ (the outputs go to its speed/ folder)
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

BASELINE = "SASRecAP"
#: (label, model, overrides) of the default section; shared sizes come from the options.
#: SASRecAP trains with CE over all items (its yaml); "SASRecAP BPR" with one sampled
#: negative per position, the loss family of STOSA, PAtt and RKSA
VARIANTS = [
    (BASELINE, "SASRecAP", {}),
    ("SASRecAP, no grouping", "SASRecAP", {"length_groups": 1}),
    ("SASRecAP BPR", "SASRecAP", {"loss_type": "BPR"}),
    ("SASRec (RecBole, prefix)", "SASRec", {"training_mode": "last_position"}),
    ("STOSA", "STOSA", {}),
    ("STOSA, no grouping", "STOSA", {"length_groups": 1}),
    ("SASRecAP, bucket batches", "SASRecAP", {"train_batch_grouping": "bucket"}),
    ("STOSA, bucket batches", "STOSA", {"train_batch_grouping": "bucket"}),
    ("SASRecAP, bf16 autocast", "SASRecAP", {"enable_amp": True}),
    ("STOSA, bf16 autocast", "STOSA", {"enable_amp": True}),
    ("PAtt2", "PAtt", {"dpp_k": 2}),
    ("PAtt3", "PAtt", {"dpp_k": 3}),
    ("DPAtt2", "DPAtt", {"dpp_k": 2}),
    ("PARec", "PARec", {}),
    ("FPARec", "FPARec", {}),
    (
        "AWRSR simp on SASRec",
        "AWRSR",
        {"backbone": "SASRec", "refinement": "simp"},
    ),
    ("AWRSR simp on STOSA", "AWRSR", {"backbone": "STOSA", "refinement": "simp"}),
    ("RKSA", "RKSA", {}),
]
#: the variants ``--amp`` repeats under autocast (one per model and form; labels of VARIANTS)
AMP_BASES = [
    BASELINE,
    "SASRec (RecBole, prefix)",
    "STOSA",
    "PAtt2",
    "DPAtt2",
    "PARec",
    "FPARec",
    "AWRSR simp on SASRec",
    "AWRSR simp on STOSA",
    "RKSA",
]
#: ``--amp`` names -> autocast dtypes (fp16 trains with RecBole's gradient scaler)
AMP_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
#: the variants of the curves
CURVE_LABELS = [BASELINE, "SASRecAP, no grouping", "STOSA", "STOSA, no grouping"]
QUICK_SIZES = {"hidden_size": 16, "n_layers": 1, "n_heads": 2, "max_len": 12}
QUICK_EXTRA = {"dpp_cat_steps": 5, "dpp_cat_rank": 4, "eval_batch_size": 64}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--curve", choices=["T", "users"], default=None)
    p.add_argument("--quick", action="store_true", help="tiny fixture, one repeat")
    p.add_argument("--dataset", default="Office")
    p.add_argument("--datasets", default="Office,Beauty:0.25,Beauty:0.5,Beauty")
    p.add_argument("--lengths", default="30,50,100,200", help="T values of --curve=T")
    p.add_argument("--data_path", default="dataset")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--hidden_size", type=int, default=64)
    p.add_argument("--n_layers", type=int, default=1)
    p.add_argument("--n_heads", type=int, default=4)
    p.add_argument("--max_len", type=int, default=100)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch CPU threads (default: torch's; 1 with --quick). On a machine shared "
        "with other work, 1 avoids OpenMP threads waiting for a descheduled sibling",
    )
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda if any)")
    p.add_argument("--only", default="", help="';'-separated labels or model names")
    p.add_argument("--skip", default="", help="';'-separated labels or model names")
    p.add_argument(
        "--amp",
        default="",
        help="comma-separated autocast dtypes (bf16, fp16): every model's variant "
        "again under RecBole's enable_amp in each (fp16 with enable_scaler)",
    )
    p.add_argument("--no_memory", action="store_true", help="skip the memory pass")
    p.add_argument(
        "--no_flops",
        action="store_true",
        help="skip the FLOP count and profile (CPU runs; a GPU run has none)",
    )
    p.add_argument("--name", default=None, help="output file stem")
    p.add_argument("--out", default=None, help="output folder (experiments/speed)")
    args = p.parse_args(argv)
    if args.quick:
        args.repeats = 1
        args.threads = args.threads or 1
        args.dataset = "tiny"
        args.datasets = "tiny:0.5,tiny"
        args.lengths = "6,12"
        args.batch = 16
        for key, value in QUICK_SIZES.items():
            setattr(args, key, value)
    return args


# ---------------------------------------------------------------- data
def write_tiny_dataset(root, name="tiny"):
    """The synthetic dataset (experiments.synthetic), with the yaml that
    loads its categories."""
    folder = write_synthetic_dataset(root, name=name)
    with open(os.path.join(folder, f"{name}.yaml"), "w") as f:
        f.write(
            "USER_ID_FIELD: user_id\nITEM_ID_FIELD: item_id\nTIME_FIELD: timestamp\n"
            "load_col:\n  inter: [user_id, item_id, timestamp]\n"
            "  item: [item_id, categories]\ncategory_field: categories\n"
        )


def dataset_yaml(data_path, name):
    """The yaml a dataset is read with: ours (properties/dataset) or the folder's."""
    shipped = os.path.join(REPO, "properties", "dataset", f"{name}.yaml")
    if os.path.isfile(shipped):
        return None  # the pipeline adds it
    own = os.path.join(data_path, name, f"{name}.yaml")
    return own if os.path.isfile(own) else None


def resolve_dataset(data_path, spec):
    """``Name`` or ``Name:fraction`` -> (dataset name, yaml or None, parent name). A
    fraction writes (once) ``Name_u<percent>``: the interactions of a deterministic
    random subset of the users, with the parent's item file."""
    name, _, fraction = spec.partition(":")
    parent_yaml = dataset_yaml(data_path, name) or os.path.join(
        REPO, "properties", "dataset", f"{name}.yaml"
    )
    if not fraction or float(fraction) >= 1.0:
        return name, dataset_yaml(data_path, name), name
    sub = f"{name}_u{round(100 * float(fraction))}"
    folder = os.path.join(data_path, sub)
    if not os.path.isfile(os.path.join(folder, f"{sub}.inter")):
        source = os.path.join(data_path, name, f"{name}.inter")
        with open(source) as f:
            header, lines = f.readline(), f.readlines()
        users = sorted({line.split("\t", 1)[0] for line in lines})
        rng = np.random.default_rng(0)
        keep = set(rng.permutation(users)[: round(float(fraction) * len(users))])
        os.makedirs(folder, exist_ok=True)
        tmp = os.path.join(folder, f"{sub}.inter.tmp")
        with open(tmp, "w") as f:
            f.write(header)
            f.writelines(line for line in lines if line.split("\t", 1)[0] in keep)
        item = os.path.join(data_path, name, f"{name}.item")
        if os.path.isfile(item):
            shutil.copyfile(item, os.path.join(folder, f"{sub}.item"))
        if os.path.isfile(parent_yaml):
            shutil.copyfile(parent_yaml, os.path.join(folder, f"{sub}.yaml"))
        os.replace(tmp, os.path.join(folder, f"{sub}.inter"))
    own = os.path.join(folder, f"{sub}.yaml")
    return sub, own if os.path.isfile(own) else None, name


# ---------------------------------------------------------------- machine, memory
def machine(device):
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            names = [
                line.split(":", 1)[1].strip() for line in f if "model name" in line
            ]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    import recbole

    text = (
        f"{cpu}, {os.cpu_count()} logical cores, torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), RecBole {recbole.__version__}, "
        f"Python {platform.python_version()}"
    )
    if device.type == "cuda":
        text += f", GPU {torch.cuda.get_device_name(device)}"
    return text + f", device {device.type}"


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def release_memory():
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class PeakRSS:
    """Peak resident set size over a span, sampled every millisecond by a thread."""

    def __enter__(self):
        self.peak = self.start = rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.wait(0.001):
            self.peak = max(self.peak, rss_bytes())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes())

    @property
    def growth(self):
        return self.peak - self.start


# ---------------------------------------------------------------- runs
class Run:
    """One built variant: its trainer and data, and the measurements."""

    def __init__(self, key, label, model, dataset, config, trainer, train, valid):
        self.key, self.label, self.model, self.dataset = key, label, model, dataset
        self.config, self.trainer, self.train, self.valid = (
            config,
            trainer,
            train,
            valid,
        )
        self.samples = len(train.dataset)
        self.users = train.dataset.user_num - 1
        self.items = train.dataset.item_num - 1
        self.train_s, self.valid_s, self.peak = [], [], None
        self.flops = self.matmul_share = None
        self.others = ""

    def train_epoch(self, rep, device):
        """One training epoch; under ``enable_amp`` in the dtype the label names
        (RecBole's autocast takes the device's default: bf16 on a CPU, fp16 on a GPU),
        the process's default restored after it."""
        default = torch.get_autocast_dtype(device.type)
        torch.set_autocast_dtype(device.type, autocast_dtype(self.label) or default)
        try:
            self.trainer._train_epoch(self.train, rep)
        finally:
            torch.set_autocast_dtype(device.type, default)

    def epoch(self, rep, device):
        sync(device)
        start = time.perf_counter()
        self.train_epoch(rep, device)
        sync(device)
        mid = time.perf_counter()
        self.trainer._valid_epoch(self.valid)
        sync(device)
        end = time.perf_counter()
        return mid - start, end - mid

    def measure_flops(self, device):
        """The matmul FLOPs of one training epoch, forward and backward
        (``torch.utils.flop_counter``: matmuls only, elementwise work is not counted),
        and where a profiled training epoch spends its time: the share in matmul kernels
        and the three costliest other operations."""
        from torch.profiler import ProfilerActivity, profile
        from torch.utils.flop_counter import FlopCounterMode

        with FlopCounterMode(display=False) as counter:
            self.train_epoch(0, device)
        self.flops = counter.get_total_flops()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            self.train_epoch(0, device)
        events = [e for e in prof.key_averages() if e.key.startswith("aten::")]
        total = sum(e.self_cpu_time_total for e in events) or 1.0
        matmul = [e for e in events if e.key in MATMUL_OPS]
        self.matmul_share = sum(e.self_cpu_time_total for e in matmul) / total
        others = sorted(
            (e for e in events if e.key not in MATMUL_OPS),
            key=lambda e: -e.self_cpu_time_total,
        )[:3]
        self.others = ", ".join(
            f"{e.key[6:]} {100 * e.self_cpu_time_total / total:.0f} %" for e in others
        )

    def measure_memory(self, device):
        if device.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
            base = torch.cuda.memory_allocated(device)
            self.epoch(0, device)
            self.peak = torch.cuda.max_memory_allocated(device) - base
        else:
            release_memory()
            with PeakRSS() as peak:
                self.epoch(0, device)
            self.peak = peak.growth


#: the operations whose FLOPs the counter counts (matrix products)
MATMUL_OPS = {"aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm", "aten::addbmm"}


def peak_gflops(device, size=1024, repeats=20):
    """The machine's fp32 matmul rate at the run's threads: ``size``-square products,
    the best of ``repeats`` (GFLOP/s)."""
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    best = float("inf")
    for _ in range(repeats):
        sync(device)
        start = time.perf_counter()
        a @ b
        sync(device)
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best / 1e9


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def amp_variants(args):
    """``(label, model, overrides)`` of the ``--amp`` variants: each of
    :data:`AMP_BASES` under autocast in each dtype named, which its label says
    (:func:`autocast_dtype`; not the default section's own bf16 rows again)."""
    found = []
    for name in filter(None, args.amp.split(",")):
        if name not in AMP_DTYPES:
            raise SystemExit(f"--amp: {name!r} is not one of {', '.join(AMP_DTYPES)}")
        for label, model, overrides in VARIANTS:
            if label not in AMP_BASES:
                continue
            amp = {"enable_amp": True, "enable_scaler": name == "fp16"}
            found.append((f"{label}, {name} autocast", model, {**overrides, **amp}))
    own = {label for label, _, _ in VARIANTS}
    return [v for v in found if v[0] not in own]


def autocast_dtype(label):
    """The autocast dtype a variant's label names (``..., bf16 autocast``), or None."""
    for name, dtype in AMP_DTYPES.items():
        if label.endswith(f", {name} autocast"):
            return dtype
    return None


def selected(label, model, args):
    only = set(filter(None, args.only.split(";")))
    skip = set(filter(None, args.skip.split(";")))
    if {label, model} & skip:
        return False
    return not only or bool({label, model} & only) or label == BASELINE


def shared_config(args, data_path, max_len, device):
    config = {
        "data_path": data_path,
        "hidden_size": args.hidden_size,
        "inner_size": 4 * args.hidden_size,
        "n_layers": args.n_layers,
        "n_heads": args.n_heads,
        "MAX_ITEM_LIST_LENGTH": max_len,
        "train_batch_size": args.batch,
        "hidden_dropout_prob": 0.3,
        "attn_dropout_prob": 0.0,
        "state": "ERROR",
        "show_progress": False,
        "device": str(device),
        "use_gpu": device.type == "cuda",
        "threads": torch.get_num_threads(),  # as main() set them
    }
    if args.quick:
        config.update(QUICK_EXTRA)
    return config


def build_runs(plan, args, data_path, device, notes):
    """``plan``: (key, label, model, overrides, dataset, yaml, max_len) -> Runs."""
    runs = []
    for key, label, model, overrides, dataset, yaml, max_len in plan:
        needs = getattr(get_model_class(model), "needs_item_categories", False)
        if needs and not has_categories(dataset, data_path):
            note = (
                f"{label}: skipped, {model} needs item categories; {dataset} has none"
            )
            if note not in notes:
                notes.append(note)
            continue
        config_dict = {**shared_config(args, data_path, max_len, device), **overrides}
        config, net, trainer, (train, valid, _) = build(
            model, dataset, [yaml] if yaml else None, config_dict
        )
        logging.getLogger().setLevel(logging.ERROR)
        trainer.eval_collector.data_collect(train)
        runs.append(Run(key, label, model, dataset, config, trainer, train, valid))
        print(f"built {label} on {dataset} (T={max_len})", flush=True)
    return runs


def measure(runs, args, device):
    for rep in range(args.repeats):
        for run in runs:
            train_s, valid_s = run.epoch(rep, device)
            run.train_s.append(train_s)
            run.valid_s.append(valid_s)
            print(
                f"[{rep + 1}/{args.repeats}] {run.label} ({run.key}): "
                f"train {train_s:.2f}s, valid {valid_s:.2f}s",
                flush=True,
            )
    if not args.no_memory:
        for run in runs:
            run.measure_memory(device)
    if device.type == "cpu" and not args.no_flops:
        for run in runs:
            run.measure_flops(device)


def median_ratio(values, base_values):
    return statistics.median(v / b for v, b in zip(values, base_values))


def rows_of(runs, section):
    """CSV rows: medians and ratios against the baseline with the same key."""
    baselines = {run.key: run for run in runs if run.label == BASELINE}
    rows = []
    for run in runs:
        base = baselines[run.key]
        epoch = [t + v for t, v in zip(run.train_s, run.valid_s)]
        base_epoch = [t + v for t, v in zip(base.train_s, base.valid_s)]
        peak_mb = None if run.peak is None else run.peak / 2**20
        base_mb = None if base.peak is None else base.peak / 2**20
        rows.append(
            {
                "section": section,
                "dataset": run.dataset,
                "users": run.users,
                "items": run.items,
                "T": run.config["MAX_ITEM_LIST_LENGTH"],
                "variant": run.label,
                "model": run.model,
                "training_mode": run.config["training_mode"],
                "length_groups": (
                    run.config["length_groups"] if run.model != "SASRec" else ""
                ),
                "train_samples": run.samples,
                "repeats": len(run.train_s),
                "train_s": round(statistics.median(run.train_s), 3),
                "valid_s": round(statistics.median(run.valid_s), 3),
                "epoch_s": round(statistics.median(epoch), 3),
                "train_ratio": round(median_ratio(run.train_s, base.train_s), 3),
                "valid_ratio": round(median_ratio(run.valid_s, base.valid_s), 3),
                "epoch_ratio": round(median_ratio(epoch, base_epoch), 3),
                "peak_mb": None if peak_mb is None else round(peak_mb, 1),
                "peak_ratio": (
                    None
                    if peak_mb is None or not base_mb
                    else round(peak_mb / base_mb, 3)
                ),
                "gflop": None if run.flops is None else float(f"{run.flops / 1e9:.4g}"),
                "gflops": (
                    None
                    if run.flops is None
                    else float(
                        f"{run.flops / 1e9 / max(statistics.median(run.train_s), 1e-9):.3g}"
                    )
                ),
                "peak_share": None,  # filled by write(), against the measured peak
                "matmul_share": (
                    None if run.matmul_share is None else round(run.matmul_share, 2)
                ),
                "others": run.others,
            }
        )
    return rows


def grouping_savings(runs):
    """(model, key, train and valid speedup of grouping) from the pairs in ``runs``."""
    found = []
    by_label = {(run.key, run.label): run for run in runs}
    for (key, label), run in by_label.items():
        off = by_label.get((key, f"{label}, no grouping"))
        if off is not None:
            found.append(
                (
                    label,
                    key,
                    median_ratio(off.train_s, run.train_s),
                    median_ratio(off.valid_s, run.valid_s),
                    median_ratio(
                        [t + v for t, v in zip(off.train_s, off.valid_s)],
                        [t + v for t, v in zip(run.train_s, run.valid_s)],
                    ),
                )
            )
    return found


# ---------------------------------------------------------------- output
COLUMNS = [
    ("variant", "variant"),
    ("train_samples", "train samples"),
    ("train_s", "train s"),
    ("valid_s", "valid s"),
    ("epoch_s", "epoch s"),
    ("train_ratio", "train ratio"),
    ("valid_ratio", "valid ratio"),
    ("epoch_ratio", "epoch ratio"),
    ("peak_mb", "peak MB"),
    ("peak_ratio", "peak ratio"),
    ("gflop", "matmul GFLOP / epoch"),
    ("gflops", "GFLOP/s"),
    ("peak_share", "of fp32 peak"),
    ("matmul_share", "time in matmuls"),
    ("others", "costliest other ops"),
]


def table(rows, key_columns=()):
    columns = [(k, k if k != "T" else "T") for k in key_columns] + COLUMNS
    lines = [
        "| " + " | ".join(title for _, title in columns) + " |",
        "|" + "---|" * len(columns),
    ]
    for row in rows:
        cells = ["" if row[k] is None else str(row[k]) for k, _ in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def write(args, argv, device, rows, runs, notes, title, key_columns, stem):
    out = args.out or (
        tempfile.mkdtemp(prefix="bench-quick-")
        if args.quick
        else os.path.join(HERE, "speed")
    )
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, args.name or stem)
    peak = peak_gflops(device) if device.type == "cpu" and not args.no_flops else None
    for row in rows:
        if peak and row["gflops"] is not None:
            row["peak_share"] = f"{100 * row['gflops'] / peak:.2g} %"
    with open(path + ".csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    memory = (
        "not measured (--no_memory)"
        if args.no_memory
        else (
            "torch.cuda.max_memory_allocated over one training epoch and one "
            "validation, minus the memory allocated before"
            if device.type == "cuda"
            else "growth of the process's resident set size over one training "
            "epoch and one validation (sampled every 1 ms, after gc and malloc_trim; "
            "approximate)"
        )
    )
    lines = [
        f"# {title}",
        "",
        "Command: `python -m experiments.speed " + shlex.join(argv) + "`",
        "",
        f"Machine: {machine(device)}.",
        "",
        f"Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC.",
        "",
        f"Settings: d={args.hidden_size} (FFN 4d), {args.n_layers} layer(s), "
        f"{args.n_heads} heads, batch {args.batch}, hidden dropout 0.3, attention "
        "dropout 0, every model's own loss and training mode (ours: all-position; "
        "RecBole's SASRec: prefix), one training epoch + one full-ranking validation "
        f"per variant and repeat, {args.repeats} interleaved repeat(s).",
        "",
        "Ratios are against SASRecAP (all-position, length grouping on) of the same "
        "run and setting, the median over repeats of the per-repeat ratios; seconds "
        "are medians and depend on the load of the machine (ratios are what we "
        f"report). Peak memory: {memory}.",
        "",
    ]
    if peak:
        lines += [
            f"Distance to the machine's limit (CPU, {torch.get_num_threads()} "
            f"thread(s)): its fp32 matmul peak, measured in this run, is {peak:.0f} "
            "GFLOP/s (1024-square products, the best of 20). Per variant: the matmul "
            "FLOPs of a training epoch, forward and backward (torch.utils."
            "flop_counter: matmuls only), and the rate they reach over the epoch's "
            "median time, against that peak; what stands between a model and the "
            "peak is the time outside matmuls: the share of a profiled training "
            "epoch's operator time in matmul kernels, and its three costliest other "
            "operations.",
            "",
        ]
    if not key_columns:
        lines += [
            f"Dataset: {rows[0]['dataset']}, {rows[0]['users']} users, "
            f"{rows[0]['items']} items, T={rows[0]['T']}.",
            "",
        ]
    lines += [f"- {note}" for note in notes] + ([""] if notes else [])
    groups = {}
    for row in rows:
        groups.setdefault(tuple(row[k] for k in key_columns), []).append(row)
    for key, group in groups.items():
        if key_columns:
            lines += [
                "## " + ", ".join(f"{k} = {v}" for k, v in zip(key_columns, key)),
                "",
            ]
            first = group[0]
            lines += [
                f"{first['users']} users, {first['items']} items.",
                "",
            ]
        lines += table(group) + [""]
    savings = grouping_savings(runs)
    if savings:
        lines += [
            "## Length grouping: time without / time with (median per-repeat ratio)",
            "",
            "| variant | setting | train | valid | epoch |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {label} | {key} | {t:.2f} | {v:.2f} | {e:.2f} |"
            for label, key, t, v, e in savings
        ]
        lines.append("")
    with open(path + ".md", "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))
    print(f"wrote {path}.md and {path}.csv")
    return path


# ---------------------------------------------------------------- main
def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(
        args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    )
    workdir = tempfile.mkdtemp(prefix="bench-")
    if args.quick:
        data_path = os.path.join(workdir, "data")
        write_tiny_dataset(data_path)
    else:
        data_path = os.path.abspath(args.data_path)
    if args.out:
        args.out = os.path.abspath(args.out)
    cwd = os.getcwd()
    os.chdir(workdir)  # RecBole writes log/ and saved/ into the working directory
    notes = []
    try:
        variants = [
            v for v in VARIANTS + amp_variants(args) if selected(v[0], v[1], args)
        ]
        if args.curve is None:
            dataset, yaml, _ = resolve_dataset(data_path, args.dataset)
            plan = [
                (dataset, label, model, overrides, dataset, yaml, args.max_len)
                for label, model, overrides in variants
            ]
            title = (
                f"Epoch time and memory of every model on {dataset}, T={args.max_len}"
            )
            key_columns, stem = (), f"models_{dataset}"
        elif args.curve == "T":
            dataset, yaml, _ = resolve_dataset(data_path, args.dataset)
            lengths = [int(t) for t in args.lengths.split(",")]
            plan = [
                (f"T={t}", label, model, overrides, dataset, yaml, t)
                for t in lengths
                for label, model, overrides in variants
                if label in CURVE_LABELS
            ]
            title = f"Epoch time against T on {dataset}"
            key_columns, stem = ("T",), f"curve_T_{dataset}"
        else:
            specs = [resolve_dataset(data_path, s) for s in args.datasets.split(",")]
            plan = [
                (name, label, model, overrides, name, yaml, args.max_len)
                for name, yaml, _ in specs
                for label, model, overrides in variants
                if label in CURVE_LABELS
            ]
            title = f"Epoch time against the number of users, T={args.max_len}"
            key_columns, stem = ("dataset",), "curve_users"
        if args.quick:
            stem = f"quick_{stem}"
        runs = build_runs(plan, args, data_path, device, notes)
        measure(runs, args, device)
        rows = rows_of(runs, args.curve or "models")
        return write(args, argv, device, rows, runs, notes, title, key_columns, stem)
    finally:
        os.chdir(cwd)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
