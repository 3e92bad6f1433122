#!/usr/bin/env python
"""Convert the Kaggle anime recommendations data (``rating.csv`` + ``anime.csv``) to
RecBole atomic files.

``rating.csv`` has no timestamps: the row number in the file is used as the timestamp (the
file order is taken as the chronological order). A rating of -1 means "watched without a
rating"; it is kept as -1 unless ``--min_rating`` drops it. Genres become the categories,
with inner spaces replaced by ``_`` (``Slice of Life`` -> ``Slice_of_Life``):

    recbole-attn convert anime --ratings rating.csv --anime anime.csv \\
        --name anime --output_dir dataset
"""

from __future__ import annotations

import argparse
import csv
import sys
from typing import Dict, List, Optional

import pandas as pd

from recbole_attn.data.convert import cli
from recbole_attn.data.convert.clean import clean_tokens
from recbole_attn.data.convert.read import (
    BadLines,
    ConversionError,
    _frame,
    _lines,
    _to_float,
)
from recbole_attn.data.convert.read import READ_ERRORS, open_text


def parse_anime_ratings(path: str, bad: Optional[BadLines] = None) -> pd.DataFrame:
    """Kaggle ``rating.csv``, the row number as the timestamp."""
    bad = bad or BadLines()
    rows = []
    lines = _lines(path)
    lineno, line = next(lines)
    if [p.strip() for p in line.split(",")][:3] != ["user_id", "anime_id", "rating"]:
        raise ConversionError(
            f"{path}, line {lineno}: expected the header "
            f"'user_id,anime_id,rating', got {line!r}"
        )
    for position, (lineno, line) in enumerate(lines, start=1):
        parts = [p.strip() for p in line.split(",")]
        try:
            if len(parts) != 3 or not (parts[0].isdigit() and parts[1].isdigit()):
                raise ValueError(f"expected 'user_id,anime_id,rating', got {line!r}")
            rows.append(
                (str(int(parts[0])), str(int(parts[1])), position, _to_float(parts[2]))
            )
        except ValueError as exc:
            bad(path, lineno, str(exc))
    return _frame(rows, with_rating=True)


def parse_anime_genres(
    path: str, bad: Optional[BadLines] = None
) -> Dict[str, List[str]]:
    try:
        with open_text(path) as f:
            return _anime_genres(path, csv.reader(f), bad or BadLines())
    except (UnicodeDecodeError, *READ_ERRORS, csv.Error) as exc:
        raise ConversionError(f"{path}: cannot read: {exc}") from None


def _anime_genres(path: str, reader, bad: BadLines) -> Dict[str, List[str]]:
    genres: Dict[str, List[str]] = {}
    header = next(reader, None)
    if not header or "anime_id" not in header or "genre" not in header:
        raise ConversionError(
            f"{path}, line 1: expected a header with anime_id and genre columns"
        )
    id_col, genre_col = header.index("anime_id"), header.index("genre")
    lineno = reader.line_num
    for row in reader:
        start, lineno = lineno + 1, reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header) or not row[id_col].strip().isdigit():
            bad(path, start, f"expected {len(header)} columns with an integer id")
            continue
        tokens = clean_tokens(row[genre_col].split(","))
        if tokens:
            genres[str(int(row[id_col]))] = tokens
    return genres


def build_parser(prog: Optional[str] = None) -> argparse.ArgumentParser:
    parser = cli.ConverterParser(prog=prog or cli.prog("anime"), description=__doc__)
    parser.add_argument("--ratings", required=True, help="rating.csv")
    parser.add_argument("--anime", help="anime.csv (genres)")
    cli.add_common_args(parser)
    return parser


def read(args, bad: BadLines):
    inter = parse_anime_ratings(args.ratings, bad)
    genres = parse_anime_genres(args.anime, bad) if args.anime else {}
    return inter, genres, None


def main(argv=None, prog: Optional[str] = None) -> None:
    cli.convert_main(argv, build_parser(prog), read)


if __name__ == "__main__":
    sys.exit(cli.run_main(main, prog=f"python -m {__spec__.name}"))
