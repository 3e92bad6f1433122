#!/usr/bin/env python
"""Convert MovieLens-1M (or 10M) ``ratings.dat`` + ``movies.dat`` to RecBole atomic files.

Both files are ``::``-separated and latin-1 encoded; genres (``|``-separated in
``movies.dat``) become the categories (``Children's``, ``Sci-Fi``, ... kept as is):

    recbole-attn convert movielens --ratings ml-1m/ratings.dat \\
        --movies ml-1m/movies.dat --name ml-1m --output_dir dataset
"""

from __future__ import annotations

import argparse
import sys
from typing import Dict, List, Optional

import pandas as pd

from recbole_attn.data.convert import cli
from recbole_attn.data.convert.clean import clean_tokens
from recbole_attn.data.convert.read import BadLines, _frame, _lines, _to_float


def parse_movielens_ratings(path: str, bad: Optional[BadLines] = None) -> pd.DataFrame:
    """``ratings.dat`` (ML-1M/ML-10M): ``UserID::MovieID::Rating::Timestamp``."""
    bad = bad or BadLines()
    rows = []
    for lineno, line in _lines(path, encoding="latin-1"):
        parts = line.split("::")
        try:
            if len(parts) != 4:
                raise ValueError(
                    f"expected 'UserID::MovieID::Rating::Timestamp', got {line!r}"
                )
            user, item = parts[0].strip(), parts[1].strip()
            if not (user.isdigit() and item.isdigit()):
                raise ValueError("UserID and MovieID must be integers")
            rows.append(
                (str(int(user)), str(int(item)), int(parts[3]), _to_float(parts[2]))
            )
        except ValueError as exc:
            bad(path, lineno, str(exc))
    return _frame(rows, with_rating=True)


def parse_movielens_movies(
    path: str, bad: Optional[BadLines] = None
) -> Dict[str, List[str]]:
    """``movies.dat`` -> movie -> genres (``(no genres listed)``: none)."""
    bad = bad or BadLines()
    genres: Dict[str, List[str]] = {}
    for lineno, line in _lines(path, encoding="latin-1"):
        parts = line.split("::")
        if len(parts) < 3 or not parts[0].strip().isdigit():
            bad(path, lineno, f"expected 'MovieID::Title::Genres', got {line!r}")
            continue
        names = [g for g in parts[-1].split("|") if g.strip() != "(no genres listed)"]
        tokens = clean_tokens(names)
        if tokens:
            genres[str(int(parts[0]))] = tokens
    return genres


def build_parser(prog: Optional[str] = None) -> argparse.ArgumentParser:
    parser = cli.ConverterParser(
        prog=prog or cli.prog("movielens"), description=__doc__
    )
    parser.add_argument("--ratings", required=True, help="ratings.dat")
    parser.add_argument("--movies", help="movies.dat (genres)")
    cli.add_common_args(parser)
    return parser


def read(args, bad: BadLines):
    inter = parse_movielens_ratings(args.ratings, bad)
    genres = parse_movielens_movies(args.movies, bad) if args.movies else {}
    return inter, genres, None


def main(argv=None, prog: Optional[str] = None) -> None:
    cli.convert_main(argv, build_parser(prog), read)


if __name__ == "__main__":
    sys.exit(cli.run_main(main, prog=f"python -m {__spec__.name}"))
