"""
recbole_attn.compat
###################

The fixes that RecBole 1.2.1 needs on today's stack (torch >= 2.6, numpy >= 2, pandas >=
3), as functions; :mod:`recbole_attn.host` says which of them ``import recbole_attn``
installs into RecBole, when, and why.

* Anomaly detection. RecBole 1.2.1's ``recbole/model/sequential_recommender/sine.py`` calls
  ``torch.autograd.set_detect_anomaly(True)`` at import time, and ``recbole.model`` imports
  it, so every RecBole training run (SASRec included) does autograd's debugging checks on
  every backward node (several times slower backward, measured on Office).
  :func:`undo_recbole_anomaly_detection` switches it off again.
* numpy 2. RecBole's ``Config.compatibility_settings`` re-creates numpy's removed aliases
  (``np.float``, ``np.int``, ...) from ``np.float_``, ``np.complex_`` and ``np.unicode_``,
  which numpy 2 removed too, so every ``Config()`` fails. RecBole's own code still uses the
  aliases (``np.float`` in its metrics, interactions and NaN filling), so
  :func:`set_numpy_aliases` gives them the values RecBole gives them, from numpy 2's names.
* pandas 3. Copy-on-Write makes RecBole's chained in-place fills
  (``df[field].fillna(x, inplace=True)``) no-ops, and ``Series.agg(len)`` over array
  cells returns the length of the Series instead of one length per cell.
  :func:`load_feat`, :func:`fill_nan`, :func:`remap` and :func:`benchmark_presets` are
  the methods of RecBole's ``Dataset`` and ``SequentialDataset`` that do either, with the same results by assignment and ``Series.map(len)``;
  :func:`refusing_float_seq` refuses what cannot be fixed that way.
* RecBole 1.2.1's own bugs, reported upstream after the release, that a run can reach:
  :mod:`recbole_attn.recbole_bugs`.
* Couplings. :data:`PRIVATE_OVERRIDES` lists every private RecBole method that the
  pipeline's own subclasses override (a test keeps the list complete);
  :func:`check_recbole_version` stops a run on any RecBole but :data:`RECBOLE_VERSION`.
"""

import functools
import warnings

import numpy as np
import pandas as pd
import torch

from recbole_attn.errors import RecboleAttnError

#: the RecBole release the fixes were written for (and checked against)
RECBOLE_VERSION = "1.2.1"

#: the private methods of RecBole's classes that recbole_attn's own subclasses override
#: (its pipeline's: ``AttnConfig``, ``AttnTrainer``, the checked datasets; never
#: installed into RecBole; the bucketed loader overrides torch's
#: ``DataLoader._index_sampler``): written for :data:`RECBOLE_VERSION`, so the pipeline
#: refuses another release (:func:`check_recbole_version`); a test checks that this list
#: is every such override and that RecBole still has each method
PRIVATE_OVERRIDES = {
    "recbole.config.configurator.Config": (
        "_convert_config_dict",
        "_init_device",
        "_load_cmd_line",
        "_load_config_files",
        "_merge_external_config_dict",
    ),
    "recbole.trainer.trainer.Trainer": (
        "_check_nan",
        "_full_sort_batch_eval",
        "_map_reduce",
        "_save_checkpoint",
        "_train_epoch",
        "_valid_epoch",
    ),
    "recbole.data.dataset.dataset.Dataset": ("_remove_duplication",),
}


def check_recbole_version():
    """A :class:`~recbole_attn.errors.RecboleAttnError` when the installed RecBole is not
    the release recbole_attn's pipeline was written for (its subclasses override
    :data:`PRIVATE_OVERRIDES`, which another release may rename or change)."""
    import recbole

    if recbole.__version__ != RECBOLE_VERSION:
        count = sum(len(m) for m in PRIVATE_OVERRIDES.values())
        raise RecboleAttnError(
            f"recbole_attn's pipeline overrides {count} private methods of RecBole "
            f"{RECBOLE_VERSION} (its Config, Trainer and Dataset), and RecBole "
            f"{recbole.__version__} is installed: pip install recbole=={RECBOLE_VERSION}"
        )


__all__ = [
    "PANDAS_3",
    "set_numpy_aliases",
    "load_feat",
    "fill_nan",
    "remap",
    "benchmark_presets",
    "refusing_float_seq",
    "undo_recbole_anomaly_detection",
    "silence_harmless_recbole_warnings",
]


