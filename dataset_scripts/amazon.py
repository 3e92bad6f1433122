#!/usr/bin/env python
"""Convert Amazon review data (McAuley 2014 or 2018) to RecBole atomic files.

Reviews: ``reviews_<Cat>_5.json(.gz)`` (2014), ``<Cat>_5.json(.gz)`` (2018), or the
ratings-only CSVs ``ratings_<Cat>.csv`` (2014: user,item,rating,timestamp) and ``<Cat>.csv``
(2018: item,user,rating,timestamp). Metadata (optional): ``meta_<Cat>.json(.gz)``, python
literals (2014) or JSON (2018); categories are the names in the category paths with the
root dropped:

    python dataset_scripts/amazon.py --reviews reviews_Office_Products_5.json.gz \\
        --meta meta_Office_Products.json.gz --name Office --output_dir dataset

A thin entry point of a checkout: the converter is :mod:`recbole_attn.data.convert.amazon`
(``recbole-attn convert amazon`` where the package is installed).
"""

import sys

from recbole_attn.data.convert import cli, amazon

if __name__ == "__main__":
    sys.exit(cli.run_main(amazon.main, prog="python dataset_scripts/amazon.py"))
