"""The command line shared by the dataset converters (``recbole-attn convert <name>``):
the options every converter takes (:func:`add_common_args`), the one ``main``
(:func:`convert_main`: parse, refuse an existing dataset, read, convert, write) and
:func:`run_main`. The pipeline: docs/datasets.md."""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Callable, List, Optional

from recbole_attn.options.arguments import OneLineParser, guarded
from recbole_attn.data.convert.clean import Options, convert
from recbole_attn.data.convert.read import BadLines, ConversionError
from recbole_attn.data.convert.write import (
    _check_name,
    _refuse_existing,
    clear_unfinished,
    dataset_paths,
    summary_text,
    write_dataset,
)


def prog(name: str) -> str:
    return f"recbole-attn convert {name}"


def _underscored(arg: str) -> str:
    if not arg.startswith("--"):
        return arg
    name, eq, value = arg.partition("=")
    return "--" + name[2:].replace("-", "_") + eq + value


class ConverterParser(OneLineParser):
    """The converters' parser; options may be spelled with hyphens."""

    def __init__(self, **kwargs):
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        kwargs.setdefault(
            "epilog",
            "Options may also be written with hyphens (--skip-bad-lines = "
            "--skip_bad_lines).",
        )
        super().__init__(**kwargs)

    def parse_known_args(self, args=None, namespace=None):
        args = sys.argv[1:] if args is None else list(args)
        return super().parse_known_args([_underscored(a) for a in args], namespace)


def add_common_args(
    parser: argparse.ArgumentParser, ratings: bool = True, k_core: int = 5
) -> None:
    """The options every converter takes; ``k_core``: the default of ``--k_core`` (0
    for a file its authors filtered already)."""
    parser.add_argument(
        "--output_dir",
        default="dataset",
        help="folder that receives <name>/ (RecBole's data_path; default: dataset)",
    )
    parser.add_argument(
        "--name",
        required=True,
        help="dataset name: the folder and file names, and RecBole's --dataset",
    )
    parser.add_argument(
        "--k_core",
        type=int,
        default=k_core,
        help="drop users and items with fewer interactions, iterated to a fixed point "
        + (
            f"(default {k_core}; PAtt uses 10; 0 disables)"
            if k_core
            else "(default 0: the file's own filtering is kept)"
        ),
    )
    parser.add_argument(
        "--item_k_core",
        type=int,
        help="a different threshold for items (default: --k_core)",
    )
    if ratings:
        parser.add_argument(
            "--min_rating",
            type=float,
            help="keep only interactions rated at least this (default: keep all)",
        )
        parser.add_argument(
            "--implicit",
            action="store_true",
            help="do not write the rating column (every row is an implicit positive)",
        )
    parser.add_argument(
        "--keep_duplicates",
        action="store_true",
        help="keep repeated (user, item) pairs (default: keep only the earliest)",
    )
    parser.add_argument(
        "--skip_bad_lines",
        action="store_true",
        help="skip malformed input lines (and report their number) instead of failing",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing converted dataset of the same name",
    )


def options_from_args(args: argparse.Namespace) -> Options:
    if args.k_core < 0 or (args.item_k_core is not None and args.item_k_core < 0):
        raise ConversionError("--k_core and --item_k_core must be >= 0")
    return Options(
        k=args.k_core,
        item_k=args.item_k_core,
        min_rating=getattr(args, "min_rating", None),
        implicit=getattr(args, "implicit", False),
        keep_duplicates=args.keep_duplicates,
    )


def convert_main(
    argv: Optional[List[str]],
    parser: argparse.ArgumentParser,
    read: Callable,
    check: Optional[Callable[[argparse.Namespace], None]] = None,
) -> None:
    """A converter's run: options, refuse an existing dataset, read, convert, write."""
    args = parser.parse_args(argv)
    options = options_from_args(args)
    if check is not None:
        check(args)
    _check_name(args.name)  # fail fast, before parsing large inputs
    clear_unfinished(args.output_dir, args.name)  # a killed conversion's files
    if not args.overwrite:
        _refuse_existing(dataset_paths(args.output_dir, args.name).values())
    bad = BadLines(args.skip_bad_lines)
    result = convert(*read(args, bad), options)
    argv = sys.argv[1:] if argv is None else argv
    command = " ".join([parser.prog] + [shlex.quote(str(a)) for a in argv])
    paths = write_dataset(result, args.output_dir, args.name, args.overwrite, command)
    print(f"wrote {', '.join(paths.values())}")
    print(summary_text(result.stats, bad))


def run_main(main: Callable[..., None], argv=None, prog: Optional[str] = None) -> int:
    """Run a converter's main: a :class:`ConversionError` is ``error: ...``, status 2."""
    return guarded(main, argv, prog=prog) or 0