def set_numpy_aliases():
    """What RecBole 1.2.1's ``Config.compatibility_settings`` does on numpy 1: set the
    numpy aliases its code reads (``np.float``, ``np.int``, ...), here from numpy 2's names
    (RecBole's own method reads ``np.float_``, ``np.complex_`` and ``np.unicode_``, which
    numpy 2 removed, and fails). recbole_attn requires numpy >= 2."""
    for name, value in {
        "bool": np.bool_,
        "int": np.int_,
        "float": np.float64,
        "complex": np.complex128,
        "object": np.object_,
        "str": np.str_,
        "long": np.int_,
        "unicode": np.str_,
    }.items():
        setattr(np, name, value)


#: pandas >= 3 (Copy-on-Write; ``Series.agg(len)`` aggregates; :func:`load_feat` & co.)
PANDAS_3 = int(pd.__version__.split(".")[0]) >= 3


def cell_lengths(series):
    """The length of every array cell of ``series`` (RecBole: ``series.agg(len)``, which
    pandas 3 turns into the length of the Series)."""
    return series.map(len).to_numpy()


# ---- pandas >= 3: RecBole 1.2.1's Dataset methods that pandas 3 changes, by assignment.
# recbole_attn.host installs them on RecBole's Dataset (pandas >= 3 only); on pandas 2
# RecBole's own methods run unchanged.


def load_feat(self, filepath, source):
    """RecBole's ``Dataset._load_feat`` (the atomic-file reader); the missing cells of
    ``token_seq`` and ``float_seq`` fields become empty sequences (RecBole fills them in
    place, which Copy-on-Write makes a no-op)."""
    from recbole.utils import FeatureSource, FeatureType

    load_col, unload_col = self._get_load_and_unload_col(source)
    if load_col == set():
        return None
    separator, encoding = self.config["field_separator"], self.config["encoding"]
    with open(filepath, "r", encoding=encoding) as f:
        head = f.readline()[:-1]
    columns, usecols, dtype = [], [], {}
    for field_type in head.split(separator):
        field, ftype = field_type.split(":")
        try:
            ftype = FeatureType(ftype)
        except ValueError:
            raise ValueError(f"Type {ftype} from field {field} is not supported.")
        if (load_col is not None and field not in load_col) or (
            unload_col is not None and field in unload_col
        ):
            continue
        if isinstance(source, FeatureSource) or source != "link":
            self.field2source[field] = source
            self.field2type[field] = ftype
            if not ftype.value.endswith("seq"):
                self.field2seqlen[field] = 1
            if "float" in ftype.value:
                self.field2bucketnum[field] = 2
        columns.append(field)
        usecols.append(field_type)
        dtype[field_type] = np.float64 if ftype == FeatureType.FLOAT else str
    if not columns:
        self.logger.warning(f"No columns has been loaded from [{source}]")
        return None
    df = pd.read_csv(
        filepath,
        delimiter=separator,
        usecols=usecols,
        dtype=dtype,
        encoding=encoding,
        engine="python",
    )
    df.columns = columns
    seq_separator, seq_len = self.config["seq_separator"], self.config["seq_len"]
    for field in columns:
        ftype = self.field2type[field]
        if not ftype.value.endswith("seq"):
            continue
        cast = float if ftype == FeatureType.FLOAT_SEQ else str
        cells = df[field].fillna("").to_numpy()
        df[field] = [
            np.array([cast(t) for t in cell.split(seq_separator) if t])
            for cell in cells
        ]
        longest = max(map(len, df[field].values))
        if seq_len and field in seq_len:
            df[field] = [seq[: seq_len[field]] for seq in df[field].values]
            self.field2seqlen[field] = min(seq_len[field], longest)
        else:
            self.field2seqlen[field] = longest
    return df


def fill_nan(self):
    """RecBole's ``Dataset._fill_nan`` (tokens: 0, floats: the mean, sequences: empty),
    by assignment."""
    from recbole.utils import FeatureType

    for feat_name in self.feat_name_list:
        feat = getattr(self, feat_name)
        for field in feat:
            ftype = self.field2type[field]
            if ftype == FeatureType.TOKEN:
                feat[field] = feat[field].fillna(value=0)
            elif ftype == FeatureType.FLOAT:
                feat[field] = feat[field].fillna(value=feat[field].mean())
            else:
                dtype = np.int64 if ftype == FeatureType.TOKEN_SEQ else np.float64
                empty = np.array([], dtype=dtype)
                feat[field] = feat[field].apply(
                    lambda x: empty if isinstance(x, float) else x
                )


