#!/usr/bin/env python
"""Convert the Kaggle anime recommendations data (``rating.csv`` + ``anime.csv``) to
RecBole atomic files.

``rating.csv`` has no timestamps: the row number in the file is used as the timestamp (the
file order is taken as the chronological order). A rating of -1 means "watched without a
rating"; it is kept as -1 unless ``--min_rating`` drops it. Genres become the categories,
with inner spaces replaced by ``_`` (``Slice of Life`` -> ``Slice_of_Life``):

    python dataset_scripts/anime.py --ratings rating.csv --anime anime.csv \\
        --name anime --output_dir dataset

A thin entry point of a checkout: the converter is :mod:`recbole_attn.data.convert.anime`
(``recbole-attn convert anime`` where the package is installed).
"""

import sys

from recbole_attn.data.convert import cli, anime

if __name__ == "__main__":
    sys.exit(cli.run_main(anime.main, prog="python dataset_scripts/anime.py"))
