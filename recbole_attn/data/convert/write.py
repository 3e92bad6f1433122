"""Writing a converted dataset (``.inter``, ``.item``, ``.yaml``) all-or-nothing
(:func:`write_dataset`), the three files' text and the summary the converters print."""

from __future__ import annotations

import io
import os
import re
from typing import Callable, Dict, Iterable, Mapping, Optional

import numpy as np
import pandas as pd

from recbole_attn.data.convert.clean import Converted
from recbole_attn.data.convert.read import (
    BRAND,
    CATEGORIES,
    ITEM,
    RATING,
    TIME,
    USER,
    BadLines,
    ConversionError,
)
from recbole_attn.files import (
    _unlink_quietly,
    owner_gone,
    owner_tag,
    refuse_existing,
    write_files,
)


def _num(value: float) -> str:
    value = float(value)
    return str(int(value)) if value.is_integer() else repr(value)


def inter_text(df: pd.DataFrame) -> str:
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


def item_text(rows, with_brand: bool = False) -> str:
    header = [f"{ITEM}:token", f"{CATEGORIES}:token_seq", f"{BRAND}:token"]
    lines = [header] + [
        [str(item), " ".join(cats), brand or ""] for item, cats, brand in rows
    ]
    width = 3 if with_brand else 2
    return "".join("\t".join(line[:width]) + "\n" for line in lines)


def dataset_yaml(
    has_categories: bool,
    has_brand: bool = False,
    has_rating: bool = False,
    command: Optional[str] = None,
) -> str:
    """The dataset's RecBole config (field mapping, ``load_col``, ``category_field``)."""
    lines = [f"# Written by: {command}"] if command else []
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
    lines += ["load_col:", f"  inter: [{USER}, {ITEM}, {TIME}]"]
    if not has_categories:
        lines += [
            "# No category metadata exists for this dataset (no .item file), so the",
            "# diversity metrics (CC, ILD, F1) are unavailable on it.",
            "category_field: ~",
        ]
        return "\n".join(lines) + "\n"
    lines.append(f"  item: [{ITEM}, {CATEGORIES}]")
    if has_brand:
        lines.append(
            f"# The .item file also has '{BRAND}' (add it to load_col.item to use it)."
        )
    lines += [
        f"category_field: {CATEGORIES}",
        "# Items without categories are not in the .item file; RecBole would drop their",
        "# interactions by default (filter_inter_by_user_or_item: True). Keep them:",
        "filter_inter_by_user_or_item: False",
    ]
    return "\n".join(lines) + "\n"


def write_atomic(
    files: Mapping[str, "str | Callable[[io.TextIOBase], None]"],
    overwrite: bool = False,
    remove: Iterable[str] = (),
) -> None:
    """Write files all-or-nothing; without ``overwrite`` an existing one is an error."""
    write_files(
        files,
        "the conversion",
        overwrite=overwrite,
        remove=remove,
        error=ConversionError,
    )


def _refuse_existing(targets: Iterable[str]) -> None:
    refuse_existing(list(targets), "the conversion", error=ConversionError)


def write_dataset(
    result: Converted,
    output_dir: str,
    name: str,
    overwrite: bool = False,
    command: Optional[str] = None,
) -> Dict[str, str]:
    """Write the dataset's files all-or-nothing under a claim
    (:func:`clear_unfinished`), the yaml last."""
    _check_name(name)
    folder = os.path.join(output_dir, name)
    paths = dataset_paths(output_dir, name)
    clear_unfinished(output_dir, name)
    if not overwrite:
        _refuse_existing(paths.values())
    has_categories = bool(result.item_rows)
    df = result.inter
    files = {paths["inter"]: lambda f: f.write(inter_text(df))}
    if has_categories:
        files[paths["item"]] = item_text(result.item_rows, result.with_brand)
    files[paths["yaml"]] = dataset_yaml(  # last: a dataset without it is not done
        has_categories, result.with_brand, RATING in df.columns, command
    )
    created = not os.path.isdir(folder)
    try:
        os.makedirs(folder, exist_ok=True)
        marker = _claim(folder, name)
        try:
            write_atomic(files, overwrite=overwrite, remove=[paths["item"]])
        finally:
            _unlink_quietly(marker)
    except BaseException as exc:
        if created and os.path.isdir(folder) and not os.listdir(folder):
            os.rmdir(folder)
        if isinstance(exc, OSError):
            raise ConversionError(f"cannot write {folder}: {exc}") from None
        raise
    return {k: v for k, v in paths.items() if v in files}


def dataset_paths(output_dir: str, name: str) -> Dict[str, str]:
    folder = os.path.join(output_dir, name)
    return {
        ext: os.path.join(folder, f"{name}.{ext}") for ext in ("inter", "item", "yaml")
    }


def unfinished_marker(folder: str, name: str) -> str:
    return os.path.join(folder, f".{name}.converting")


def _claim(folder: str, name: str) -> str:
    marker = unfinished_marker(folder, name)
    try:
        with open(marker, "x", encoding="utf-8") as f:
            f.write(owner_tag() + "\n")
    except FileExistsError:
        raise ConversionError(
            f"{os.path.join(folder, name)} is being written by another conversion; "
            "wait for it, or choose another --name"
        ) from None
    return marker


def clear_unfinished(output_dir: str, name: str) -> None:
    """Remove what a killed conversion left; one still running is an error."""
    folder = os.path.join(output_dir, name)
    marker = unfinished_marker(folder, name)
    try:
        with open(marker, encoding="utf-8") as f:
            owner = f.read()
    except FileNotFoundError:
        return
    except OSError as err:
        raise ConversionError(f"cannot read {marker}: {err.strerror or err}") from None
    if not owner_gone(owner):
        raise ConversionError(
            f"{folder} is being written by another conversion (its claim: {marker}); "
            "wait for it, or choose another --name (remove the claim if no conversion "
            "runs)"
        )
    for path in dataset_paths(output_dir, name).values():
        _unlink_quietly(path)
    _unlink_quietly(marker)


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
