"""``python -m recbole_attn``: the ``recbole-attn`` command (:mod:`recbole_attn.cli`)."""

import sys

from recbole_attn.cli import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m recbole_attn"))
