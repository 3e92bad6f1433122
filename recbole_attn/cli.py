"""
recbole_attn.cli
################

The command line of recbole_attn: ``recbole-attn`` (installed with the package),
``python -m recbole_attn``, and ``python run_recbole_attn.py`` in a checkout.

    recbole-attn --model=STOSA --dataset=ml-100k [--key=value ...]    train and test
    recbole-attn --model=STOSA --dataset=ml-100k --params_file=STOSA   hyperparameter search
    recbole-attn convert {amazon,seqfile,movielens,anime} [options]   raw files -> atomic files
    recbole-attn recommend --model_file=saved/<file>.pth --output=recs.csv   top-K per user
    recbole-attn evaluate --model_file=saved/<file>.pth [--key=value]  metrics of a model
    recbole-attn compare base.csv model.csv [--output=cmp.json]       paired tests over users
    recbole-attn viz --model_file=saved/<file>.pth --user=196         attention heatmaps
    recbole-attn export-upstream --recbole_dir=RecBole                our models into RecBole
"""

import argparse
import os
import sys

from recbole_attn.options.arguments import OneLineParser, guarded

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
into a RecBole checkout); {prog} <command> --help.
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
    from recbole_attn.options.names import MODEL_NAMES, recbole_model_names

    seq = recbole_model_names(("sequential_recommender",))
    theirs = [n for n in seq.get("sequential_recommender", []) if n not in MODEL_NAMES]
    return (
        f"models:\n  recbole_attn: {', '.join(MODEL_NAMES)}\n"
        f"  RecBole (sequential): {', '.join(sorted(theirs))}\n"
        "  (and any other RecBole model by name)\n\n"
    )


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return value


