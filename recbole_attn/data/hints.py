"""The ``recbole-attn convert`` command line that creates a missing dataset
(:func:`converter_hint`), with ``<path/to/...>`` placeholders for the raw files."""

import shlex

from recbole_attn.data.convert import CONVERTERS

#: S3Rec's datasets: name -> the stem of its sequence and attribute files
_S3REC = {"Beauty": "Beauty", "Sports": "Sports_and_Outdoors", "Toys": "Toys_and_Games"}
_S3REC_DATA = "aHuiWang/CIKM2020-S3Rec data/"
_SEQ_DATASETS = {
    # name: (sequence file, attribute file or None, where the files come from)
    "Office": ("Office_Products.txt", None, "zfan20/GraphDA or zfan20/STOSA data/"),
    "Tools": ("Tools_and_Home_Improvement.txt", None, "zfan20/GraphDA data/"),
    **{
        name: (f"{stem}.txt", f"{stem}_item2attributes.json", _S3REC_DATA)
        for name, stem in _S3REC.items()
    },
}

#: the SASRec authors' 'user item' files: name -> (file, where it comes from)
_PAIR_DATASETS = {"Games": ("Video.txt", "kang205/SASRec data/")}

CONVERT = "recbole-attn convert"


def converter_hint(name: str, data_path: str) -> str:
    """The command that creates dataset ``name`` (known names case-insensitively, with
    their raw files) under ``data_path``."""
    tail = f"--name {shlex.quote(name)} --output_dir {shlex.quote(str(data_path))}"
    known = {
        k.lower(): k
        for k in [*_SEQ_DATASETS, *_PAIR_DATASETS, "ml-1m", "anime", "ml-100k"]
    }
    key = known.get(name.lower())
    if key in _SEQ_DATASETS:
        seq, attrs, origin = _SEQ_DATASETS[key]
        cmd = f"{CONVERT} seqfile --sequences <path/to/{seq}>"
        if attrs:
            cmd += f" --attributes <path/to/{attrs}>"
        return f"{cmd} {tail} (the raw files: {origin})"
    if key in _PAIR_DATASETS:
        interactions, origin = _PAIR_DATASETS[key]
        return (
            f"{CONVERT} pairs --interactions <path/to/{interactions}> {tail} "
            f"(the raw file: {origin})"
        )
    if key == "ml-1m":
        return (
            f"{CONVERT} movielens --ratings <path/to/ml-1m/ratings.dat> "
            f"--movies <path/to/ml-1m/movies.dat> {tail}"
        )
    if key == "anime":
        return (
            f"{CONVERT} anime --ratings <path/to/rating.csv> "
            f"--anime <path/to/anime.csv> {tail}"
        )
    if key == "ml-100k":
        return (
            "ml-100k ships with RecBole (recbole/dataset_example/ml-100k) and needs no "
            "conversion; leave --data_path unset to use it"
        )
    return (
        f"{CONVERT} {{{','.join(CONVERTERS)}}} <raw files> {tail} (Amazon "
        "reviews, sequence files, 'user item' files, MovieLens, Anime; recbole-attn "
        "convert --help)"
    )
