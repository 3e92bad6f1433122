"""
recbole_attn.data.synthetic
###########################

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
