#!/usr/bin/env python
"""Convert a SASRec-style interaction file (``user item`` a line, each user's lines in
time order) to RecBole atomic files.

This is the format the SASRec authors publish their preprocessed datasets in (Amazon
Video Games, as RKSA's "Games"; Beauty, Steam, ml-1m). The position of a line among its
user's lines (1, 2, ...) becomes its timestamp, so RecBole's time ordering keeps the
file's order; a user's lines need not be contiguous. The file is already filtered
(SASRec keeps users and items with at least 5 interactions before its own split, in one
pass), so ``--k_core`` defaults to 0 here: the dataset keeps the file's own users,
items and interactions (Games: 31,013 / 23,715 / 287,107):

    recbole-attn convert pairs --interactions Video.txt --name Games --output_dir dataset
"""

from __future__ import annotations

import sys
from typing import Dict, Optional

import numpy as np
import pandas as pd

from recbole_attn.data.convert import cli
from recbole_attn.data.convert.read import BadLines, _frame, _lines


def parse_pairs(path: str, bad: Optional[BadLines] = None) -> pd.DataFrame:
    """``user item`` lines in time order; a line's position among its user's lines is
    its timestamp."""
    bad = bad or BadLines()
    rows = []
    position: Dict[str, int] = {}
    for lineno, line in _lines(path):
        parts = line.split()
        if len(parts) != 2:
            bad(path, lineno, f"expected 'user item', got {line!r}")
            continue
        wrong = [p for p in parts if not p.isdigit()]
        if wrong:
            bad(path, lineno, f"ids must be non-negative integers, got {wrong[0]!r}")
            continue
        uid, iid = (str(int(p)) for p in parts)
        position[uid] = position.get(uid, 0) + 1
        rows.append((uid, iid, position[uid], np.nan))
    return _frame(rows, with_rating=False)


def build_parser(prog: Optional[str] = None):
    parser = cli.ConverterParser(prog=prog or cli.prog("pairs"), description=__doc__)
    parser.add_argument(
        "--interactions",
        required=True,
        help="the 'user item' file, lines in time order",
    )
    cli.add_common_args(parser, ratings=False, k_core=0)
    return parser


def read(args, bad: BadLines):
    return parse_pairs(args.interactions, bad), {}, None


def main(argv=None, prog: Optional[str] = None) -> None:
    cli.convert_main(argv, build_parser(prog), read)


if __name__ == "__main__":
    sys.exit(cli.run_main(main, prog=f"python -m {__spec__.name}"))
