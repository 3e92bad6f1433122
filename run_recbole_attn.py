"""Train and evaluate a model through recbole_attn's pipeline.

    python run_recbole_attn.py --model=STOSA --dataset=ml-100k [--config_files=a.yaml,b.yaml]
                               [--key=value ...]

Every ``--key=value`` is a RecBole config override (e.g. ``--epochs=2``,
``--train_batch_size=512``, ``--eval_mask_history=True``), read by RecBole's Config from the
command line as in RecBole's own ``run_recbole.py``.
"""

import argparse
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
    args, overrides = parser.parse_known_args(argv)
    bad = [a for a in overrides if not (a.startswith("--") and "=" in a)]
    if bad:
        parser.error(
            f"unrecognized arguments {' '.join(bad)}: config overrides are written "
            "--key=value (e.g. --epochs=2)"
        )
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    from recbole_attn.quick_start import RecboleAttnError, run

    files = args.config_files.split(",") if args.config_files else None
    try:
        result = run(args.model, args.dataset, config_file_list=files)
    except RecboleAttnError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"best valid: {dict(result['best_valid_result'] or {})}")
    print(f"test: {dict(result['test_result'] or {})}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
