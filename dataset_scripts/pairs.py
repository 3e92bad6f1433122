#!/usr/bin/env python
"""Convert a SASRec-style interaction file (``user item`` a line, each user's lines in
time order: the SASRec authors' Video.txt, RKSA's "Games") to RecBole atomic files:

    python dataset_scripts/pairs.py --interactions Video.txt --name Games \\
        --output_dir dataset

A thin entry point of a checkout: the converter is :mod:`recbole_attn.data.convert.pairs`
(``recbole-attn convert pairs`` where the package is installed).
"""

import sys

from recbole_attn.data.convert import cli, pairs

if __name__ == "__main__":
    sys.exit(cli.run_main(pairs.main, prog="python dataset_scripts/pairs.py"))
