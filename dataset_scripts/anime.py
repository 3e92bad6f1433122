#!/usr/bin/env python
"""Convert the Kaggle anime recommendations data (``rating.csv`` + ``anime.csv``) to
RecBole atomic files.

``rating.csv`` has no timestamps: the row number in the file is used as the timestamp (the
file order is taken as the chronological order). A rating of -1 means "watched without a
rating"; it is kept as -1 unless ``--min_rating`` drops it. Genres become the categories,
with inner spaces replaced by ``_`` (``Slice of Life`` -> ``Slice_of_Life``):

    python dataset_scripts/anime.py --ratings rating.csv --anime anime.csv \\
        --name anime --output_dir dataset
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _common as c  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ratings", required=True, help="rating.csv")
    parser.add_argument("--anime", help="anime.csv (genres)")
    c.add_common_args(parser)
    return parser


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    options = c.options_from_args(args)
    c.check_fresh(args)
    bad = c.BadLines(args.skip_bad_lines)
    inter = c.parse_anime_ratings(args.ratings, bad)
    genres = c.parse_anime_genres(args.anime, bad) if args.anime else {}
    result = c.convert(inter, genres, None, options)
    c.finish(result, args, bad, __file__, argv)


if __name__ == "__main__":
    sys.exit(c.run_main(main))
