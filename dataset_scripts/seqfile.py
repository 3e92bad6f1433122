#!/usr/bin/env python
"""Convert a STOSA/S3Rec/PAtt sequence file (``uid i1 i2 ...``) to RecBole atomic files.

The position of an item in its user's line (1, 2, ...) becomes its timestamp. With an S3Rec
``*_item2attributes.json``, attributes become categories (``--attributes_mode``; see
docs/datasets.md):

    python dataset_scripts/seqfile.py --sequences Office_Products.txt --name Office \\
        --output_dir dataset
    python dataset_scripts/seqfile.py --sequences Beauty.txt \\
        --attributes Beauty_item2attributes.json --name Beauty --output_dir dataset

A thin entry point of a checkout: the converter is :mod:`recbole_attn.data.convert.seqfile`
(``recbole-attn convert seqfile`` where the package is installed).
"""

import sys

from recbole_attn.data.convert import cli, seqfile

if __name__ == "__main__":
    sys.exit(cli.run_main(seqfile.main, prog="python dataset_scripts/seqfile.py"))
