"""Train and evaluate a model through recbole_attn's pipeline.

    python run_recbole_attn.py --model=STOSA --dataset=ml-100k [--config_files=a.yaml,b.yaml]
                               [--key=value ...]

Hyperparameter search on Ray Tune (validation-based selection, one test evaluation):

    python run_recbole_attn.py --model=STOSA --dataset=ml-100k --params_file=hyper.test
                               [--num_samples=8] [--scheduler=asha] [--key=value ...]

Every ``--key=value`` is a RecBole config override (e.g. ``--epochs=2``,
``--train_batch_size=512``, ``--eval_mask_history=True``), applied after the yaml files;
values are converted as on RecBole's own command line (``--topk=[5,10]``, ``--x=True``).
"""

import argparse
import os
import sys


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", "-m", default="STOSA", help="model name")
    parser.add_argument("--dataset", "-d", default="ml-100k", help="dataset name")
    parser.add_argument(
        "--config_files", default=None, help="comma-separated yaml files, applied last"
    )
    parser.add_argument(
        "--params_file",
        default=None,
        help="RecBole hyper-parameter file: tune on Ray Tune instead of one run",
    )
    parser.add_argument("--num_samples", type=int, default=4, help="tuning trials")
    parser.add_argument(
        "--scheduler", default="fifo", choices=["fifo", "asha"], help="Tune scheduler"
    )
    args, rest = parser.parse_known_args(argv)
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
    return args, overrides


def main(argv=None):
    args, overrides = parse_args(sys.argv[1:] if argv is None else argv)
    from recbole_attn.quick_start import RecboleAttnError, run

    files = args.config_files.split(",") if args.config_files else None
    try:
        if args.params_file:
            return _tune(args, files, overrides)
        result = run(
            args.model, args.dataset, config_file_list=files, config_dict=overrides
        )
    except RecboleAttnError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"best valid: {dict(result['best_valid_result'] or {})}")
    print(f"test: {dict(result['test_result'] or {})}")
    return 0


def _tune(args, files, overrides):
    from recbole_attn.tuning import tune_model

    if not os.path.isfile(args.params_file):
        print(f"error: params file not found: {args.params_file}", file=sys.stderr)
        return 2
    result = tune_model(
        args.model,
        args.dataset,
        args.params_file,
        config_file_list=files,
        config_dict=overrides,
        num_samples=args.num_samples,
        scheduler=args.scheduler,
    )
    for t in result["trials"]:
        print(f"trial {t['params']}: best valid {t['best_valid_score']:.4f}")
    print(f"best params: {result['best_params']}")
    print(f"best valid: {result['best_valid_result']}")
    print(f"test: {result['test_result']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
