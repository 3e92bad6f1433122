"""Reading raw input for the converters: the parsed table's columns,
:class:`ConversionError`, opening (gunzipped) files line by line, malformed lines
(:class:`BadLines`: an error naming file and line, or counted and skipped with
``--skip_bad_lines``) and number parsing."""

from __future__ import annotations

import gzip
import io
import os
import zlib
from typing import Iterator, Optional, Tuple

import numpy as np
import pandas as pd

from recbole_attn.errors import ConversionError

USER = "user_id"
ITEM = "item_id"
TIME = "timestamp"
RATING = "rating"
CATEGORIES = "categories"
BRAND = "brand"


#: what reading a damaged input raises: OSError (a file that is not gzip, a bad CRC),
#: EOFError (a truncated .gz) and zlib.error (damaged compressed data, which is no
#: OSError)
READ_ERRORS = (OSError, EOFError, zlib.error)


def _require_file(path: str) -> None:
    if not os.path.isfile(path):
        raise ConversionError(f"input file not found: {path}")


def open_text(path: str, encoding: str = "utf-8") -> io.TextIOBase:
    """Open a text file, gunzipping ``*.gz``; a missing file is a
    :class:`ConversionError`."""
    _require_file(path)
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding=encoding, newline="")
    return open(path, "r", encoding=encoding, newline="")


class BadLines:
    """Policy for malformed input lines: raise (default) or count and skip."""

    def __init__(self, skip: bool = False):
        self.skip = skip
        self.count = 0
        self.first: Optional[str] = None

    def __call__(self, path: str, lineno: int, reason: str) -> None:
        message = f"{path}, line {lineno}: {reason}"
        if not self.skip:
            raise ConversionError(
                message + " (use --skip_bad_lines to skip malformed lines)"
            )
        self.count += 1
        if self.first is None:
            self.first = message


def _lines(path: str, encoding: str = "utf-8") -> Iterator[Tuple[int, str]]:
    """``(line number, line)`` of the non-blank lines, decoded line by line."""
    _require_file(path)
    opener = gzip.open if path.endswith(".gz") else open
    lineno = 0
    found = False
    with opener(path, "rb") as f:
        try:
            for lineno, data in enumerate(f, start=1):
                try:
                    line = data.decode(encoding).rstrip("\r\n")
                except UnicodeDecodeError as exc:
                    raise ConversionError(
                        f"{path}, line {lineno}: not valid {encoding} text ({exc.reason})"
                    ) from None
                if line.strip():
                    found = True
                    yield lineno, line
        except READ_ERRORS as exc:  # e.g. a truncated or damaged .gz file
            raise ConversionError(
                f"{path}: cannot read after line {lineno}: {exc}"
            ) from None
    if not found:
        raise ConversionError(f"{path} is empty (no non-blank line)")


def _to_float(value) -> float:
    result = float(value)
    if not np.isfinite(result):
        raise ValueError(f"not a finite number: {value!r}")
    return result


def _frame(rows, with_rating: bool) -> pd.DataFrame:
    cols = [USER, ITEM, TIME, RATING]
    df = pd.DataFrame(rows, columns=cols)
    df[TIME] = df[TIME].astype(np.int64)
    df[RATING] = df[RATING].astype(np.float64)
    return df if with_rating else df.drop(columns=[RATING])
