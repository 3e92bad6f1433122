"""The validation and test metrics of a saved model. Overrides --key=value change the
evaluation, e.g. --metrics="['Recall','NDCG','CC']" --topk=[5,10] --eval_mask_history=True
--eval_args="{'mode': 'uni100'}" (--data_path=DIR if the data moved).
"""

import os
import sys

from recbole_attn.errors import RecboleAttnError


def add_arguments(parser):
    """``--model_file``, ``--per_user``, ``--overwrite`` and the overrides."""
    parser.takes_overrides = True
    parser.add_argument(
        "--model_file",
        required=True,
        help="a checkpoint written by a run, or a folder: its newest",
    )
    parser.add_argument("--model", help=MODEL_HELP)
    parser.add_argument(
        "--per_user",
        help="also write every test user's target rank and metric values to this .csv "
        "file, and what was evaluated to FILE.json beside it (full ranking; the input "
        "of recbole-attn compare; docs/compare.md)",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing --per_user file (and its .json)",
    )


def run(args):
    """Evaluate the model (its per-user file checked first), print and write."""
    from recbole_attn.files import check_output_file
    from recbole_attn.per_user_file import check_extension, meta_path, write_per_user

    if args.per_user:  # before the model loads
        check_extension(args.per_user)
        check_output_file(
            [args.per_user, meta_path(args.per_user)],
            "the per-user results",
            args.overwrite,
        )
    from recbole_attn.engine.quick_start import evaluate

    model_file = newest_model_file(args.model_file, args.model)
    result = evaluate(model_file, args.overrides, per_user=bool(args.per_user))
    print(f"model: {result['model_file']} ({result['model']} on {result['dataset']})")
    print(f"valid: {result['valid_result']}")
    print(f"test: {result['test_result']}")
    if args.per_user:
        table = result["per_user"]
        rows = table["rows"]
        write_per_user(
            args.per_user, table["header"], rows, table["meta"], args.overwrite
        )
        print(f"per-user results: {args.per_user} ({len(rows)} users)")
    return 0


#: the help of ``--model`` of the commands that take a checkpoint folder
MODEL_HELP = (
    "with a folder --model_file: take the newest checkpoint of this model (needed when "
    "the folder holds checkpoints of several models)"
)


def checkpoint_model(path):
    """The model name a checkpoint's file name starts with (``<model>-<time>...``:
    ours and RecBole's)."""
    return os.path.basename(path).split("-", 1)[0]


def newest_model_file(path, model=None):
    """``path`` itself, or for a folder its newest best-model checkpoint (of ``model``,
    which must be given when the folder holds several models' checkpoints), said on
    standard error with why it was taken."""
    if not os.path.isdir(path):
        if model is not None and checkpoint_model(path) != model:
            raise RecboleAttnError(
                f"--model={model} picks among a folder's checkpoints, and --model_file "
                f"{path} is a file (of {checkpoint_model(path)}, by its name): give "
                "one of the two"
            )
        return path
    files = [
        os.path.join(path, f)
        for f in os.listdir(path)
        if f.endswith(".pth") and not f.endswith("-last.pth") and not f.startswith(".")
    ]
    files = [f for f in files if os.path.getsize(f) > 0]
    if not files:
        raise RecboleAttnError(f"{path} holds no model checkpoint (.pth)")
    counts = {}
    for f in sorted(files):
        counts[checkpoint_model(f)] = counts.get(checkpoint_model(f), 0) + 1
    held = ", ".join(f"{name}: {n}" for name, n in sorted(counts.items()))
    if model is not None:
        files = [f for f in files if checkpoint_model(f) == model]
        if not files:
            raise RecboleAttnError(
                f"{path} holds no checkpoint of {model} (it holds {held}); give one of "
                "those names to --model, or the checkpoint's path to --model_file"
            )
    elif len(counts) > 1:
        raise RecboleAttnError(
            f"{path} holds checkpoints of several models ({held}); say which with "
            "--model=NAME (its newest is taken), or give the checkpoint's path to "
            "--model_file"
        )
    chosen = max(files, key=os.path.getmtime)
    name = checkpoint_model(chosen)
    print(
        f"model file: {chosen} (the newest of the {len(files)} {name} checkpoints in "
        f"{path}, by modification time)",
        file=sys.stderr,
    )
    return chosen
