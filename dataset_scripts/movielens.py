#!/usr/bin/env python
"""Convert MovieLens-1M (or 10M) ``ratings.dat`` + ``movies.dat`` to RecBole atomic files.

Both files are ``::``-separated and latin-1 encoded; genres (``|``-separated in
``movies.dat``) become the categories (``Children's``, ``Sci-Fi``, ... kept as is):

    python dataset_scripts/movielens.py --ratings ml-1m/ratings.dat \\
        --movies ml-1m/movies.dat --name ml-1m --output_dir dataset
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
    parser.add_argument("--ratings", required=True, help="ratings.dat")
    parser.add_argument("--movies", help="movies.dat (genres)")
    c.add_common_args(parser)
    return parser


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    options = c.options_from_args(args)
    c.check_fresh(args)
    bad = c.BadLines(args.skip_bad_lines)
    inter = c.parse_movielens_ratings(args.ratings, bad)
    genres = c.parse_movielens_movies(args.movies, bad) if args.movies else {}
    result = c.convert(inter, genres, None, options)
    c.finish(result, args, bad, __file__, argv)


if __name__ == "__main__":
    sys.exit(c.run_main(main))
