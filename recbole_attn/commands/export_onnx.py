"""A trained model's scoring function as an ONNX file that ONNX Runtime alone serves (no
torch, no RecBole), and beside it ``<output>.json``: the model, its T, what the inputs
and outputs are, the item tokens by id and the known users' histories
(``recbole-attn export-onnx --model_file=saved/<file>.pth --output=model.onnx``). The
graph's scores are checked against PyTorch's before anything is written
(docs/serving.md)."""

import os
import sys

from recbole_attn.errors import RecboleAttnError


def add_arguments(parser):
    """The checkpoint, the output and what the sidecar holds."""
    from recbole_attn.commands.evaluate import MODEL_HELP
    from recbole_attn.options.arguments import TrueOrFalse

    parser.add_argument(
        "--model_file",
        required=True,
        help="a checkpoint written by a run (saved/<model>-<time>-<token>.pth), or a "
        "folder: its newest",
    )
    parser.add_argument("--model", help=MODEL_HELP)
    parser.add_argument("--output", required=True, help="the .onnx file")
    parser.add_argument(
        "--histories",
        action=TrueOrFalse,
        default=True,
        help="write the known users' histories into the sidecar, so that a server "
        "answers {'user': token} (default True)",
    )
    parser.add_argument("--data_path", help="where the dataset is now, if it moved")
    parser.add_argument("--overwrite", action="store_true")


def run(args):
    """Check the output, export, check, write; returns the exit status."""
    from recbole_attn.commands.evaluate import newest_model_file
    from recbole_attn.files import refuse_existing
    from recbole_attn.commands.serving.onnx_export import sidecar_path

    if not str(args.output).lower().endswith(".onnx"):
        raise RecboleAttnError(
            f"--output {args.output}: export-onnx writes an ONNX file; name it .onnx"
        )
    if os.path.isdir(args.output):
        raise RecboleAttnError(f"--output {args.output} is a folder; give a .onnx name")
    paths = [args.output, sidecar_path(args.output)]
    refuse_existing(paths, "the ONNX export", args.overwrite)  # before the model loads
    from recbole_attn.commands.serving.onnx_export import export

    output, side, model, dataset = export(
        newest_model_file(str(args.model_file), args.model),
        args.output,
        histories=args.histories,
        overwrite=args.overwrite,
        config_dict={"data_path": args.data_path} if args.data_path else None,
    )
    print(
        f"wrote {output} and {side}: {model} on {dataset}, scores of every item for "
        "an item sequence (checked against PyTorch on ONNX Runtime)"
    )
    return 0


if __name__ == "__main__":
    from recbole_attn.options.arguments import command_main

    sys.exit(command_main(sys.modules[__name__], prog=f"python -m {__spec__.name}"))
