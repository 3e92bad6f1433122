"""
experiments.synthetic
#####################

A small synthetic dataset in RecBole's atomic-file format (with item categories), for the
tests and for the ``--quick`` modes of the benchmarks: runs in seconds on a CPU, exercises
the whole pipeline, carries no meaning.
"""

import os

import numpy as np


def write_synthetic_dataset(
    root,
    name="tiny",
    n_users=60,
    n_items=40,
    n_categories=6,
    seed=0,
    category_field="categories",
):
    """Write ``root/name/name.inter`` and ``name.item``; returns the folder.

    Users have 6-16 time-ordered interactions (no repeats); items 1..n_items have 1-3 of
    ``n_categories`` categories, except every 10th item, which is uncategorized (left out of
    the .item file, as our converters do).
    """
    rng = np.random.default_rng(seed)
    folder = os.path.join(root, name)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"{name}.inter"), "w") as f:
        f.write("user_id:token\titem_id:token\ttimestamp:float\n")
        for u in range(1, n_users + 1):
            length = int(rng.integers(6, 17))
            items = rng.choice(np.arange(1, n_items + 1), size=length, replace=False)
            for t, i in enumerate(items):
                f.write(f"u{u}\ti{i}\t{1000 * u + t}\n")
    with open(os.path.join(folder, f"{name}.item"), "w") as f:
        f.write(f"item_id:token\t{category_field}:token_seq\n")
        for i in range(1, n_items + 1):
            if i % 10 == 0:
                continue
            k = int(rng.integers(1, 4))
            cats = rng.choice(n_categories, size=k, replace=False)
            f.write(f"i{i}\t{' '.join(f'c{c}' for c in sorted(cats))}\n")
    return folder


#: Amazon Beauty (5-core, the STOSA/S3-Rec file): 22,363 users, 198,502 interactions
BEAUTY_MEAN_LENGTH = 198502 / 22363


def zipf_popularity(n_items, exponent, rng):
    """``[n_items]`` probabilities of items 1..n_items: the item of popularity rank r
    (ranks in random order over the ids) has probability proportional to r^-exponent."""
    weights = np.arange(1, n_items + 1, dtype=np.float64) ** -float(exponent)
    weights = weights[rng.permutation(n_items)]
    return weights / weights.sum()


def sequence_lengths(
    n_users, rng, min_length=5, mean_length=BEAUTY_MEAN_LENGTH, max_length=200
):
    """``[n_users]`` lengths like those of a 5-core Amazon dataset: ``min_length`` plus a
    geometric tail with the given mean, cut at ``max_length``."""
    extra = float(mean_length) - min_length
    if extra <= 0:
        return np.full(n_users, min_length, dtype=np.int64)
    tail = rng.geometric(1.0 / (extra + 1.0), size=n_users) - 1
    return np.minimum(min_length + tail, max_length).astype(np.int64)


def _distinct_draws(lengths, probabilities, rng):
    """Per user, ``lengths[u]`` distinct items drawn by ``probabilities`` (draws with
    replacement, repeats of a user's items redrawn until every user has their count),
    in draw order: ``(user index, item index)`` arrays, grouped by user."""
    n_items = len(probabilities)
    users = np.repeat(np.arange(len(lengths)), lengths)
    items = rng.choice(n_items, size=len(users), p=probabilities)
    for _ in range(100):
        key = users * n_items + items
        _, first = np.unique(key, return_index=True)
        repeated = np.ones(len(key), dtype=bool)
        repeated[first] = False
        if not repeated.any():
            break
        items[repeated] = rng.choice(n_items, size=int(repeated.sum()), p=probabilities)
    else:
        raise ValueError(
            "cannot draw that many distinct items per user: lower the exponent or the "
            "lengths, or use more items"
        )
    return users, items


def write_zipf_dataset(
    root,
    name,
    n_users,
    n_items,
    exponent=1.0,
    min_length=5,
    mean_length=BEAUTY_MEAN_LENGTH,
    max_length=200,
    n_categories=0,
    seed=0,
    category_field="categories",
):
    """Write a synthetic RecBole dataset ``root/name/name.inter`` and ``name.item`` of any
    size, for scale benchmarks; returns the folder.

    Item popularity is Zipf (:func:`zipf_popularity`, ``exponent``), sequence lengths are
    5-core-Amazon-like (:func:`sequence_lengths`: at least ``min_length``, mean
    ``mean_length``, Beauty's 8.9 by default), each user's items are distinct, in time
    order. The .item file lists all ``n_items`` items (the catalogue RecBole ranks, drawn
    or not); with ``n_categories`` it has a ``category_field`` column: every item has 1
    to 3 distinct categories drawn uniformly. Tokens: users ``u<k>``, items ``i<k>``,
    categories ``c<k>``; load the .item file (``load_col``) for the whole catalogue.
    """
    rng = np.random.default_rng(seed)
    lengths = sequence_lengths(n_users, rng, min_length, mean_length, max_length)
    if int(lengths.max()) > n_items:
        raise ValueError(
            f"sequences of {lengths.max()} items need more than {n_items} items"
        )
    users, items = _distinct_draws(
        lengths, zipf_popularity(n_items, exponent, rng), rng
    )
    folder = os.path.join(root, name)
    os.makedirs(folder, exist_ok=True)
    steps = np.arange(len(users)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    _write_columns(
        os.path.join(folder, f"{name}.inter"),
        "user_id:token\titem_id:token\ttimestamp:float",
        [
            np.char.add("u", (users + 1).astype(str)),
            np.char.add("i", (items + 1).astype(str)),
            (users.astype(np.int64) * 1000 + steps).astype(str),
        ],
    )
    # the .item file lists every item, so that the catalogue has n_items items
    item_tokens = np.char.add("i", np.arange(1, n_items + 1).astype(str))
    if n_categories:
        counts = rng.integers(1, min(3, n_categories) + 1, size=n_items)
        cats = [
            " ".join(
                f"c{c}" for c in sorted(rng.choice(n_categories, k, replace=False))
            )
            for k in counts
        ]
        header, columns = f"item_id:token\t{category_field}:token_seq", [np.array(cats)]
    else:
        header, columns = "item_id:token", []
    _write_columns(
        os.path.join(folder, f"{name}.item"), header, [item_tokens, *columns]
    )
    return folder


def _write_columns(path, header, columns):
    """A tab-separated file of string ``columns`` under ``header``, written at once."""
    lines = columns[0]
    for column in columns[1:]:
        lines = np.char.add(np.char.add(lines, "\t"), column)
    with open(path, "w") as f:
        f.write(header + "\n")
        f.write("\n".join(lines.tolist()))
        f.write("\n")