def build_parser(with_models=False, prog=PROG):
    epilog = (_models_text() if with_models else "") + COMMON_OVERRIDES.replace(
        "{prog}", prog
    )
    parser = OneLineParser(
        prog=prog,
        description=USAGE.replace("{prog}", prog),
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model", "-m", default="STOSA", help="model name")
    parser.add_argument("--dataset", "-d", default="ml-100k", help="dataset name")
    parser.add_argument(
        "--config_files", default=None, help="comma-separated yaml files, applied last"
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="print the configuration, dataset and model summaries (always in the log)",
    )
    tuning = parser.add_argument_group(
        "hyperparameter search (with --params_file; docs/tuning.md)"
    )
    tuning.add_argument(
        "--params_file",
        default=None,
        help="RecBole hyper-parameter file, or the name of a shipped search space "
        "(STOSA, PAtt, ...: properties/hyper/<name>.hyper): search instead of one run "
        "(select on validation, test the selected configuration once)",
    )
    tuning.add_argument(
        "--algo",
        default="random",
        choices=["random", "bayes", "exhaustive"],
        help="search algorithm: random sampling, bayes (TPE), exhaustive (every "
        "combination of choice values) (default: random)",
    )
    tuning.add_argument(
        "--tool",
        default="ray",
        choices=["ray", "hyperopt"],
        help="ray: Ray Tune, local or --ray_address; hyperopt: RecBole's HyperTuning in "
        "this process, no Ray (default: ray)",
    )
    tuning.add_argument(
        "--num_samples", type=_positive_int, default=4, help="trials (random, bayes)"
    )
    tuning.add_argument(
        "--max_concurrent",
        type=_positive_int,
        default=None,
        help="trials at once (Ray)",
    )
    tuning.add_argument(
        "--scheduler",
        default="fifo",
        choices=["fifo", "asha"],
        help="Ray scheduler: fifo, or asha (stops bad trials early)",
    )
    tuning.add_argument(
        "--search_seed", type=int, default=None, help="seed of the search algorithm"
    )
    tuning.add_argument("--cpus_per_trial", type=_positive_int, default=1)
    tuning.add_argument("--gpus_per_trial", type=float, default=0)
    tuning.add_argument(
        "--ray_address",
        default=None,
        help="auto or HOST:PORT: run the trials on an existing Ray cluster",
    )
    tuning.add_argument(
        "--output",
        default=None,
        help="folder of the trial table, best.yaml and result.json "
        "(default: a new tune/<model>-<dataset>-<time>-<token>)",
    )
    tuning.add_argument(
        "--overwrite",
        action="store_true",
        help="let --output replace the results of an earlier search in that folder",
    )
    return parser


def parse_args(argv, prog=PROG):
    parser = build_parser(
        with_models=any(a in ("-h", "--help") for a in argv), prog=prog
    )
    args, rest = parser.parse_known_args(argv)
    _check_model_name(parser, args.model)
    return args, _overrides(parser, rest)


def _check_model_name(parser, name):
    """A model name no run resolves is one error line with the closest name, before
    torch and RecBole are imported."""
    from recbole_attn.options.names import known_model_names, unknown_model_message

    if name not in known_model_names():
        parser.exit(2, f"error: {unknown_model_message(name)}\n")


def _overrides(parser, rest):
    """``--key=value`` arguments as a dict (config overrides); anything else is one
    error line."""
    bad = [a for a in rest if not (a.startswith("--") and "=" in a)]
    if bad:
        parser.error(
            f"unrecognized arguments {' '.join(bad)}: config overrides are written "
            "--key=value (e.g. --epochs=2)"
        )
    overrides = {}
    for arg in rest:
        key, value = arg[2:].split("=", 1)
        if overrides.setdefault(key, value) != value:
            parser.error(
                f"--{key} is given twice with different values ({overrides[key]!r}, "
                f"{value!r}); keep one"
            )
    return overrides


def run_main(argv=None, prog=PROG):
    """Train and test (or, with ``--params_file``, search); returns the exit status."""
    args, overrides = parse_args(sys.argv[1:] if argv is None else argv, prog)
    files = args.config_files.split(",") if args.config_files else None
    if files:  # a broken or hostile config file is refused before torch loads
        status = guarded(_read_config_files, files)
        if status:
            return status
    if args.params_file:
        return guarded(_tune, args, files, overrides)
    return guarded(_run, args, files, overrides)


def _read_config_files(files):
    from recbole_attn.files import read_yaml

    for path in files:
        read_yaml(path)
    return 0


def _product_options(args, files, overrides):
    from recbole_attn.engine.config import check_no_research_options

    check_no_research_options(files, overrides)


def _run(args, files, overrides):
    from recbole_attn.engine.allocator import keep_freed_memory
    from recbole_attn.engine.quick_start import run

    _product_options(args, files, overrides)
    keep_freed_memory()  # this process trains one model
    result = run(
        args.model,
        args.dataset,
        config_file_list=files,
        config_dict=overrides,
        verbose=args.verbose,
    )
    print(f"best valid: {_plain(result['best_valid_result'])}")
    print(f"test: {_plain(result['test_result'])}")
    if result["saved_model_file"]:
        print(f"model: {result['saved_model_file']}")
    return 0


def _plain(metrics):
    """Metrics as plain numbers (numpy 2 prints its scalars as ``np.float64(...)``)."""
    return {k: float(v) for k, v in (metrics or {}).items()}


def _tune(args, files, overrides):
    from recbole_attn.commands.tuning import tune_model

    _product_options(args, files, overrides)
    result = tune_model(
        args.model,
        args.dataset,
        args.params_file,
        config_file_list=files,
        config_dict=overrides,
        num_samples=args.num_samples,
        scheduler=args.scheduler,
        algo=args.algo,
        tool=args.tool,
        max_concurrent=args.max_concurrent,
        seed=args.search_seed,
        cpus_per_trial=args.cpus_per_trial,
        gpus_per_trial=args.gpus_per_trial,
        ray_address=args.ray_address,
        output=args.output,
        overwrite=args.overwrite,
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


#: subcommand -> (module, function(argv, prog) -> exit status)
COMMANDS = {
    "convert": ("recbole_attn.data.convert", "main"),
    "viz": ("recbole_attn.commands.viz", "main"),
    "recommend": ("recbole_attn.commands.recommend", "main"),
    "evaluate": ("recbole_attn.cli", "evaluate_main"),
    "compare": ("recbole_attn.commands.compare", "main"),
    "export-upstream": ("recbole_attn.upstream.export", "main"),
}


def evaluate_main(argv=None, prog=f"{PROG} evaluate"):
    """``recbole-attn evaluate --model_file=... [--key=value ...]``: the validation and
    test metrics of a saved model; overrides change the evaluation (metrics, topk,
    ranking, history masking)."""
    parser = OneLineParser(
        prog=prog,
        description="The validation and test metrics of a saved model. Overrides "
        "--key=value change the evaluation, e.g. --metrics=\"['Recall','NDCG','CC']\" "
        "--topk=[5,10] --eval_args=\"{'mode': 'uni100'}\" --eval_mask_history=True "
        "(--data_path=DIR if the data moved).",
    )
    parser.add_argument(
        "--model_file",
        required=True,
        help="a checkpoint written by a run, or a folder: its newest",
    )
    parser.add_argument(
        "--per_user",
        default=None,
        help="also write every test user's target rank and metric values to this .csv "
        "file, and what was evaluated to FILE.json beside it (full ranking; the input "
        "of recbole-attn compare; docs/compare.md)",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing --per_user file (and its .json)",
    )
    args, rest = parser.parse_known_args(argv)
    overrides = _overrides(parser, rest)

    def run():
        from recbole_attn.files import check_output_file
        from recbole_attn.per_user_file import check_extension, meta_path

        if args.per_user:  # before the model loads
            check_extension(args.per_user)
            check_output_file(
                [args.per_user, meta_path(args.per_user)],
                "the per-user results",
                args.overwrite,
            )
        from recbole_attn.engine.quick_start import evaluate
        from recbole_attn.commands.recommend import newest_model_file

        result = evaluate(
            newest_model_file(args.model_file), overrides, per_user=bool(args.per_user)
        )
        print(
            f"model: {result['model_file']} ({result['model']} on {result['dataset']})"
        )
        print(f"valid: {result['valid_result']}")
        print(f"test: {result['test_result']}")
        if args.per_user:
            from recbole_attn.per_user_file import write_per_user

            table = result["per_user"]
            write_per_user(
                args.per_user,
                table["header"],
                table["rows"],
                table["meta"],
                args.overwrite,
            )
            print(f"per-user results: {args.per_user} ({len(table['rows'])} users)")
        return 0

    return guarded(run)


def main(argv=None, prog=PROG):
    """``recbole-attn [command] ...``: a command of :data:`COMMANDS`, else a run (or a
    search with ``--params_file``; ``run`` and ``tune`` may be written first)."""
    import importlib

    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in COMMANDS:
        module, function = COMMANDS[argv[0]]
        run = getattr(importlib.import_module(module), function)
        return run(argv[1:], prog=f"{prog} {argv[0]}")
    if (
        argv
        and argv[0] == "tune"
        and not any(a.startswith("--params_file") for a in argv)
    ):
        print(
            f"error: {prog} tune needs --params_file=<a model name or a .hyper file>",
            file=sys.stderr,
        )
        return 2
    if argv and argv[0] in ("run", "tune"):
        argv = argv[1:]
    return run_main(argv, prog)
