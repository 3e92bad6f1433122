"""Train and evaluate a model through recbole_attn's pipeline (RecBole 1.2.1 plugin), from
a checkout: the same command line as ``recbole-attn`` (:mod:`recbole_attn.cli`).

    python run_recbole_attn.py --model=STOSA --dataset=ml-100k [--key=value ...]
    python run_recbole_attn.py --model=STOSA --dataset=ml-100k --params_file=STOSA
"""

import sys

from recbole_attn.cli import build_parser, main  # noqa: F401

if __name__ == "__main__":
    sys.exit(main(prog="python run_recbole_attn.py"))
