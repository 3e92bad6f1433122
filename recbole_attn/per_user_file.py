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


#: a user's value of each of RecBole's top-K metrics when its one target is at place
#: ``p`` of the ranking and the cutoff is ``k`` (0 beyond it): every per-user row's
#: values follow from its rank
FROM_PLACE = {
    "hit": lambda p, k: 1.0,
    "recall": lambda p, k: 1.0,
    "ndcg": lambda p, k: 1.0 / math.log2(p + 1),
    "mrr": lambda p, k: 1.0 / p,
    "map": lambda p, k: 1.0 / p,
    "precision": lambda p, k: 1.0 / k,
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
        _check_row_against_rank(where, header, row, int(rank))


def _rank_columns(header):
    """``[(index, column, metric function, k)]`` of the columns that follow from the
    rank (:data:`FROM_PLACE`)."""
    columns = []
    for index, column in enumerate(header[2:], 2):
        name, _, k = column.partition("@")
        if name.lower() in FROM_PLACE and k.isdigit() and int(k) >= 1:
            columns.append((index, column, FROM_PLACE[name.lower()], int(k)))
    return columns


def _agrees(row, columns, place):
    """The first column of ``row`` whose value is not the one of its target at
    ``place`` (``None``: beyond every cutoff), or ``None`` when all agree."""
    for index, column, value_at, k in columns:
        cell = row[index].strip()
        if not cell:
            continue
        expected = value_at(place, k) if place is not None and place <= k else 0.0
        if not math.isclose(float(cell), expected, rel_tol=1e-9, abs_tol=1e-12):
            return column, expected
    return None


def _check_row_against_rank(where, header, row, rank):
    """Every top-K metric of ``row`` is its value at the target's ``rank``, or at a
    place below it among the items that scored the same as the target (the metrics
    rank ties in any order; ``rank`` counts only the items that scored higher)."""
    columns = _rank_columns(header)
    wrong = _agrees(row, columns, rank) if columns else None
    if wrong is None:
        return
    deepest = max(k for *_, k in columns)
    for place in [*range(rank + 1, deepest + 1), None]:
        if _agrees(row, columns, place) is None:
            return
    column, expected = wrong
    raise PerUserFileError(
        f"{where}: {column} {row[header.index(column)]} disagrees with the row's rank "
        f"{rank}, which gives {expected:.6g}; every top-K value follows from the rank: "
        "evaluate the model again (recbole-attn evaluate --per_user=FILE) instead of "
        "editing the file"
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