def remap(self, remap_list):
    """RecBole's ``Dataset._remap`` (token remapping), with the sequence lengths of
    ``token_seq`` fields taken cell by cell."""
    from recbole.utils import FeatureType

    if len(remap_list) == 0:
        return
    tokens, split_point = self._concat_remaped_tokens(remap_list)
    new_ids_list, mp = pd.factorize(tokens)
    new_ids_list = np.split(new_ids_list + 1, split_point)
    mp = np.array(["[PAD]"] + list(mp))
    token_id = {t: i for i, t in enumerate(mp)}
    for (feat, field, ftype), new_ids in zip(remap_list, new_ids_list):
        if field not in self.field2id_token:
            self.field2id_token[field] = mp
            self.field2token_id[field] = token_id
        if ftype == FeatureType.TOKEN:
            feat[field] = new_ids
        elif ftype == FeatureType.TOKEN_SEQ:
            split = np.cumsum(cell_lengths(feat[field]))[:-1]
            feat[field] = np.split(new_ids, split)


def benchmark_presets(self):
    """RecBole's ``SequentialDataset._benchmark_presets`` (a dataset given as benchmark
    files with ``<field>_list`` columns), with the lengths of the item lists taken cell by
    cell."""
    from recbole.utils import FeatureSource, FeatureType

    list_suffix = self.config["LIST_SUFFIX"]
    for field in self.inter_feat:
        if field + list_suffix in self.inter_feat:
            setattr(self, f"{field}_list_field", field + list_suffix)
    self.set_field_property(
        self.item_list_length_field, FeatureType.TOKEN, FeatureSource.INTERACTION, 1
    )
    lengths = cell_lengths(self.inter_feat[self.item_id_list_field])
    self.inter_feat[self.item_list_length_field] = lengths


def normalized_fields(dataset):
    """The fields RecBole's ``_normalize`` normalizes."""
    config = dataset.config
    return config["normalize_field"] or (
        dataset.float_like_fields if config["normalize_all"] else []
    )


def discretized_fields(dataset):
    """The fields RecBole's ``_discretization`` discretizes."""
    return dataset.config["numerical_features"] or []


def refusing_float_seq(method, keys, fields):
    """RecBole's ``method`` (``_normalize`` / ``_discretization``), which splits the
    values of ``float_seq`` fields with ``Series.agg(len)`` (a wrong result on pandas 3),
    refusing those fields (``fields(dataset)``) with an error that names them."""
    from recbole.utils import FeatureType

    @functools.wraps(method)
    def refusing(self):
        chosen = fields(self)
        seq = [f for f in chosen if self.field2type.get(f) == FeatureType.FLOAT_SEQ]
        if seq:
            raise RecboleAttnError(
                f"{keys} on the float_seq fields {seq} is not supported with pandas 3 "
                "(RecBole 1.2.1 splits their values with Series.agg(len)); leave these "
                "fields out of load_col or of those keys, or install pandas<3"
            )
        return method(self)

    return refusing


def undo_recbole_anomaly_detection():
    """Import RecBole's models and switch off the anomaly detection their import enables.

    Returns True when it was on (RecBole 1.2.1), False otherwise. A user who wants anomaly
    detection can switch it on again after importing recbole_attn.
    """
    import recbole.model.sequential_recommender  # noqa: F401  (imports sine.py)

    if torch.is_anomaly_enabled():
        torch.autograd.set_detect_anomaly(False)
        return True
    return False


#: (message regex, category, module regex) of the warnings that RecBole 1.2.1 raises on
#: every run and that change nothing: pandas 2's chained-assignment and ``agg(len)``
#: notices (on pandas 2 the in-place fill works and ``agg(len)`` is per cell; on pandas 3
#: :func:`load_feat` & co. replace those methods), torch's ``torch.cuda.amp.GradScaler``
#: rename (RecBole creates a disabled scaler on CPU), pandas 3's read-only arrays and the
#: invalid escape sequences of RecBole's docstrings (Python >= 3.12).
HARMLESS_RECBOLE_WARNINGS = (
    (r"A value is trying to be set on a copy", FutureWarning, r"recbole\.data\."),
    (
        r"using <built-in function len> in Series\.agg",
        FutureWarning,
        r"recbole\.data\.",
    ),
    (r"`torch\.cuda\.amp\.GradScaler", FutureWarning, r"recbole\.trainer\."),
    # pandas 3 (Copy-on-Write) hands out read-only arrays; RecBole wraps a column's array
    # in a tensor once, when the DataFrame is converted and then dropped, and never
    # writes through it
    (r"The given NumPy array is not writable", UserWarning, r"recbole\.data\."),
    # Python >= 3.12 compiling RecBole's docstrings (dien.py: "\p"); the module of a
    # compile-time warning is the file's path
    (r"invalid escape sequence", SyntaxWarning, r".*recbole[/\\]"),
)


def silence_harmless_recbole_warnings():
    """Ignore exactly the warnings of :data:`HARMLESS_RECBOLE_WARNINGS`, and only where
    RecBole's modules raise them (other code keeps every warning)."""
    for message, category, module in HARMLESS_RECBOLE_WARNINGS:
        warnings.filterwarnings("ignore", message, category, module)
