"""Shared code of the dataset converters (raw public files -> RecBole atomic files).

Each script in this folder (``amazon.py``, ``seqfile.py``, ``movielens.py``, ``anime.py``)
is a thin command line over the functions here. The pipeline is the same for every source:

1. parse the raw interactions into a table ``user_id, item_id, timestamp[, rating]``
   (a malformed line raises :class:`ConversionError` naming the file and the line, or is
   counted and skipped with ``--skip-bad-lines``);
2. ``--min_rating`` filter, then chronological order: a *stable* sort by timestamp within
   each user (ties keep the file order), users in order of first appearance;
3. repeated (user, item) pairs keep only their earliest interaction (``--keep_duplicates``
   turns this off);
4. k-core filtering on users and items, iterated to a fixed point (:func:`k_core`);
5. atomic writing of ``<out>/<name>/<name>.inter``, ``<name>.item`` and ``<name>.yaml``
   (:func:`write_atomic`): every file is written to a temporary file in the target folder
   and renamed into place only when all of them are complete; an existing dataset is only
   replaced with ``--overwrite``.

Category tokens: RecBole splits ``token_seq`` cells on spaces, so whitespace inside a
category name is replaced with ``_`` (``Slice of Life`` -> ``Slice_of_Life``). An item
without any category is left out of the ``.item`` file (an empty ``token_seq`` cell breaks
RecBole's loader under pandas 3); RecBole gives such an item an all-padding category row,
which the diversity metrics treat as "uncategorized". The item stays rankable: the item id
space comes from the ``.inter`` file.

Import from tests or other code by putting this folder on ``sys.path``
(``sys.path.insert(0, "<repo>/dataset_scripts")``; ``import _common``).
"""

from __future__ import annotations

import argparse
import ast
import csv
import gzip
import io
import json
import os
import re
import shlex
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

import numpy as np
import pandas as pd

USER = "user_id"
ITEM = "item_id"
TIME = "timestamp"
RATING = "rating"
CATEGORIES = "categories"
BRAND = "brand"

SCRIPTS_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(SCRIPTS_DIR)
#: Where the team's shared raw files live, relative to the repository.
SHARED_RAW_DIR = os.path.join(REPO_DIR, os.pardir, "shared", "datasets", "raw")


class ConversionError(Exception):
    """A user-facing error of the converters (bad input, refused overwrite, ...).

    The scripts catch it in ``main()``, print ``error: <message>`` to stderr and exit 2.
    """


# --------------------------------------------------------------------------- reading


def _require_file(path: str) -> None:
    if not os.path.isfile(path):
        raise ConversionError(f"input file not found: {path}")


