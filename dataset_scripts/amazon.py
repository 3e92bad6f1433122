#!/usr/bin/env python
"""Convert Amazon review data (McAuley 2014 or 2018) to RecBole atomic files.

Reviews: ``reviews_<Cat>_5.json(.gz)`` (2014), ``<Cat>_5.json(.gz)`` (2018), or the
ratings-only CSVs ``ratings_<Cat>.csv`` (2014: user,item,rating,timestamp) and ``<Cat>.csv``
(2018: item,user,rating,timestamp). Metadata (optional): ``meta_<Cat>.json(.gz)``, python
literals (2014) or JSON (2018); categories are the names in the category paths with the
root dropped:

    python dataset_scripts/amazon.py --reviews reviews_Office_Products_5.json.gz \\
        --meta meta_Office_Products.json.gz --name Office --output_dir dataset
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
    c.add_common_args(parser)
    return parser


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    options = c.options_from_args(args)
    if args.brand and not args.meta:
        raise c.ConversionError("--brand needs --meta")
    c.check_fresh(args)
    bad = c.BadLines(args.skip_bad_lines)
    inter = c.parse_amazon_reviews(args.reviews, bad, args.csv_order)
    categories, brands = {}, None
    if args.meta:
        categories, all_brands = c.parse_amazon_meta(
            args.meta, set(inter[c.ITEM].unique()), bad
        )
        brands = all_brands if args.brand else None
    result = c.convert(inter, categories, brands, options)
    c.finish(result, args, bad, __file__, argv)


if __name__ == "__main__":
    sys.exit(c.run_main(main))
