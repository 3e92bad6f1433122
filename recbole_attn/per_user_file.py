"""The per-user file of ``recbole-attn evaluate --per_user=FILE`` (docs/compare.md): plain
CSV, with what was evaluated in ``FILE.json`` beside it; read without torch or RecBole.
"""

import csv
import io
import json
import math
import os

from recbole_attn.errors import RecboleAttnError
from recbole_attn.files import read_text, write_files

#: the first characters of a per-user file of the first layout (metadata in line 1)
MARK = "# recbole-attn per-user results "
FORMAT = "recbole-attn per-user results"
EXTENSION = ".csv"

#: the range of each metric's per-user value (RecBole's top-K metrics, ours, and
#: RecBole's popularity metrics); other columns must be finite
RANGES = {
    **dict.fromkeys(
        "recall ndcg mrr hit precision map cc ild tailpercentage".split(), (0.0, 1.0)
    ),
    "averagepopularity": (0.0, math.inf),
}


class PerUserFileError(RecboleAttnError, ValueError):
    """A file that is not a per-user file, or one whose values cannot be compared."""


def meta_path(path):
    """The metadata file beside the per-user file ``path``."""
    return str(path) + ".json"


def check_extension(path, flag="--per_user"):
    """A :class:`PerUserFileError` unless ``path`` names a ``.csv`` file."""
    if os.path.splitext(str(path))[1].lower() != EXTENSION:
        raise PerUserFileError(
            f"{flag}={path}: per-user results are written as CSV (with their metadata "
            f"in {os.path.basename(meta_path(path))} beside it); give a file name "
            f"ending in {EXTENSION}"
        )


def write_per_user(path, header, rows, meta, overwrite=False):
    """Write ``path`` and its metadata file, both or neither."""
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows([header, *rows])
    meta_text = json.dumps({"format": FORMAT, **meta}, indent=1, sort_keys=True) + "\n"
    write_files(
        {str(path): text.getvalue(), meta_path(path): meta_text},
        "the per-user results",
        overwrite,
    )
    return str(path)


def _not_one(path, why):
    return PerUserFileError(
        f"{path} is not a per-user file of recbole-attn evaluate --per_user ({why})"
    )


def _read_meta(path):
    """The metadata of ``path`` from its metadata file."""
    sidecar = meta_path(path)
    csv_path = str(path).removesuffix(".json")
    if csv_path != str(path) and os.path.isfile(csv_path):
        raise _not_one(path, f"it is the metadata of {csv_path}: give that .csv file")
    if not os.path.exists(sidecar):
        raise _not_one(
            path,
            f"no {os.path.basename(sidecar)} beside it, which says what was evaluated; "
            "evaluate --per_user writes the two together: keep them together",
        )
    try:
        meta = json.loads(read_text(sidecar, "per-user metadata file"))
    except ValueError as err:
        raise _not_one(path, f"{sidecar} is not JSON: {err}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise _not_one(path, f"{sidecar} is not its metadata (no format {FORMAT!r})")
    return meta


def read_per_user(path):
    """``(meta, header, rows)`` of a per-user file (either layout), cells as text."""
    text = read_text(path, "per-user file")
    if text.startswith(MARK):  # the first layout: the metadata in line 1
        first, _, text = text.partition("\n")
        try:
            meta = json.loads(first[len(MARK) :])
        except ValueError as err:
            raise _not_one(path, f"its first line is not JSON: {err}") from None
        if not isinstance(meta, dict):
            raise _not_one(
                path,
                f"its first line holds a JSON {type(meta).__name__}, not an object",
            )
        offset = 2
    else:
        meta, offset = _read_meta(path), 1
    try:
        table = list(csv.reader(io.StringIO(text)))
    except csv.Error as err:
        raise _not_one(path, f"not CSV: {err}") from None
    lines = [offset + i for i, row in enumerate(table) if row]
    table = [row for row in table if row]
    if not table or table[0][:2] != ["user", "rank"]:
        raise _not_one(path, "its header does not start with user,rank")
    header, rows = table[0], table[1:]
    check_table(path, header, rows, lines[1:])
    return meta, header, rows


def metric_range(column):
    """``(low, high)`` of a column ``name@k``'s values (None: any finite number)."""
    return RANGES.get(column.split("@", 1)[0].lower())


def check_table(path, header, rows, lines=None):
    """A :class:`PerUserFileError` naming the line and column unless compare can use it."""
    lines = lines or [i + 2 for i in range(len(rows))]
    if twice := sorted({c for c in header if header.count(c) > 1}):
        raise PerUserFileError(
            f"{path}: the column {twice[0]} appears {header.count(twice[0])} times in "
            "its header; a per-user file has one column per metric"
        )
    seen = {}
    for line, row in zip(lines, rows):
        where = f"{path}, line {line}"
        if len(row) != len(header):
            raise PerUserFileError(
                f"{where}: {len(row)} cells where the header has {len(header)}"
            )
        user = row[0]
        if not user.strip():
            raise PerUserFileError(f"{where}: no user")
        if user in seen:
            raise PerUserFileError(
                f"{where}: user {user} again (first on line {seen[user]}); a per-user "
                "file has one row per user"
            )
        seen[user] = line
        rank = row[1].strip()
        if not (rank.isdigit() and int(rank) >= 1):
            raise PerUserFileError(
                f"{where}: rank {row[1]!r} is not an integer >= 1 (the target's place "
                "in the ranking)"
            )
        for column, cell in zip(header[2:], row[2:]):
            if cell.strip() == "":
                continue
            try:
                value = float(cell)
            except ValueError:
                value = None
            bounds = metric_range(column)
            if value is None or not math.isfinite(value):
                raise PerUserFileError(
                    f"{where}: {column} {cell!r} is not a finite number"
                )
            if bounds and not bounds[0] <= value <= bounds[1]:
                raise PerUserFileError(
                    f"{where}: {column} {cell} is outside [{bounds[0]:g}, "
                    f"{bounds[1]:g}], the range of {column.split('@')[0]}"
                )


def table_values(header, rows):
    """``{user: {column: float}}`` of a checked table (an empty cell: NaN)."""
    return {
        row[0]: {
            column: float(cell) if cell.strip() else float("nan")
            for column, cell in zip(header[1:], row[1:])
        }
        for row in rows
    }
