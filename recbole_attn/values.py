"""
recbole_attn.values
###################

Command-line values as the values they spell (no torch, no RecBole: the command line
parses with it before anything heavy is imported).
"""

import ast
import warnings


def convert_value(text):
    """A command-line or config-dict string as the value it spells: a Python literal,
    ``true``/``false`` in any case, else the string itself."""
    try:
        with warnings.catch_warnings():  # "2in": Python warns while failing to parse it
            warnings.simplefilter("ignore", SyntaxWarning)
            return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return {"true": True, "false": False}.get(text.strip().lower(), text)
