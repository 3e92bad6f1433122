"""RecBole 1.2.1's dataset methods on pandas >= 3 (assignment, ``Series.map(len)``)."""

import functools

import numpy as np
import pandas as pd

from recbole_attn.errors import RecboleAttnError

#: pandas >= 3 (Copy-on-Write; ``Series.agg(len)`` aggregates; :func:`load_feat` & co.)
PANDAS_3 = int(pd.__version__.split(".")[0]) >= 3


def cell_lengths(series):
    return series.map(len).to_numpy()


def load_feat(self, filepath, source):
    """RecBole's ``Dataset._load_feat``, empty sequences for missing cells."""
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
    """RecBole's ``SequentialDataset._benchmark_presets``, lengths per cell."""
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
    config = dataset.config
    return config["normalize_field"] or (
        dataset.float_like_fields if config["normalize_all"] else []
    )


def refusing_float_seq(method, keys, fields):
    """RecBole's ``method`` refusing ``float_seq`` fields by name."""
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


def install():
    from recbole.data.dataset import Dataset, SequentialDataset

    SequentialDataset._benchmark_presets = benchmark_presets
    Dataset._load_feat = load_feat
    Dataset._fill_nan = fill_nan
    Dataset._remap = remap
    Dataset._normalize = refusing_float_seq(
        Dataset._normalize, "normalize_field / normalize_all", normalized_fields
    )
    Dataset._discretization = refusing_float_seq(
        Dataset._discretization,
        "numerical_features / discretization",
        lambda dataset: dataset.config["numerical_features"] or [],
    )
