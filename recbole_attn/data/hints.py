"""
recbole_attn.data.hints
#######################

The command line that creates a missing dataset, for the pipeline's "dataset not found"
error (:func:`converter_hint`). It names the converters in ``<repo>/dataset_scripts/`` but
imports nothing from there: that folder is not shipped with an installed package.
"""

import os
import shlex
from typing import Optional

REPO_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: The converter scripts of a checkout (not part of an installed package).
SCRIPTS_DIR = os.path.join(REPO_DIR, "dataset_scripts")
#: Where the team's shared raw files live, relative to the repository.
SHARED_RAW_DIR = os.path.join(REPO_DIR, os.pardir, "shared", "datasets", "raw")

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
    a generic multi-line hint listing the four converters. Outside a source checkout
    (an installed package has no ``dataset_scripts/``) the hint says where they are.
    """
    if not os.path.isdir(SCRIPTS_DIR):
        return (
            f"convert the raw files of {name!r} into {os.path.join(str(data_path), name)}/"
            " with the converters in dataset_scripts/ of the recbole_attn source "
            "repository (amazon.py, seqfile.py, movielens.py, anime.py; "
            "docs/datasets.md)"
        )
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
