"""Checks of a dataset's files before RecBole reads anything
(:func:`check_dataset_files`) and of its loading (:class:`CheckedDataset`), so that
dirty data is one clear line (what is wrong, in which file, what to do) instead of a
traceback or a silently wrong metric. The checks after the split:
:mod:`recbole_attn.data.preparation`."""

import codecs
import csv
import os
from logging import getLogger

import numpy as np
import pandas as pd

from recbole_attn.data.hints import converter_hint
from recbole_attn.data.preparation import eval_modes
from recbole_attn.errors import DataError, DatasetNotFoundError
from recbole_attn.data.fields import (
    check_category_field_loads,
    header_columns,
    loaded_fields,
)
from recbole_attn.files import not_text_message

#: RecBole's feature types (``name:type`` in an atomic file's header)
FEATURE_TYPES = ("token", "token_seq", "float", "float_seq")


def _parse_header(path, columns):
    """``{name: type}`` of a header's columns; a :class:`DataError` if one is not that."""
    fields = {}
    for column in columns:
        name, _, kind = column.partition(":")
        if not name or kind not in FEATURE_TYPES:
            raise DataError(
                f"{path}: the header column {column!r} is not 'name:type' with a type "
                f"of {list(FEATURE_TYPES)} (RecBole's atomic files start with e.g. "
                "'user_id:token<TAB>item_id:token<TAB>timestamp:float')"
            )
        if name in fields:
            raise DataError(
                f"{path}: the header names the column {name!r} twice ('{name}:"
                f"{fields[name]}' and {column!r}); an atomic file has one column a "
                "field: rename or remove one"
            )
        fields[name] = kind
    return fields


def _has_rows(path, encoding):
    with open(path, encoding=encoding) as f:
        f.readline()
        return any(line.strip() for line in f)


def _check_numbers(path, fields, names, separator, encoding, seq_separator=" "):
    """Every loaded ``float`` and ``float_seq`` value is a finite number."""
    numeric = [n for n in names if fields[n] in ("float", "float_seq")]
    if not numeric:
        return
    columns = [f"{n}:{fields[n]}" for n in numeric]
    try:  # as RecBole reads it: pandas' Python engine (Python's csv)
        frame = pd.read_csv(
            path,
            sep=separator,
            usecols=columns,
            dtype=str,
            encoding=encoding,
            keep_default_na=False,
            engine="python",
        )
    except pd.errors.ParserError as err:
        raise DataError(_unreadable(path, err)) from None
    for column, name in zip(columns, numeric):
        cells = frame[column].str.strip()
        if fields[name] == "float_seq":
            cells = cells.str.split(seq_separator).explode().str.strip()
        rows = cells.index.to_numpy()
        numbers = pd.to_numeric(cells, errors="coerce").to_numpy(dtype=float)
        given = (cells != "").to_numpy()
        bad = np.flatnonzero(given & ~np.isfinite(numbers))
        if len(bad):
            first = bad[0]
            line = int(rows[first]) + 2  # 1-based, after the header
            value = cells.iloc[first]
            what = "is not finite" if _is_infinite(value) else "is not a number"
            count = len(np.unique(rows[bad]))
            raise DataError(
                f"{path}, line {line}: {name} {value!r} {what} ({name} is declared "
                f"'{column}'; {count} such row(s)). Fix the file, or declare the column "
                "':token' if it is a label"
            )


def _unreadable(path, err):
    """The line for a file RecBole's reader (pandas' Python engine) cannot parse."""
    reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err)
    if "field larger than field limit" in str(err):
        reason = (
            f"a field is longer than {csv.field_size_limit():,} characters, Python's "
            "csv limit, which RecBole's reader keeps"
        )
    return (
        f'{path} cannot be read as RecBole reads it ({reason}); is a quote (") left '
        "open, or a separator missing? Fix the file (or convert the raw data again)"
    )


def _is_infinite(text):
    """Whether ``text`` is an infinite float (``'1e999'``: NaN in pandas 2.2)."""
    try:
        return np.isinf(float(text))
    except ValueError:
        return False