def open_text(path: str, encoding: str = "utf-8") -> io.TextIOBase:
    """Open a text file, transparently gunzipping ``*.gz``; a missing file is a
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
                message + " (use --skip-bad-lines to skip malformed lines)"
            )
        self.count += 1
        if self.first is None:
            self.first = message


def _lines(path: str, encoding: str = "utf-8") -> Iterator[Tuple[int, str]]:
    """Yield ``(line number, line without end-of-line)`` for the non-blank lines.

    Lines are decoded one by one so that an undecodable byte is reported on its line."""
    _require_file(path)
    opener = gzip.open if path.endswith(".gz") else open
    lineno = 0
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
                    yield lineno, line
        except (OSError, EOFError) as exc:  # e.g. a truncated .gz file
            raise ConversionError(
                f"{path}: cannot read after line {lineno}: {exc}"
            ) from None


def _to_float(value) -> float:
    result = float(value)
    if not np.isfinite(result):
        raise ValueError(f"not a finite number: {value!r}")
    return result


# ------------------------------------------------------------------ category tokens

_WHITESPACE = re.compile(r"\s+")


def clean_token(name) -> Optional[str]:
    """A category/brand name as a RecBole token: stripped, inner whitespace -> ``_``.

    Returns None for an empty name.
    """
    if name is None:
        return None
    token = _WHITESPACE.sub("_", str(name).strip())
    return token or None


def clean_tokens(names: Iterable) -> List[str]:
    """Clean names, dropping empty ones and repeats (first occurrence kept)."""
    seen: Dict[str, None] = {}
    for name in names:
        token = clean_token(name)
        if token is not None and token not in seen:
            seen[token] = None
    return list(seen)


# ------------------------------------------------------------------- sequence files


def parse_seqfile(path: str, bad: Optional[BadLines] = None) -> pd.DataFrame:
    """Parse a STOSA/S3Rec/PAtt sequence file: one line ``uid i1 i2 ...`` per user.

    Ids must be non-negative integers. The position of an item in its line (1, 2, ...)
    becomes its timestamp, so that RecBole's time ordering keeps the authors' order. A line
    with no item, a non-integer id or a user seen on an earlier line is malformed.
    """
    bad = bad or BadLines()
    users: List[str] = []
    items: List[str] = []
    times: List[int] = []
    seen: Dict[str, int] = {}
    for lineno, line in _lines(path):
        parts = line.split()
        if len(parts) < 2:
            bad(path, lineno, f"expected 'user item item ...', got {line!r}")
            continue
        wrong = [p for p in parts if not p.isdigit()]
        if wrong:
            bad(path, lineno, f"ids must be non-negative integers, got {wrong[0]!r}")
            continue
        uid = str(int(parts[0]))
        if uid in seen:
            bad(path, lineno, f"user {uid} already has a line (line {seen[uid]})")
            continue
        seen[uid] = lineno
        seq = [str(int(p)) for p in parts[1:]]
        users.extend([uid] * len(seq))
        items.extend(seq)
        times.extend(range(1, len(seq) + 1))
    return pd.DataFrame(
        {USER: users, ITEM: items, TIME: np.asarray(times, dtype=np.int64)}
    )


def parse_item2attributes(path: str) -> Dict[str, List[int]]:
    """Read an S3Rec ``*_item2attributes.json`` (``{"<item id>": [attr id, ...]}``)."""
    with open_text(path) as f:
        try:
            data = json.load(f)
        except json.JSONDecodeError as exc:
            raise ConversionError(
                f"{path}, line {exc.lineno}: not valid JSON ({exc.msg})"
            ) from None
        except (UnicodeDecodeError, OSError, EOFError) as exc:
            raise ConversionError(f"{path}: cannot read: {exc}") from None
    if not isinstance(data, dict):
        raise ConversionError(f"{path}: expected a JSON object item id -> [attr ids]")
    result: Dict[str, List[int]] = {}
    for key, attrs in data.items():
        if not isinstance(attrs, list) or not all(
            isinstance(a, int) and not isinstance(a, bool) for a in attrs
        ):
            raise ConversionError(
                f"{path}: item {key!r}: expected a list of integer attribute ids"
            )
        key = str(key).strip()
        if not key.isdigit():
            raise ConversionError(f"{path}: item id {key!r} is not an integer")
        result[str(int(key))] = list(attrs)
    return result


def brand_like_ids(item2attrs: Mapping[str, List[int]]) -> set:
    """Attribute ids that only ever appear at list position 0 (SOURCES.md §2).

    S3Rec's preprocessing puts an item's brand first, then its category-path names, in one
    id space; such an id behaves like a brand.
    """
    first = set()
    later = set()
    for attrs in item2attrs.values():
        if attrs:
            first.add(attrs[0])
            later.update(attrs[1:])
    return first - later


ATTRIBUTE_MODES = ("categories", "all", "brand_split")


def split_attributes(
    item2attrs: Mapping[str, List[int]], mode: str = "categories"
) -> Tuple[Dict[str, List[str]], Optional[Dict[str, str]]]:
    """Turn S3Rec attributes into ``(item -> category tokens, item -> brand token)``.

    * ``categories`` (default): drop position 0 when its id is brand-like
      (:func:`brand_like_ids`); the rest are the category-path names. No brand field.
    * ``all``: every attribute id is a "category" (S3Rec's own view).
    * ``brand_split``: as ``categories``, plus the dropped brand-like id as a separate
      ``brand`` field.

    Tokens are the attribute ids as strings (no id -> name table is published).
    """
    if mode not in ATTRIBUTE_MODES:
        raise ConversionError(
            f"unknown attributes mode {mode!r} (choose from {', '.join(ATTRIBUTE_MODES)})"
        )
    brands_ids = brand_like_ids(item2attrs) if mode != "all" else set()
    cats: Dict[str, List[str]] = {}
    brands: Optional[Dict[str, str]] = {} if mode == "brand_split" else None
    for item, attrs in item2attrs.items():
        attrs = list(attrs)
        if attrs and attrs[0] in brands_ids:
            if brands is not None:
                brands[item] = str(attrs[0])
            attrs = attrs[1:]
        tokens = clean_tokens(str(a) for a in attrs)
        if tokens:
            cats[item] = tokens
    return cats, brands


# ------------------------------------------------------------------------- Amazon


def _parse_record(line: str) -> dict:
    """A strict-JSON line (2018 files, 2014 reviews) or a python-literal line (2014
    metadata). Never ``eval``: ``ast.literal_eval`` only builds literals."""
    try:
        record = json.loads(line)
    except ValueError:
        try:
            record = ast.literal_eval(line)
        except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
            raise ValueError("neither JSON nor a python literal") from None
    if not isinstance(record, dict):
        raise ValueError("not a JSON object / python dict")
    return record


def amazon_csv_order(path: str) -> str:
    """Column order of an Amazon ratings-only CSV: 2014's ``ratings_<Cat>.csv`` is
    ``user,item,rating,timestamp``; 2018's ``<Cat>.csv`` is ``item,user,rating,timestamp``.
    """
    base = os.path.basename(path)
    return "user_item" if base.startswith("ratings_") else "item_user"


def parse_amazon_reviews(
    path: str, bad: Optional[BadLines] = None, csv_order: str = "auto"
) -> pd.DataFrame:
    """Amazon review/rating file -> ``user_id, item_id, timestamp, rating``.

    * JSON lines (``reviews_<Cat>_5.json(.gz)`` 2014, ``<Cat>_5.json(.gz)`` 2018): fields
      ``reviewerID``, ``asin``, ``unixReviewTime``, ``overall``.
    * CSV without header (``ratings_<Cat>.csv`` 2014: user,item,rating,timestamp;
      ``<Cat>.csv`` 2018: item,user,rating,timestamp; ``csv_order`` overrides the guess).
    """
    bad = bad or BadLines()
    stem = path[:-3] if path.endswith(".gz") else path
    users: List[str] = []
    items: List[str] = []
    times: List[int] = []
    ratings: List[float] = []
    if stem.endswith(".csv"):
        order = amazon_csv_order(path) if csv_order == "auto" else csv_order
        if order not in ("user_item", "item_user"):
            raise ConversionError(f"unknown --csv_order {csv_order!r}")
        for lineno, line in _lines(path):
            parts = [p.strip() for p in line.split(",")]
            try:
                if len(parts) != 4 or not parts[0] or not parts[1]:
                    raise ValueError(f"expected 4 comma-separated fields, got {line!r}")
                rating = _to_float(parts[2])
                ts = int(float(parts[3]))
            except ValueError as exc:
                bad(path, lineno, str(exc))
                continue
            user, item = (parts[0], parts[1]) if order == "user_item" else parts[1::-1]
            users.append(user)
            items.append(item)
            ratings.append(rating)
            times.append(ts)
    else:
        for lineno, line in _lines(path):
            try:
                rec = _parse_record(line)
                missing = [
                    k
                    for k in ("reviewerID", "asin", "unixReviewTime")
                    if rec.get(k) in (None, "")
                ]
                if missing:
                    raise ValueError(f"missing field(s) {', '.join(missing)}")
                ts = int(rec["unixReviewTime"])
                rating = _to_float(rec["overall"]) if "overall" in rec else np.nan
            except (ValueError, TypeError) as exc:
                bad(path, lineno, str(exc))
                continue
            users.append(str(rec["reviewerID"]).strip())
            items.append(str(rec["asin"]).strip())
            times.append(ts)
            ratings.append(rating)
    df = pd.DataFrame(
        {
            USER: users,
            ITEM: items,
            TIME: np.asarray(times, dtype=np.int64),
            RATING: np.asarray(ratings, dtype=np.float64),
        }
    )
    if df[RATING].isna().any():  # a review file without ratings
        df = df.drop(columns=[RATING])
    return df


_ASIN = re.compile(r"""["']asin["']\s*:\s*["']([^"']+)["']""")


def amazon_meta_categories(record: dict) -> List[str]:
    """Category tokens of one Amazon metadata record, root dropped.

    2014: ``categories`` is a list of paths (lists), each starting at the root
    (e.g. ``[["Beauty", "Skin Care", "Face"], ["Beauty", "Makeup"]]``); 2018: ``category``
    is one path (a list of names). The root of every path is dropped, the remaining names are
    collected in order, without repeats.
    """
    paths = record.get("categories")
    if paths is None:
        paths = record.get("category")
        paths = [paths] if paths else []
    names: List[str] = []
    for path in paths or []:
        if isinstance(path, str):  # defensive: a flat list of names = one path
            path = [path]
        names.extend(str(n) for n in list(path)[1:])
    return clean_tokens(names)


def parse_amazon_meta(
    path: str,
    asins: Optional[set] = None,
    bad: Optional[BadLines] = None,
) -> Tuple[Dict[str, List[str]], Dict[str, str]]:
    """Amazon metadata (``meta_<Cat>.json(.gz)``, python literals in 2014, JSON in 2018)
    -> ``(asin -> category tokens, asin -> brand token)``.

    With ``asins`` given, lines whose ``asin`` is recognisably not in it are skipped without
    being parsed (metadata files are large; such lines are not checked for errors).
    """
    bad = bad or BadLines()
    cats: Dict[str, List[str]] = {}
    brands: Dict[str, str] = {}
    for lineno, line in _lines(path):
        if asins is not None:
            match = _ASIN.search(line)
            if match and match.group(1) not in asins:
                continue
        try:
            rec = _parse_record(line)
            asin = rec.get("asin")
            if not asin:
                raise ValueError("missing field asin")
            tokens = amazon_meta_categories(rec)
        except (ValueError, TypeError) as exc:
            bad(path, lineno, str(exc))
            continue
        asin = str(asin).strip()
        if asins is not None and asin not in asins:
            continue
        if tokens:
            cats[asin] = tokens
        brand = clean_token(rec.get("brand"))
        if brand:
            brands[asin] = brand
    return cats, brands


# ---------------------------------------------------------------------- MovieLens


def parse_movielens_ratings(path: str, bad: Optional[BadLines] = None) -> pd.DataFrame:
    """``ratings.dat`` (ML-1M/ML-10M): ``UserID::MovieID::Rating::Timestamp``."""
    bad = bad or BadLines()
    rows = []
    for lineno, line in _lines(path, encoding="latin-1"):
        parts = line.split("::")
        try:
            if len(parts) != 4:
                raise ValueError(
                    f"expected 'UserID::MovieID::Rating::Timestamp', got {line!r}"
                )
            user, item = parts[0].strip(), parts[1].strip()
            if not (user.isdigit() and item.isdigit()):
                raise ValueError("UserID and MovieID must be integers")
            rows.append(
                (str(int(user)), str(int(item)), int(parts[3]), _to_float(parts[2]))
            )
        except ValueError as exc:
            bad(path, lineno, str(exc))
    return _frame(rows, with_rating=True)


def parse_movielens_movies(
    path: str, bad: Optional[BadLines] = None
) -> Dict[str, List[str]]:
    """``movies.dat``: ``MovieID::Title::Genre|Genre|...`` (latin-1) -> movie -> genres.

    ``(no genres listed)`` (later MovieLens releases) means no genre.
    """
    bad = bad or BadLines()
    genres: Dict[str, List[str]] = {}
    for lineno, line in _lines(path, encoding="latin-1"):
        parts = line.split("::")
        if len(parts) < 3 or not parts[0].strip().isdigit():
            bad(path, lineno, f"expected 'MovieID::Title::Genres', got {line!r}")
            continue
        names = [g for g in parts[-1].split("|") if g.strip() != "(no genres listed)"]
        tokens = clean_tokens(names)
        if tokens:
            genres[str(int(parts[0]))] = tokens
    return genres


# -------------------------------------------------------------------------- Anime


def parse_anime_ratings(path: str, bad: Optional[BadLines] = None) -> pd.DataFrame:
    """Kaggle anime ``rating.csv`` (``user_id,anime_id,rating``; rating -1 = watched
    without a rating). There are no timestamps: the row number in the file (1, 2, ...)
    is used as the timestamp, i.e. the file order is taken as the chronological order.
    """
    bad = bad or BadLines()
    rows = []
    header_seen = False
    position = 0
    for lineno, line in _lines(path):
        parts = [p.strip() for p in line.split(",")]
        if not header_seen:
            header_seen = True
            if parts[:3] != ["user_id", "anime_id", "rating"]:
                raise ConversionError(
                    f"{path}, line {lineno}: expected the header "
                    f"'user_id,anime_id,rating', got {line!r}"
                )
            continue
        position += 1
        try:
            if len(parts) != 3 or not (parts[0].isdigit() and parts[1].isdigit()):
                raise ValueError(f"expected 'user_id,anime_id,rating', got {line!r}")
            rows.append(
                (str(int(parts[0])), str(int(parts[1])), position, _to_float(parts[2]))
            )
        except ValueError as exc:
            bad(path, lineno, str(exc))
    return _frame(rows, with_rating=True)


def parse_anime_genres(
    path: str, bad: Optional[BadLines] = None
) -> Dict[str, List[str]]:
    """Kaggle ``anime.csv`` (``anime_id,name,genre,...``; ``genre`` is a quoted,
    comma-separated list) -> anime -> genre tokens (``Slice of Life`` -> ``Slice_of_Life``).
    """
    try:
        return _anime_genres(path, bad or BadLines())
    except (UnicodeDecodeError, OSError, EOFError, csv.Error) as exc:
        raise ConversionError(f"{path}: cannot read: {exc}") from None


def _anime_genres(path: str, bad: BadLines) -> Dict[str, List[str]]:
    genres: Dict[str, List[str]] = {}
    with open_text(path) as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if not header or "anime_id" not in header or "genre" not in header:
            raise ConversionError(
                f"{path}, line 1: expected a header with anime_id and genre columns"
            )
        id_col, genre_col = header.index("anime_id"), header.index("genre")
        lineno = reader.line_num
        for row in reader:
            start, lineno = lineno + 1, reader.line_num
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != len(header) or not row[id_col].strip().isdigit():
                bad(path, start, f"expected {len(header)} columns with an integer id")
                continue
            tokens = clean_tokens(row[genre_col].split(","))
            if tokens:
                genres[str(int(row[id_col]))] = tokens
    return genres


def _frame(rows, with_rating: bool) -> pd.DataFrame:
    cols = [USER, ITEM, TIME, RATING]
    df = pd.DataFrame(rows, columns=cols)
    df[TIME] = df[TIME].astype(np.int64)
    df[RATING] = df[RATING].astype(np.float64)
    return df if with_rating else df.drop(columns=[RATING])


# ---------------------------------------------------------------------- filtering


def chronological(df: pd.DataFrame) -> pd.DataFrame:
    """Users in order of first appearance; within a user, a stable sort by timestamp
    (interactions with equal timestamps keep their file order)."""
    user_code = pd.factorize(df[USER])[0]
    order = np.lexsort((df[TIME].to_numpy(), user_code))  # lexsort is stable
    return df.iloc[order].reset_index(drop=True)


def drop_duplicates(df: pd.DataFrame) -> pd.DataFrame:
    """Keep the first row of every (user, item) pair (the earliest, on sorted input)."""
    return df.drop_duplicates(subset=[USER, ITEM], keep="first").reset_index(drop=True)


def k_core(
    df: pd.DataFrame,
    k: int,
    item_k: Optional[int] = None,
    user_col: str = USER,
    item_col: str = ITEM,
) -> pd.DataFrame:
    """Iterated k-core: drop users with < ``k`` and items with < ``item_k`` (default ``k``)
    interactions, repeated until nothing changes. Row order is kept; ``k <= 1`` (and
    ``item_k <= 1``) disables the respective side. The number of passes that removed
    something is stored in ``result.attrs['k_core_passes']``."""
    item_k = k if item_k is None else item_k
    passes = 0
    while True:
        keep = np.ones(len(df), dtype=bool)
        if k > 1:
            keep &= df.groupby(user_col)[user_col].transform("size").to_numpy() >= k
        if item_k > 1:
            keep &= (
                df.groupby(item_col)[item_col].transform("size").to_numpy() >= item_k
            )
        if keep.all():
            break
        df = df[keep]
        passes += 1
    df = df.reset_index(drop=True)
    df.attrs["k_core_passes"] = passes
    return df


# ------------------------------------------------------------------------ writing


def _num(value: float) -> str:
    value = float(value)
    return str(int(value)) if value.is_integer() else repr(value)


def inter_text(df: pd.DataFrame) -> str:
    """The ``.inter`` file: ``user_id:token item_id:token timestamp:float[ rating:float]``."""
    cols = [USER, ITEM, TIME] + ([RATING] if RATING in df.columns else [])
    header = "\t".join(f"{c}:{'token' if c in (USER, ITEM) else 'float'}" for c in cols)
    out = io.StringIO()
    out.write(header + "\n")
    frame = pd.DataFrame(
        {
            USER: df[USER].astype(str),
            ITEM: df[ITEM].astype(str),
            TIME: df[TIME].astype(np.int64).astype(str),
        }
    )
    if RATING in df.columns:
        frame[RATING] = [_num(v) for v in df[RATING].to_numpy()]
    frame.to_csv(out, sep="\t", header=False, index=False, lineterminator="\n")
    return out.getvalue()


def _natural_key(token: str):
    return (0, int(token), "") if token.isdigit() else (1, 0, token)


def item_table(
    items: Iterable[str],
    categories: Mapping[str, List[str]],
    brands: Optional[Mapping[str, str]] = None,
) -> List[Tuple[str, List[str], Optional[str]]]:
    """Rows ``(item, category tokens, brand)`` of the ``.item`` file: only the given
    (interacted) items that have at least one category, in natural id order."""
    rows = []
    for item in sorted(set(items), key=_natural_key):
        cats = categories.get(item)
        if cats:
            rows.append((item, list(cats), (brands or {}).get(item)))
    return rows


def item_text(rows, with_brand: bool = False) -> str:
    """The ``.item`` file: ``item_id:token categories:token_seq[ brand:token]``.

    Every written row has at least one category (no empty ``token_seq`` cell); an item
    without a brand gets an empty brand cell (a plain ``token``: RecBole maps it to
    padding)."""
    lines = [
        f"{ITEM}:token\t{CATEGORIES}:token_seq"
        + (f"\t{BRAND}:token" if with_brand else "")
    ]
    for item, cats, brand in rows:
        line = f"{item}\t{' '.join(cats)}"
        if with_brand:
            line += "\t" + (brand or "")
        lines.append(line)
    return "\n".join(lines) + "\n"


def dataset_yaml(
    has_categories: bool,
    has_brand: bool = False,
    has_rating: bool = False,
    command: Optional[str] = None,
) -> str:
    """The dataset's RecBole config (field mapping and the plugin's ``category_field``).

    ``load_col`` holds only what the models need (no rating: every row is an implicit
    positive)."""
    lines = []
    if command:
        lines.append(f"# Written by: {command}")
    lines += [
        "# Field mapping of the converted dataset (dataset_scripts/, docs/datasets.md).",
        f"USER_ID_FIELD: {USER}",
        f"ITEM_ID_FIELD: {ITEM}",
        f"TIME_FIELD: {TIME}",
    ]
    if has_rating:
        lines.append(
            f"# The .inter file also has '{RATING}'; it is not loaded (implicit feedback)."
        )
    lines.append("load_col:")
    lines.append(f"  inter: [{USER}, {ITEM}, {TIME}]")
    if has_categories:
        lines.append(f"  item: [{ITEM}, {CATEGORIES}]")
        if has_brand:
            lines.append(
                f"# The .item file also has '{BRAND}' (add it to load_col.item to use it)."
            )
        lines.append(f"category_field: {CATEGORIES}")
        lines.append(
            "# Items without categories are not in the .item file; RecBole would drop their\n"
            "# interactions by default (filter_inter_by_user_or_item: True). Keep them:"
        )
        lines.append("filter_inter_by_user_or_item: False")
    else:
        lines.append(
            "# No category metadata exists for this dataset (no .item file), so the\n"
            "# diversity metrics (CC, ILD, F1) are unavailable on it."
        )
        lines.append("category_field: ~")
    return "\n".join(lines) + "\n"


def write_atomic(
    files: Mapping[str, "str | Callable[[io.TextIOBase], None]"],
    overwrite: bool = False,
    remove: Iterable[str] = (),
) -> None:
    """Write several files all-or-nothing.

    ``files`` maps target paths to their text (or to a function writing into an open text
    file). Each is first written to a temporary file in its target folder; only when all
    are complete are they renamed into place with ``os.replace``. Without ``overwrite``, an
    existing target is an error (checked before and again just before renaming). Paths in
    ``remove`` (stale files of an older version) are deleted after the renames.
    """
    targets = list(files)
    if not overwrite:
        _refuse_existing(targets)
    temps: Dict[str, str] = {}
    try:
        for target, content in files.items():
            folder = os.path.dirname(os.path.abspath(target))
            os.makedirs(folder, exist_ok=True)
            fd, tmp = tempfile.mkstemp(
                dir=folder, prefix="." + os.path.basename(target) + ".", suffix=".tmp"
            )
            temps[target] = tmp
            os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp creates 0600 files
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
                if callable(content):
                    content(f)
                else:
                    f.write(content)
        if not overwrite:
            _refuse_existing(targets)
        for target in targets:
            os.replace(temps.pop(target), target)
    finally:
        for tmp in temps.values():
            try:
                os.unlink(tmp)
            except OSError:
                pass
    for path in remove:
        if path not in files and os.path.exists(path):
            os.unlink(path)


_UMASK = os.umask(0o022)
os.umask(_UMASK)


def _refuse_existing(targets: Iterable[str]) -> None:
    existing = [t for t in targets if os.path.exists(t)]
    if existing:
        raise ConversionError(
            f"{existing[0]} already exists; pass --overwrite to replace it"
        )


# ---------------------------------------------------------------------- pipeline


@dataclass
class Options:
    """Filtering options shared by the converters (see :func:`add_common_args`)."""

    k: int = 5
    item_k: Optional[int] = None
    min_rating: Optional[float] = None
    implicit: bool = False
    keep_duplicates: bool = False


@dataclass
class Converted:
    """The result of :func:`convert`: the final interactions and ``.item`` rows."""

    inter: pd.DataFrame
    item_rows: List[Tuple[str, List[str], Optional[str]]]
    with_brand: bool = False
    stats: Dict[str, float] = field(default_factory=dict)


def convert(
    inter: pd.DataFrame,
    categories: Optional[Mapping[str, List[str]]] = None,
    brands: Optional[Mapping[str, str]] = None,
    options: Optional[Options] = None,
) -> Converted:
    """Filter, order, de-duplicate and k-core the parsed interactions; build the item rows
    (only interacted items with categories)."""
    opts = options or Options()
    df = inter
    if opts.min_rating is not None:
        if RATING not in df.columns:
            raise ConversionError("--min_rating given but the source has no ratings")
        df = df[df[RATING] >= opts.min_rating]
    if opts.implicit and RATING in df.columns:
        df = df.drop(columns=[RATING])
    df = chronological(df)
    if not opts.keep_duplicates:
        df = drop_duplicates(df)
    df = k_core(df, opts.k, opts.item_k)
    if df.empty:
        raise ConversionError(
            "no interaction left after filtering "
            f"(k-core {opts.k}/{opts.item_k if opts.item_k is not None else opts.k}, "
            f"min rating {opts.min_rating}); lower --k_core / --min_rating"
        )
    rows = item_table(df[ITEM].unique(), categories or {}, brands)
    result = Converted(df, rows, with_brand=brands is not None)
    result.stats = statistics(df, rows)
    return result


def statistics(df: pd.DataFrame, item_rows) -> Dict[str, float]:
    users, items = int(df[USER].nunique()), int(df[ITEM].nunique())
    return {
        "users": users,
        "items": items,
        "interactions": int(len(df)),
        "density": len(df) / (users * items) if users and items else 0.0,
        "items_with_categories": len(item_rows),
        "categories": len({c for _, cats, _ in item_rows for c in cats}),
    }


def write_dataset(
    result: Converted,
    output_dir: str,
    name: str,
    overwrite: bool = False,
    command: Optional[str] = None,
) -> Dict[str, str]:
    """Write ``<output_dir>/<name>/<name>.{inter,item,yaml}`` atomically.

    Returns the written paths. Without categories no ``.item`` file is written (and a
    stale one is removed on ``--overwrite``)."""
    _check_name(name)
    folder = os.path.join(output_dir, name)
    paths = {
        ext: os.path.join(folder, f"{name}.{ext}") for ext in ("inter", "item", "yaml")
    }
    if not overwrite:
        _refuse_existing(paths.values())
    has_categories = bool(result.item_rows)
    df = result.inter
    files = {
        paths["inter"]: lambda f: f.write(inter_text(df)),
        paths["yaml"]: dataset_yaml(
            has_categories, result.with_brand, RATING in df.columns, command
        ),
    }
    if has_categories:
        files[paths["item"]] = item_text(result.item_rows, result.with_brand)
    created = not os.path.isdir(folder)
    try:
        write_atomic(files, overwrite=overwrite, remove=[paths["item"]])
    except BaseException as exc:
        if created and os.path.isdir(folder) and not os.listdir(folder):
            os.rmdir(folder)
        if isinstance(exc, OSError):
            raise ConversionError(f"cannot write {folder}: {exc}") from None
        raise
    return {k: v for k, v in paths.items() if v in files}


def _check_name(name: str) -> None:
    if not name or name in (".", "..") or re.search(r"[\\/\s]", name):
        raise ConversionError(
            f"invalid --name {name!r}: use a plain folder name without spaces or slashes"
        )


def summary_text(stats: Mapping[str, float], bad: Optional[BadLines] = None) -> str:
    text = (
        f"users: {stats['users']:,}  items: {stats['items']:,}  "
        f"interactions: {stats['interactions']:,}  "
        f"categories: {stats['categories']:,} "
        f"({stats['items_with_categories']:,} items have categories)  "
        f"density: {100 * stats['density']:.4f}%"
    )
    if bad is not None and bad.count:
        text += f"\nskipped {bad.count:,} malformed line(s); first: {bad.first}"
    return text


# -------------------------------------------------------------------------- CLI


def add_common_args(parser: argparse.ArgumentParser, ratings: bool = True) -> None:
    parser.add_argument(
        "--output_dir",
        default="dataset",
        help="folder that receives <name>/ (RecBole's data_path; default: dataset)",
    )
    parser.add_argument(
        "--name",
        required=True,
        help="dataset name: the folder and file names, and RecBole's --dataset",
    )
    parser.add_argument(
        "--k_core",
        type=int,
        default=5,
        help="drop users and items with fewer interactions, iterated to a fixed point "
        "(default 5; PAtt uses 10; 0 disables)",
    )
    parser.add_argument(
        "--item_k_core",
        type=int,
        default=None,
        help="a different threshold for items (default: --k_core)",
    )
    if ratings:
        parser.add_argument(
            "--min_rating",
            type=float,
            default=None,
            help="keep only interactions rated at least this (default: keep all)",
        )
        parser.add_argument(
            "--implicit",
            action="store_true",
            help="do not write the rating column (every row is an implicit positive)",
        )
    parser.add_argument(
        "--keep_duplicates",
        action="store_true",
        help="keep repeated (user, item) pairs (default: keep only the earliest)",
    )
    parser.add_argument(
        "--skip-bad-lines",
        "--skip_bad_lines",
        dest="skip_bad_lines",
        action="store_true",
        help="skip malformed input lines (and report their number) instead of failing",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing converted dataset of the same name",
    )


def options_from_args(args: argparse.Namespace) -> Options:
    if args.k_core < 0 or (args.item_k_core is not None and args.item_k_core < 0):
        raise ConversionError("--k_core and --item_k_core must be >= 0")
    return Options(
        k=args.k_core,
        item_k=args.item_k_core,
        min_rating=getattr(args, "min_rating", None),
        implicit=getattr(args, "implicit", False),
        keep_duplicates=args.keep_duplicates,
    )


def check_fresh(args: argparse.Namespace) -> None:
    """Fail fast (before parsing large inputs) when the dataset exists already."""
    _check_name(args.name)
    if not args.overwrite:
        folder = os.path.join(args.output_dir, args.name)
        _refuse_existing(
            os.path.join(folder, f"{args.name}.{ext}")
            for ext in ("inter", "item", "yaml")
        )


def finish(
    result: Converted,
    args: argparse.Namespace,
    bad: Optional[BadLines],
    script: str,
    argv: Optional[List[str]] = None,
) -> None:
    """Write the dataset (the yaml records the command) and print the summary."""
    argv = sys.argv[1:] if argv is None else argv
    script = os.path.join(os.path.basename(SCRIPTS_DIR), os.path.basename(script))
    command = " ".join(shlex.quote(a) for a in ["python", script, *argv])
    paths = write_dataset(result, args.output_dir, args.name, args.overwrite, command)
    print(f"wrote {', '.join(paths.values())}")
    print(summary_text(result.stats, bad))


def run_main(main: Callable[[Optional[List[str]]], None], argv=None) -> int:
    """Run a script's main; a :class:`ConversionError` becomes ``error: ...`` on stderr and
    exit status 2 (no traceback)."""
    try:
        main(argv)
    except ConversionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


# ------------------------------------------------------------------- converter_hint

_SEQ_DATASETS = {
    # name: (raw folder, sequence file, attribute file or None, where the files come from)
    "Office": (
        "office",
        "Office_Products.txt",
        None,
        "zfan20/GraphDA or zfan20/STOSA data/",
    ),
    "Tools": (
        "tools",
        "Tools_and_Home_Improvement.txt",
        None,
        "zfan20/GraphDA data/",
    ),
    "Beauty": (
        "beauty",
        "Beauty.txt",
        "Beauty_item2attributes.json",
        "aHuiWang/CIKM2020-S3Rec data/",
    ),
    "Sports": (
        "sports",
        "Sports_and_Outdoors.txt",
        "Sports_and_Outdoors_item2attributes.json",
        "aHuiWang/CIKM2020-S3Rec data/",
    ),
    "Toys": (
        "toys",
        "Toys_and_Games.txt",
        "Toys_and_Games_item2attributes.json",
        "aHuiWang/CIKM2020-S3Rec data/",
    ),
}


def _shown(path: str, cwd: str) -> str:
    """A shared raw file as a path relative to ``cwd`` when it exists, else None."""
    full = os.path.normpath(os.path.join(SHARED_RAW_DIR, path))
    if not os.path.isfile(full):
        return None
    try:
        return shlex.quote(os.path.relpath(full, cwd))
    except ValueError:  # another drive on Windows
        return shlex.quote(full)


def converter_hint(name: str, data_path: str, cwd: Optional[str] = None) -> str:
    """The command that creates dataset ``name`` under ``data_path`` (RecBole's
    ``data_path``, the converters' ``--output_dir``).

    Known names (Office, Tools, Beauty, Sports, Toys, ml-1m, anime; matched
    case-insensitively, the given spelling is kept for ``--name``) get one exact command
    line: it points at the team's shared raw files when they exist (``../shared/datasets/
    raw``), else at ``<path/to/...>`` placeholders for the files the user must download.
    Paths are shown relative to ``cwd`` (default: the current directory). Other names get
    a generic multi-line hint listing the four converters.
    """
    cwd = os.path.abspath(cwd or os.getcwd())
    script = lambda s: shlex.quote(  # noqa: E731
        os.path.relpath(os.path.join(SCRIPTS_DIR, s), cwd)
    )
    tail = f"--name {shlex.quote(name)} --output_dir {shlex.quote(str(data_path))}"
    known = {k.lower(): k for k in [*_SEQ_DATASETS, "ml-1m", "anime", "ml-100k"]}
    key = known.get(name.lower())
    if key in _SEQ_DATASETS:
        folder, seq, attrs, _origin = _SEQ_DATASETS[key]
        cmd = f"python {script('seqfile.py')} --sequences "
        cmd += _shown(os.path.join(folder, seq), cwd) or f"<path/to/{seq}>"
        if attrs:
            cmd += " --attributes "
            cmd += _shown(os.path.join(folder, attrs), cwd) or f"<path/to/{attrs}>"
        return f"{cmd} {tail}"
    if key == "ml-1m":
        movies = _shown("ml-1m/movies.dat", cwd) or "<path/to/ml-1m/movies.dat>"
        return (
            f"python {script('movielens.py')} --ratings <path/to/ml-1m/ratings.dat> "
            f"--movies {movies} {tail}"
        )
    if key == "anime":
        anime = _shown("anime/anime.csv", cwd) or "<path/to/anime.csv>"
        return (
            f"python {script('anime.py')} --ratings <path/to/rating.csv> "
            f"--anime {anime} {tail}"
        )
    if key == "ml-100k":
        return (
            "ml-100k ships with RecBole (recbole/dataset_example/ml-100k) and needs no "
            "conversion"
        )
    return (
        f"no converter is registered for dataset {name!r}; convert raw files into "
        f"{os.path.join(str(data_path), name)}/ with one of:\n"
        f"  python {script('amazon.py')} --reviews <reviews_*_5.json.gz|ratings_*.csv|"
        f"*_5.json> [--meta <meta_*.json.gz>] {tail}\n"
        f"  python {script('seqfile.py')} --sequences <uid i1 i2 ... file> "
        f"[--attributes <*_item2attributes.json>] {tail}\n"
        f"  python {script('movielens.py')} --ratings <ratings.dat> "
        f"--movies <movies.dat> {tail}\n"
        f"  python {script('anime.py')} --ratings <rating.csv> --anime <anime.csv> "
        f"{tail}\n"
        "(see docs/datasets.md)"
    )
