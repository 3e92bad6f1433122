#!/usr/bin/env python
"""Convert a STOSA/S3Rec/PAtt sequence file (``uid i1 i2 ...``) to RecBole atomic files.

The position of an item in its user's line (1, 2, ...) becomes its timestamp. With an S3Rec
``*_item2attributes.json``, attributes become categories (``--attributes_mode``; see
docs/datasets.md):

    python dataset_scripts/seqfile.py --sequences Office_Products.txt --name Office \\
        --output_dir dataset
    python dataset_scripts/seqfile.py --sequences Beauty.txt \\
        --attributes Beauty_item2attributes.json --name Beauty --output_dir dataset
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
    parser.add_argument("--sequences", required=True, help="the 'uid i1 i2 ...' file")
    parser.add_argument(
        "--attributes", help="optional S3Rec *_item2attributes.json (item -> attr ids)"
    )
    parser.add_argument(
        "--attributes_mode",
        choices=c.ATTRIBUTE_MODES,
        default="categories",
        help="categories (default): drop the leading brand-like id (an id that only "
        "ever appears at list position 0); all: every attribute is a category; "
        "brand_split: as categories plus a separate brand field",
    )
    c.add_common_args(parser, ratings=False)
    return parser


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    options = c.options_from_args(args)
    c.check_fresh(args)
    bad = c.BadLines(args.skip_bad_lines)
    inter = c.parse_seqfile(args.sequences, bad)
    categories, brands = {}, None
    if args.attributes:
        attrs = c.parse_item2attributes(args.attributes)
        categories, brands = c.split_attributes(attrs, args.attributes_mode)
    result = c.convert(inter, categories, brands, options)
    c.finish(result, args, bad, __file__, argv)


if __name__ == "__main__":
    sys.exit(c.run_main(main))
