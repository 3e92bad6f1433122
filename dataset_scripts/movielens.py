#!/usr/bin/env python
"""Convert MovieLens-1M (or 10M) ``ratings.dat`` + ``movies.dat`` to RecBole atomic files.

Both files are ``::``-separated and latin-1 encoded; genres (``|``-separated in
``movies.dat``) become the categories (``Children's``, ``Sci-Fi``, ... kept as is):

    python dataset_scripts/movielens.py --ratings ml-1m/ratings.dat \\
        --movies ml-1m/movies.dat --name ml-1m --output_dir dataset

A thin entry point of a checkout: the converter is :mod:`recbole_attn.data.convert.movielens`
(``recbole-attn convert movielens`` where the package is installed).
"""

import sys

from recbole_attn.data.convert import cli, movielens

if __name__ == "__main__":
    sys.exit(cli.run_main(movielens.main, prog="python dataset_scripts/movielens.py"))
