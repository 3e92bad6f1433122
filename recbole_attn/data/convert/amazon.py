#!/usr/bin/env python
"""Convert Amazon review data (McAuley 2014 or 2018) to RecBole atomic files.

Reviews: ``reviews_<Cat>_5.json(.gz)`` (2014), ``<Cat>_5.json(.gz)`` (2018), or the
ratings-only CSVs ``ratings_<Cat>.csv`` (2014: user,item,rating,timestamp) and ``<Cat>.csv``
(2018: item,user,rating,timestamp). Metadata (optional): ``meta_<Cat>.json(.gz)``, python
literals (2014) or JSON (2018); categories are the names in the category paths with the
root dropped:

    recbole-attn convert amazon --reviews reviews_Office_Products_5.json.gz \\
        --meta meta_Office_Products.json.gz --name Office --output_dir dataset
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import sys
from typing import Dict, List, Optional, Tuple

import numpy as np
import pandas as pd

from recbole_attn.data.convert import cli
from recbole_attn.data.convert.clean import clean_token, clean_tokens
from recbole_attn.data.convert.read import ITEM, RATING, BadLines, ConversionError
from recbole_attn.data.convert.read import _frame, _lines, _to_float


def _parse_record(line: str) -> dict:
    """A JSON or a python-literal line (``ast.literal_eval``, never ``eval``)."""
    try:
        record = json.loads(line)
    except ValueError:
        try:
            record = ast.literal_eval(line)
        except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
            raise ValueError("neither JSON nor a python literal") from None
    if not isinstance(record, dict):
        raise ValueError("not a JSON object / python dict")
    return record


def amazon_csv_order(path: str) -> str:
    """Column order of a ratings-only CSV: user first (2014) or item first (2018)."""
    base = os.path.basename(path)
    return "user_item" if base.startswith("ratings_") else "item_user"


def parse_amazon_reviews(
    path: str, bad: Optional[BadLines] = None, csv_order: str = "auto"
) -> pd.DataFrame:
    """An Amazon review or rating file -> ``user_id, item_id, timestamp, rating``."""
    bad = bad or BadLines()
    stem = path[:-3] if path.endswith(".gz") else path
    rows = []
    if stem.endswith(".csv"):
        order = amazon_csv_order(path) if csv_order == "auto" else csv_order
        if order not in ("user_item", "item_user"):
            raise ConversionError(f"unknown --csv_order {csv_order!r}")
        for lineno, line in _lines(path):
            parts = [p.strip() for p in line.split(",")]
            try:
                if len(parts) != 4 or not parts[0] or not parts[1]:
                    raise ValueError(f"expected 4 comma-separated fields, got {line!r}")
                rating = _to_float(parts[2])
                ts = int(float(parts[3]))
            except ValueError as exc:
                bad(path, lineno, str(exc))
                continue
            user, item = (parts[0], parts[1]) if order == "user_item" else parts[1::-1]
            rows.append((user, item, ts, rating))
    else:
        for lineno, line in _lines(path):
            try:
                rec = _parse_record(line)
                missing = [
                    k
                    for k in ("reviewerID", "asin", "unixReviewTime")
                    if rec.get(k) in (None, "")
                ]
                if missing:
                    raise ValueError(f"missing field(s) {', '.join(missing)}")
                ts = int(rec["unixReviewTime"])
                rating = _to_float(rec["overall"]) if "overall" in rec else np.nan
            except (ValueError, TypeError) as exc:
                bad(path, lineno, str(exc))
                continue
            user, item = str(rec["reviewerID"]).strip(), str(rec["asin"]).strip()
            rows.append((user, item, ts, rating))
    df = _frame(rows, with_rating=True)
    if df[RATING].isna().any():  # a review file without ratings
        df = df.drop(columns=[RATING])
    return df


_ASIN = re.compile(r"""["']asin["']\s*:\s*["']([^"']+)["']""")


def amazon_meta_categories(record: dict) -> List[str]:
    """Category tokens of one metadata record: its paths' names, roots dropped, no
    repeats."""
    paths = record.get("categories")
    if paths is None:
        paths = record.get("category")
        paths = [paths] if paths else []
    names: List[str] = []
    for path in paths or []:
        if isinstance(path, str):  # defensive: a flat list of names = one path
            path = [path]
        names.extend(str(n) for n in list(path)[1:])
    return clean_tokens(names)


def parse_amazon_meta(
    path: str, asins: Optional[set] = None, bad: Optional[BadLines] = None
) -> Tuple[Dict[str, List[str]], Dict[str, str]]:
    """Amazon metadata -> ``(asin -> category tokens, asin -> brand token)``."""
    bad = bad or BadLines()
    cats: Dict[str, List[str]] = {}
    brands: Dict[str, str] = {}
    for lineno, line in _lines(path):
        if asins is not None:
            match = _ASIN.search(line)
            if match and match.group(1) not in asins:
                continue
        try:
            rec = _parse_record(line)
            asin = rec.get("asin")
            if not asin:
                raise ValueError("missing field asin")
            tokens = amazon_meta_categories(rec)
        except (ValueError, TypeError) as exc:
            bad(path, lineno, str(exc))
            continue
        asin = str(asin).strip()
        if asins is not None and asin not in asins:
            continue
        if tokens:
            cats[asin] = tokens
        brand = clean_token(rec.get("brand"))
        if brand:
            brands[asin] = brand
    return cats, brands


def build_parser(prog: Optional[str] = None) -> argparse.ArgumentParser:
    parser = cli.ConverterParser(prog=prog or cli.prog("amazon"), description=__doc__)
    parser.add_argument("--reviews", required=True, help="review or ratings file")
    parser.add_argument("--meta", help="metadata file (categories, brand)")
    parser.add_argument(
        "--brand",
        action="store_true",
        help="also write the brand as a separate 'brand' field of the .item file",
    )
    parser.add_argument(
        "--csv_order",
        choices=("auto", "user_item", "item_user"),
        default="auto",
        help="column order of a ratings CSV (auto: ratings_*.csv is user,item "
        "(2014), other .csv files item,user (2018))",
    )
    cli.add_common_args(parser)
    return parser


def check(args) -> None:
    if args.brand and not args.meta:
        raise ConversionError("--brand needs --meta")


def read(args, bad: BadLines):
    inter = parse_amazon_reviews(args.reviews, bad, args.csv_order)
    categories, brands = {}, None
    if args.meta:
        categories, all_brands = parse_amazon_meta(
            args.meta, set(inter[ITEM].unique()), bad
        )
        brands = all_brands if args.brand else None
    return inter, categories, brands


def main(argv=None, prog: Optional[str] = None) -> None:
    cli.convert_main(argv, build_parser(prog), read, check)


if __name__ == "__main__":
    sys.exit(cli.run_main(main, prog=f"python -m {__spec__.name}"))
