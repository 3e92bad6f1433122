"""Cleaning and filtering of the parsed interactions (:func:`convert`: ``--min_rating``,
stable time order, first of repeated pairs, iterated k-core), the ``.item`` rows and the
category tokens (inner whitespace -> ``_``; an item without category has no ``.item``
row); docs/datasets.md."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

import numpy as np
import pandas as pd

from recbole_attn.data.convert.read import ITEM, RATING, TIME, USER, ConversionError

_WHITESPACE = re.compile(r"\s+")


def clean_token(name) -> Optional[str]:
    """A name as a RecBole token (stripped, inner whitespace -> ``_``), None if empty."""
    if name is None:
        return None
    token = _WHITESPACE.sub("_", str(name).strip())
    return token or None


def clean_tokens(names: Iterable) -> List[str]:
    tokens = (clean_token(name) for name in names)
    return list(dict.fromkeys(token for token in tokens if token is not None))


def chronological(df: pd.DataFrame) -> pd.DataFrame:
    """Users in order of first appearance, each one's rows stably sorted by time."""
    user_code = pd.factorize(df[USER])[0]
    order = np.lexsort((df[TIME].to_numpy(), user_code))  # lexsort is stable
    return df.iloc[order].reset_index(drop=True)


def drop_duplicates(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop_duplicates(subset=[USER, ITEM], keep="first").reset_index(drop=True)


def k_core(df: pd.DataFrame, k: int, item_k: Optional[int] = None) -> pd.DataFrame:
    """Iterated k-core on users (``k``) and items (``item_k``), row order kept; ``<=
    1``: off."""
    item_k = k if item_k is None else item_k
    passes = 0
    while True:
        keep = np.ones(len(df), dtype=bool)
        if k > 1:
            keep &= df.groupby(USER)[USER].transform("size").to_numpy() >= k
        if item_k > 1:
            keep &= df.groupby(ITEM)[ITEM].transform("size").to_numpy() >= item_k
        if keep.all():
            break
        df = df[keep]
        passes += 1
    df = df.reset_index(drop=True)
    df.attrs["k_core_passes"] = passes
    return df


def _natural_key(token: str):
    return (0, int(token), "") if token.isdigit() else (1, 0, token)


def item_table(
    items: Iterable[str],
    categories: Mapping[str, List[str]],
    brands: Optional[Mapping[str, str]] = None,
) -> List[Tuple[str, List[str], Optional[str]]]:
    """Rows ``(item, category tokens, brand)`` of the interacted items with categories."""
    brands = brands or {}
    return [
        (item, list(categories[item]), brands.get(item))
        for item in sorted(set(items), key=_natural_key)
        if categories.get(item)
    ]


@dataclass
class Options:

    k: int = 5
    item_k: Optional[int] = None
    min_rating: Optional[float] = None
    implicit: bool = False
    keep_duplicates: bool = False


@dataclass
class Converted:

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
    """Filter, order, de-duplicate and k-core the interactions; build the item rows."""
    opts = options or Options()
    df = inter
    if df.empty:
        raise ConversionError(
            "the input holds no interaction (an empty file, only a header, or every line "
            "skipped as malformed)"
        )
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
