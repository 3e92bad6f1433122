"""
``recbole-attn --model=... --dataset=...`` (the command without a command word, ``run``):
train and test one model, or with ``--params_file`` search its hyperparameters
(:mod:`recbole_attn.commands.tuning`); every other ``--key=value`` is a config override.
"""

import math
import os
import sys

from recbole_attn.options.arguments import positive_int, sigint_as_interrupt

PROG = "recbole-attn"

USAGE = """Train and evaluate a model through recbole_attn's pipeline (RecBole 1.2.1 plugin).

    {prog} --model=STOSA --dataset=ml-100k [--config_files=a.yaml,b.yaml] [--key=value ...]

Hyperparameter search (validation-based selection, one test evaluation), on Ray Tune
(this machine or --ray_address=HOST:PORT of a cluster) or with --tool=hyperopt; a shipped
search space is named by its model (--params_file=STOSA), or give a file of your own:

    {prog} --model=STOSA --dataset=ml-100k --params_file=STOSA
        [--algo=random|bayes|exhaustive] [--num_samples=8] [--scheduler=asha] [--output=DIR]

Every ``--key=value`` is a RecBole config override (e.g. ``--epochs=2``,
``--train_batch_size=512``, ``--eval_mask_history=True``), applied after the yaml files;
values are read as Python literals (``--topk=[5,10]``, ``--x=True``).

Other commands: {prog} convert (raw files -> RecBole atomic files), {prog} recommend
(top-K items per user from a saved model), {prog} evaluate (metrics of a saved model;
--per_user=FILE: every user's), {prog} compare (models compared with paired tests over
users), {prog} viz (attention heatmaps), {prog} export-upstream (our models as RecBole's own,
into a RecBole checkout), {prog} export-onnx (a trained model as an ONNX file), {prog} serve
(an HTTP service of recommendations); {prog} <command> --help.
"""

#: the overrides users reach for first, shown by --help
COMMON_OVERRIDES = """\
common overrides (any RecBole or model key works as --key=value):
  --epochs=N  --stopping_step=N  --learning_rate=X  --train_batch_size=N
  --hidden_size=N  --n_layers=N  --n_heads=N  --MAX_ITEM_LIST_LENGTH=N
  --metrics="['Recall','NDCG','MRR','CC','ILD','F1']"  --topk="[5,10,20]"
  --valid_metric=NDCG@10  --eval_mask_history=True  --eval_args="{'mode': 'uni100'}"
  --training_mode=all_position|last_position  --use_gpu=True --gpu_id=0
  --data_path=DIR  --checkpoint_dir=DIR  --show_progress=True  --seed=N
  --resume_checkpoint=saved/<file>-last.pth

examples:
  {prog} --model=STOSA --dataset=ml-100k --epochs=20
  {prog} --model=SASRec --dataset=ml-100k --epochs=5 \\
      --metrics="['Recall','NDCG','MRR','CC','ILD']" --eval_mask_history=True
  {prog} --model=STOSA --dataset=ml-100k --params_file=STOSA --num_samples=4

Files: checkpoints in saved/ (checkpoint_dir), logs in log/<model>/ (the configuration,
dataset and model summaries are there; --verbose prints them on the console too).
"""


def _models_text():
    """The model names of ``--help``: ours, then RecBole's sequential ones."""
    from recbole_attn.options.names import MODEL_NAMES, recbole_model_names

    seq = recbole_model_names(("sequential_recommender",))
    theirs = [n for n in seq.get("sequential_recommender", []) if n not in MODEL_NAMES]
    return (
        f"models:\n  recbole_attn: {', '.join(MODEL_NAMES)}\n"
        f"  RecBole (sequential): {', '.join(sorted(theirs))}\n"
        "  (and any other RecBole model by name)\n\n"
    )


