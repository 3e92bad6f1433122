#!/usr/bin/env python
"""Convert a STOSA/S3Rec/PAtt sequence file (``uid i1 i2 ...``) to RecBole atomic files.

The position of an item in its user's line (1, 2, ...) becomes its timestamp. With an S3Rec
``*_item2attributes.json``, attributes become categories (``--attributes_mode``; see
docs/datasets.md):

    recbole-attn convert seqfile --sequences Office_Products.txt --name Office \\
        --output_dir dataset
    recbole-attn convert seqfile --sequences Beauty.txt \\
        --attributes Beauty_item2attributes.json --name Beauty --output_dir dataset
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Dict, List, Mapping, Optional, Tuple

import numpy as np
import pandas as pd

from recbole_attn.data.convert import cli
from recbole_attn.data.convert.clean import clean_tokens
from recbole_attn.data.convert.read import BadLines, ConversionError, _frame, _lines
from recbole_attn.data.convert.read import READ_ERRORS, open_text


def parse_seqfile(path: str, bad: Optional[BadLines] = None) -> pd.DataFrame:
    """A sequence file, ``uid i1 i2 ...`` per user; an item's position is its timestamp."""
    bad = bad or BadLines()
    rows = []
    seen: Dict[str, int] = {}
    for lineno, line in _lines(path):
        parts = line.split()
        if len(parts) < 2:
            bad(path, lineno, f"expected 'user item item ...', got {line!r}")
            continue
        wrong = [p for p in parts if not p.isdigit()]
        if wrong:
            bad(path, lineno, f"ids must be non-negative integers, got {wrong[0]!r}")
            continue
        uid = str(int(parts[0]))
        if uid in seen:
            bad(path, lineno, f"user {uid} already has a line (line {seen[uid]})")
            continue
        seen[uid] = lineno
        rows += [(uid, str(int(p)), t, np.nan) for t, p in enumerate(parts[1:], 1)]
    return _frame(rows, with_rating=False)


def parse_item2attributes(path: str) -> Dict[str, List[int]]:
    """Read an S3Rec ``*_item2attributes.json`` (``{"<item id>": [attr id, ...]}``)."""
    with open_text(path) as f:
        try:
            data = json.load(f)
        except json.JSONDecodeError as exc:
            raise ConversionError(
                f"{path}, line {exc.lineno}: not valid JSON ({exc.msg})"
            ) from None
        except (UnicodeDecodeError, *READ_ERRORS) as exc:
            raise ConversionError(f"{path}: cannot read: {exc}") from None
    if not isinstance(data, dict):
        raise ConversionError(f"{path}: expected a JSON object item id -> [attr ids]")
    result: Dict[str, List[int]] = {}
    for key, attrs in data.items():
        if not isinstance(attrs, list) or not all(
            isinstance(a, int) and not isinstance(a, bool) for a in attrs
        ):
            raise ConversionError(
                f"{path}: item {key!r}: expected a list of integer attribute ids"
            )
        key = str(key).strip()
        if not key.isdigit():
            raise ConversionError(f"{path}: item id {key!r} is not an integer")
        result[str(int(key))] = list(attrs)
    return result


def brand_like_ids(item2attrs: Mapping[str, List[int]]) -> set:
    """Attribute ids only ever at list position 0 (S3Rec's brand; SOURCES.md §2)."""
    first = {attrs[0] for attrs in item2attrs.values() if attrs}
    later = {a for attrs in item2attrs.values() for a in attrs[1:]}
    return first - later


ATTRIBUTE_MODES = ("categories", "all", "brand_split")


def split_attributes(
    item2attrs: Mapping[str, List[int]], mode: str = "categories"
) -> Tuple[Dict[str, List[str]], Optional[Dict[str, str]]]:
    """S3Rec attributes -> ``(item -> category tokens, item -> brand token)`` by
    ``mode``."""
    if mode not in ATTRIBUTE_MODES:
        raise ConversionError(
            f"unknown attributes mode {mode!r} (choose from {', '.join(ATTRIBUTE_MODES)})"
        )
    brands_ids = brand_like_ids(item2attrs) if mode != "all" else set()
    cats: Dict[str, List[str]] = {}
    brands: Optional[Dict[str, str]] = {} if mode == "brand_split" else None
    for item, attrs in item2attrs.items():
        attrs = list(attrs)
        if attrs and attrs[0] in brands_ids:
            if brands is not None:
                brands[item] = str(attrs[0])
            attrs = attrs[1:]
        tokens = clean_tokens(str(a) for a in attrs)
        if tokens:
            cats[item] = tokens
    return cats, brands


def build_parser(prog: Optional[str] = None) -> argparse.ArgumentParser:
    parser = cli.ConverterParser(prog=prog or cli.prog("seqfile"), description=__doc__)
    parser.add_argument("--sequences", required=True, help="the 'uid i1 i2 ...' file")
    parser.add_argument(
        "--attributes", help="optional S3Rec *_item2attributes.json (item -> attr ids)"
    )
    parser.add_argument(
        "--attributes_mode",
        choices=ATTRIBUTE_MODES,
        default="categories",
        help="categories (default): drop the leading brand-like id (an id that only "
        "ever appears at list position 0); all: every attribute is a category; "
        "brand_split: as categories plus a separate brand field",
    )
    cli.add_common_args(parser, ratings=False)
    return parser


def read(args, bad: BadLines):
    inter = parse_seqfile(args.sequences, bad)
    categories, brands = {}, None
    if args.attributes:
        attrs = parse_item2attributes(args.attributes)
        categories, brands = split_attributes(attrs, args.attributes_mode)
    return inter, categories, brands


def main(argv=None, prog: Optional[str] = None) -> None:
    cli.convert_main(argv, build_parser(prog), read)


if __name__ == "__main__":
    sys.exit(cli.run_main(main, prog=f"python -m {__spec__.name}"))