def check_sequential_order(config):
    """A sequential model's split is in time order."""
    order = (config["eval_args"] or {}).get("order")
    if order not in (None, "TO"):
        raise DataError(
            f"eval_args order {order!r} (random order) cannot split a sequential "
            f"model's data: {config['model']} reads each user's interactions in time "
            "order, and RecBole splits them in time order only; use order 'TO' "
            "(--eval_args=\"{'order': 'TO'}\"), or a general model (BPR, ...) for a "
            "random split"
        )


def has_label(config):
    """Whether the interactions carry ``LABEL_FIELD`` without RecBole's sampler."""
    load_col = config["load_col"]
    loaded = load_col.get("inter") if isinstance(load_col, dict) else None
    return (
        bool(config["threshold"])
        or load_col is None
        or loaded == "*"
        or (config["LABEL_FIELD"] in (loaded or []))
    )


def check_labeled_evaluation(config):
    """Mode ``labeled`` has labels and no ranking metric (RecBole #2035, #1473)."""
    from recbole.evaluator.register import metric_types
    from recbole.utils import EvaluatorType

    if "labeled" not in eval_modes(config):
        return
    ranking = [
        m
        for m in config["metrics"] or []
        if metric_types.get(str(m).lower()) == EvaluatorType.RANKING
    ]
    if ranking:
        raise DataError(
            f"eval_args mode 'labeled' scores the labelled interactions without a "
            f"ranking, so the ranking metrics {ranking} have nothing to rank (RecBole "
            "1.2.1 fails with a TypeError, RecBole #2035); rank with mode 'full' (or "
            "uni<N>), or evaluate value metrics (--metrics=\"['AUC','LogLoss']\")"
        )
    if not has_label(config):
        raise DataError(
            f"eval_args mode 'labeled' evaluates the interactions' labels, and the data "
            f"has no {config['LABEL_FIELD']} field: load one (load_col), or derive it "
            "from a rating (--threshold=\"{'rating': 4}\")"
        )


def check_dataset_exists(config):
    """The atomic files exist, or the command that makes them."""
    dataset, data_path = config["dataset"], config["data_path"]
    if os.path.exists(os.path.join(data_path, f".{dataset}.converting")):
        # the claim a converter holds while it publishes (data/convert/write.py)
        raise DataError(
            f"dataset {dataset!r} in {os.path.abspath(data_path)} is an unfinished "
            "conversion (a converter is writing it, or was stopped while writing it): "
            "wait for it, or run the converter again"
        )
    names = [f"{dataset}.inter"]
    if config["benchmark_filename"]:
        names = [f"{dataset}.{part}.inter" for part in config["benchmark_filename"]]
    missing = [n for n in names if not os.path.isfile(os.path.join(data_path, n))]
    if missing:
        hint = converter_hint(dataset, os.path.dirname(os.path.normpath(data_path)))
        raise DatasetNotFoundError(
            f"dataset {dataset!r} not found: no {', '.join(missing)} in "
            f"{os.path.abspath(data_path)}; create it with: {hint}; or point "
            f"--data_path to the folder that holds {dataset}/"
        )


def check_dataset_files(config, sequential, needs_categories=()):
    check_labeled_evaluation(config)
    check_dataset_exists(config)
    if sequential:
        check_sequential_order(config)
    headers = check_atomic_files(config, sequential)
    for who, alternative in needs_categories:
        check_category_field_loads(config, who, alternative, headers)


def check_atomic_files(config, sequential):
    """The atomic files read as RecBole reads them; returns each one's ``{name: type}``."""
    dataset, folder = config["dataset"], config["data_path"]
    needs_time = sequential or (config["eval_args"] or {}).get("order") == "TO"
    headers = {}
    for source in ("inter", "item", "user"):
        path = os.path.join(folder, f"{dataset}.{source}")
        if not os.path.isfile(path):
            continue
        if os.path.getsize(path) == 0:
            raise DataError(f"{path} is empty: an atomic file starts with its header")
        headers[source] = _check_atomic_file(
            config, source, path, sequential, needs_time
        )
    return headers