def _model_name(name):
    """argparse ``type=``: a model name a run resolves, else one error line with the
    closest name (before torch and RecBole are imported)."""
    from recbole_attn.errors import RecboleAttnError
    from recbole_attn.options.names import known_model_names, unknown_model_message

    if name not in known_model_names():
        raise RecboleAttnError(unknown_model_message(name))
    return name


def add_arguments(parser):
    """The run's arguments, the search's group, and every other ``--key=value``."""
    prog = parser.prog
    parser.description = USAGE.replace("{prog}", prog)
    parser.epilog = _models_text() + COMMON_OVERRIDES.replace("{prog}", prog)
    parser.takes_overrides = True
    parser.set_defaults(prog=prog)
    parser.add_argument(
        "--model", "-m", default="STOSA", type=_model_name, help="model name"
    )
    parser.add_argument("--dataset", "-d", default="ml-100k", help="dataset name")
    parser.add_argument(
        "--config_files",
        type=lambda text: text.split(",") if text else None,
        help="comma-separated yaml files, applied last",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="print the configuration, dataset and model summaries (always in the log)",
    )
    group = "hyperparameter search (with --params_file; docs/tuning.md)"
    _add_search_arguments(parser.add_argument_group(group))


def _add_search_arguments(group):
    """The search's flags (used with ``--params_file``): how it searches, where and with
    what the trials run, and where it writes."""
    from recbole_attn.commands.tuning import ALGOS, SCHEDULERS, TOOLS

    group.add_argument(
        "--params_file",
        help="RecBole hyper-parameter file, or the name of a shipped search space "
        "(STOSA, PAtt, ...: properties/hyper/<name>.hyper): search instead of one run "
        "(select on validation, test the selected configuration once)",
    )
    group.add_argument(
        "--algo",
        default="random",
        choices=ALGOS,
        help="search algorithm: random sampling, bayes (TPE), exhaustive (every "
        "combination of choice values) (default: random)",
    )
    group.add_argument(
        "--tool",
        default="ray",
        choices=TOOLS,
        help="ray: Ray Tune, local or --ray_address; hyperopt: RecBole's HyperTuning in "
        "this process, no Ray (default: ray)",
    )
    group.add_argument(
        "--num_samples", type=positive_int, default=4, help="trials (random, bayes)"
    )
    group.add_argument(
        "--max_concurrent", type=positive_int, help="trials at once (Ray)"
    )
    group.add_argument(
        "--scheduler",
        default="fifo",
        choices=SCHEDULERS,
        help="Ray scheduler: fifo, or asha (stops bad trials early)",
    )
    group.add_argument(
        "--grace_period",
        type=positive_int,
        help="asha: the evaluations every trial gets before it may be stopped "
        "(default: 1, Ray's)",
    )
    group.add_argument(
        "--search_seed",
        type=int,
        dest="seed",
        metavar="SEARCH_SEED",
        help="seed of the search algorithm",
    )
    group.add_argument("--cpus_per_trial", type=positive_int, default=1)
    group.add_argument("--gpus_per_trial", type=float, default=0)
    group.add_argument(
        "--ray_address",
        help="auto or HOST:PORT: run the trials on an existing Ray cluster",
    )
    group.add_argument(
        "--output",
        help="folder of the trial table, best.yaml and result.json "
        "(default: a new tune/<model>-<dataset>-<time>-<token>)",
    )
    group.add_argument(
        "--overwrite",
        action="store_true",
        help="let --output replace the results of an earlier search in that folder",
    )


#: the search's flags, passed to tune_model by name
SEARCH_FLAGS = (
    "num_samples scheduler grace_period algo tool max_concurrent seed cpus_per_trial "
    "gpus_per_trial "
    "ray_address output overwrite"
).split()


def run(args):
    """Train and test (or, with ``--params_file``, search); returns the exit status."""
    from recbole_attn.files import read_yaml

    if args.command == "tune" and args.params_file is None:
        print(
            f"error: {args.prog} tune needs --params_file=<a model name or a .hyper file>",
            file=sys.stderr,
        )
        return 2
    for path in args.config_files or ():  # a hostile file is refused before torch
        read_yaml(path)
    from recbole_attn.engine.config import check_no_research_options

    check_no_research_options(args.config_files, args.overrides)
    if not args.params_file:
        return train(args)
    # Ray Tune takes SIGINT as a stop once trials run, also in a process that started
    # with it ignored (a shell's `cmd &`): so does the search's start-up before that
    with sigint_as_interrupt():
        return tune(args)


def train(args):
    """One run: train, test, say where the model is."""
    from recbole_attn.engine.allocator import keep_freed_memory
    from recbole_attn.engine.quick_start import run as run_model

    keep_freed_memory()  # this process trains one model
    result = run_model(
        args.model,
        args.dataset,
        config_file_list=args.config_files,
        config_dict=args.overrides,
        verbose=args.verbose,
    )
    print(results_table(result))
    if result["saved_model_file"]:
        written = write_results(args, result)
        print(f"model: {result['saved_model_file']}\nresults: {written}")
    return 0


def _plain(metrics):
    """Metrics as plain numbers (numpy 2 prints its scalars as ``np.float64(...)``)."""
    return {k: float(v) for k, v in (metrics or {}).items()}


def results_table(result):
    """The run's metrics, one line each: the best epoch's validation value and the
    test value; the metric the run selects on first (the full dicts: the log file and
    :func:`write_results`)."""
    valid, test = _plain(result["best_valid_result"]), _plain(result["test_result"])
    selected = result.get("valid_metric")
    names = list(dict.fromkeys([*test, *valid]))  # the run's order (metric, cutoff)
    names.sort(key=lambda k: k != selected)  # stable: the selected metric first
    width = max([len(n) for n in names] + [len("metric")])
    lines = [f"{'metric':<{width}}  {'valid':>7}  {'test':>7}"]
    for name in names:
        cells = [f"{d[name]:7.4f}" if name in d else f"{'-':>7}" for d in (valid, test)]
        note = "  (selected on)" if name == selected else ""
        lines.append(f"{name:<{width}}  {cells[0]}  {cells[1]}{note}")
    return "\n".join(lines)


def _finite(value):
    """``value`` as a float, or None where it is not finite (strict JSON has no inf)."""
    value = float(value)
    return value if math.isfinite(value) else None


def write_results(args, result):
    """``<checkpoint stem>.json`` beside the checkpoint: what the run gives, as JSON
    (strict: numbers as plain floats); its path."""
    import json

    stem = os.path.splitext(result["saved_model_file"])[0]
    path = f"{stem}.json"
    record = {
        "model": args.model,
        "dataset": args.dataset,
        "saved_model_file": result["saved_model_file"],
        "epochs": result["epochs"],
        "stop_reason": result["stop_reason"],
        "valid_metric": result.get("valid_metric"),
        # no validation (a test_only split): RecBole's best score stays -inf; JSON null
        "best_valid_score": _finite(result["best_valid_score"]),
        "best_valid_result": _plain(result["best_valid_result"]),
        "test_result": _plain(result["test_result"]),
    }
    with open(path, "x", encoding="utf-8") as f:  # the checkpoint's own, new stem
        json.dump(record, f, indent=2, allow_nan=False)
        f.write("\n")
    return path


def tune(args):
    """A search: select on validation, test the selected configuration once."""
    from recbole_attn.commands.tuning import tune_model

    flags = {name: getattr(args, name) for name in SEARCH_FLAGS}
    result = tune_model(
        args.model,
        args.dataset,
        args.params_file,
        config_file_list=args.config_files,
        config_dict=args.overrides,
        **flags,
    )
    out = result["output"]
    print(f"best params: {result['best_params']}")
    print(f"best valid: {result['best_valid_result']}")
    print(f"test: {result['test_result']}")
    print(
        f"trials: {os.path.join(out, 'trials.md')} (and .csv); best configuration: "
        f"{os.path.join(out, 'best.yaml')} (--config_files accepts it)"
    )
    return 0