def _check_decodes(path, encoding):
    """A :class:`DataError` naming the first byte ``encoding`` does not decode."""
    decoder = codecs.getincrementaldecoder(encoding)()
    offset = 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError as err:
                byte = chunk[err.start : err.start + 1]
                message = not_text_message(
                    path, byte, offset + err.start, "atomic file", encoding
                )
                raise DataError(
                    f"{message}, or name its encoding: --encoding=latin-1"
                ) from None
            offset += len(chunk)


def _check_atomic_file(config, source, path, sequential, needs_time):
    separator = config["field_separator"] or "\t"
    encoding = config["encoding"] or "utf-8"
    _check_decodes(path, encoding)
    keys = {config[k]: k for k in ("TIME_FIELD", "USER_ID_FIELD", "ITEM_ID_FIELD")}
    uid, iid, time = (
        config[k] for k in ("USER_ID_FIELD", "ITEM_ID_FIELD", "TIME_FIELD")
    )
    fields = _parse_header(path, header_columns(path, separator, encoding))
    names = loaded_fields(config, source, fields)
    required = {"inter": [uid, iid] + ([time] if needs_time else [])}
    required["item"] = [iid] if names else []
    required["user"] = [uid] if names else []
    for field in required[source]:
        if field not in fields:
            why = "RecBole needs it"
            if field == time:
                who = "a sequential model" if sequential else "time order"
                why = f"{who} needs the time of every interaction"
            raise DataError(
                f"{path} has no column {field!r} (columns: {list(fields)}); {why}: add "
                f"it, or name the file's column with --{keys[field]}=..."
            )
        if field not in names:
            raise DataError(
                f"load_col does not load {field!r} from {path} (load_col: "
                f"{config['load_col']}); add it to load_col['{source}']"
            )
    for field in (config["threshold"] or {}) if source == "inter" else ():
        if field not in names or fields[field] != "float":
            raise DataError(
                f"threshold labels the interactions by {field!r}, which is not a "
                f"loaded float column of {path} (loaded: "
                f"{[f'{n}:{fields[n]}' for n in names]}); name one, e.g. "
                "--threshold=\"{'rating': 4}\", or load it (load_col)"
            )
    if source == "inter" and not _has_rows(path, encoding):
        raise DataError(
            f"{path} has a header and no interactions; convert the raw data again "
            "(recbole-attn convert ...)"
        )
    if source != "inter" and names and not _has_rows(path, encoding):
        # RecBole's reader (and our pandas fix of it) fail on it with a traceback
        raise DataError(
            f"{path} has a header and no {source}s; write its rows (convert the raw "
            f"data again), or remove the file (no {source} features)"
        )
    _check_numbers(
        path, fields, names, separator, encoding, config["seq_separator"] or " "
    )
    return fields


class CheckedDataset:
    """Mixin of our datasets: repeated (user, item) interactions dropped keeping each
    pair's first or last (``rm_dup_inter``), ties in file order, and counted."""

    def _remove_duplication(self):
        keep = self.config["rm_dup_inter"]
        feat = self.inter_feat
        pair = [self.uid_field, self.iid_field]
        if self.uid_field not in feat or self.iid_field not in feat:
            return
        if self.time_field in feat:
            order = feat[self.time_field].to_numpy().argsort(kind="stable")
            if keep == "last":
                order = order[::-1]
            duplicated = np.zeros(len(feat), dtype=bool)
            duplicated[order] = feat.iloc[order].duplicated(subset=pair).to_numpy()
        else:
            duplicated = feat.duplicated(subset=pair, keep=keep or "first").to_numpy()
        count = int(duplicated.sum())
        if not count:
            return
        name = f"{self.dataset_name}.inter"
        if keep is None:
            getLogger().warning(
                f"{name}: {count} repeated (user, item) interaction(s) kept "
                "(rm_dup_inter: ~); a user's test item may be an item the user had "
                "already. rm_dup_inter: first drops them"
            )
            return
        self.inter_feat = feat[~duplicated]
        getLogger().warning(
            f"{name}: dropped {count} repeated (user, item) interaction(s), keeping "
            f"each pair's {'earliest' if keep == 'first' else 'latest'} (rm_dup_inter: "
            f"{keep}; rm_dup_inter: ~ keeps them)"
        )
