"""Command-line text as values, and the rules of the keys every run reads (no torch)."""

import ast
import re
import warnings

from recbole_attn.options.declared import (
    Flag,
    Integer,
    Number,
    OneOf,
    Option,
    is_int,
    is_number,
)


def convert_value(text):
    """A command-line string as the value it spells (``true``/``false`` too)."""
    try:
        with warnings.catch_warnings():  # "2in": Python warns while failing to parse it
            warnings.simplefilter("ignore", SyntaxWarning)
            return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return {"true": True, "false": False}.get(text.strip().lower(), text)


def convert_values(options):
    """``options`` with each string as the value it spells (:func:`convert_value`)."""
    return {
        k: convert_value(v) if isinstance(v, str) else v for k, v in options.items()
    }


class TopK(Option):
    """A positive integer or a non-empty list of them."""

    def problem(self, value):
        values = value if isinstance(value, (list, tuple)) else [value]
        if not values or not all(is_int(k) and k >= 1 for k in values):
            return "a positive integer or a list of them, e.g. [5, 10, 20]"


#: RecBole 1.2.1's optimizers, any case (on any other name it falls back to Adam)
LEARNERS = ("adam", "adamw", "sgd", "adagrad", "rmsprop", "sparse_adam")


class Learner(Option):
    def problem(self, value):
        if not isinstance(value, str) or value.lower() not in LEARNERS:
            return f"one of {list(LEARNERS)}"


#: a sampled evaluation mode: the target among N sampled items (``uni100``, ``pop50``)
SAMPLED_MODE = re.compile(r"(uni|pop)([1-9][0-9]*)")


class EvalArgs(Option):
    """RecBole's ``eval_args``: ``split``, ``order``, ``group_by``, ``mode``."""

    LS = ("valid_and_test", "valid_only", "test_only")

    def problem(self, value):
        if not isinstance(value, dict):
            return "a dict with split, order, group_by and mode"
        split = value.get("split")
        if split is not None and not (
            isinstance(split, dict)
            and len(split) == 1
            and (
                split.get("LS") in self.LS
                or any(
                    isinstance(split.get(kind), list)
                    and all(is_number(r) and r >= 0 for r in split[kind])
                    for kind in ("RS", "TS")
                )
            )
        ):
            return (
                "a dict whose split is {'LS': 'valid_and_test'} (or valid_only, "
                "test_only), {'RS': [0.8, 0.1, 0.1]} or {'TS': [0.8, 0.1, 0.1]}, got "
                f"split {split!r}"
            )
        if value.get("order") not in (None, "RO", "TO"):
            return f"a dict whose order is RO or TO, got order {value.get('order')!r}"
        group_by = value.get("group_by")
        if not (
            group_by in (None, "user")
            or (isinstance(group_by, str) and group_by.lower() == "none")
        ):
            return "a dict whose group_by is user or none"
        mode = value.get("mode")  # absent: an earlier source's (entries merge)
        modes = mode.values() if isinstance(mode, dict) else [mode]
        if mode is not None and not all(
            m in ("full", "labeled")
            or (isinstance(m, str) and SAMPLED_MODE.fullmatch(m))
            for m in modes
        ):
            return (
                "a dict whose mode is full, labeled, uni<N> or pop<N> (N >= 1 sampled "
                f"negatives, e.g. uni100), got mode {mode!r}"
            )


class FieldsBySource(Option):
    """RecBole's ``load_col`` / ``unload_col``: file -> field names."""

    kind = "dict"

    def __init__(self, every=False):
        self.every = every

    def problem(self, value):
        def names(fields):
            if self.every and fields == "*":
                return True
            return isinstance(fields, (list, tuple)) and all(
                isinstance(f, str) for f in fields
            )

        if not (isinstance(value, dict) and all(names(f) for f in value.values())):
            return (
                "a dict from a file to the names of its fields, e.g. {'inter': "
                "['user_id', 'item_id', 'timestamp'], 'item': ['item_id', 'categories']}"
                + (" ('*': all of the file's)" if self.every else "")
            )


class Threshold(Option):
    """RecBole's ``threshold``: one field and a number."""

    kind = "dict"

    def problem(self, value):
        if not (
            isinstance(value, dict)
            and len(value) == 1
            and all(isinstance(k, str) and is_number(v) for k, v in value.items())
        ):
            return "a dict of one field and a number, e.g. {'rating': 4}"


class Text(Option):

    def problem(self, value):
        if not (isinstance(value, str) and value):
            return "a non-empty string"


class Names(Option):

    kind = "list"

    def problem(self, value):
        if not (
            isinstance(value, (list, tuple))
            and value
            and all(isinstance(v, str) and v for v in value)
        ):
            return "a non-empty list of names, e.g. ['train', 'valid', 'test']"


#: key -> :class:`Option` of the keys every run reads, checked where set and not None
VALUE_RULES = {
    **dict.fromkeys(
        "epochs train_batch_size eval_batch_size stopping_step eval_step "
        "MAX_ITEM_LIST_LENGTH hidden_size inner_size embedding_size num_layers n_heads "
        "threads".split(),
        Integer(1),
    ),
    # n_layers 0: embeddings only (an ablation; tests use it)
    **dict.fromkeys(("n_layers", "worker", "seed", "metric_decimal_place"), Integer(0)),
    **dict.fromkeys(
        "eval_scores_budget_mb learning_rate layer_norm_eps initializer_range".split(),
        Number("positive"),
    ),
    "weight_decay": Number(),
    **dict.fromkeys(
        ("hidden_dropout_prob", "attn_dropout_prob", "dropout_prob"),
        Number("probability"),
    ),
    "topk": TopK(),
    "learner": Learner(),
    "eval_args": EvalArgs(),
    # RecBole's data keys: a wrong type was a traceback from inside its dataset
    "load_col": FieldsBySource(every=True),
    "unload_col": FieldsBySource(),
    "threshold": Threshold(),
    "field_separator": Text(),
    "seq_separator": Text(),
    "benchmark_filename": Names(),
    # RecBole's switches: any other value was taken as its truth value, silently
    **dict.fromkeys(
        "use_gpu reproducibility repeatable show_progress enable_amp enable_scaler".split(),
        Flag(),
    ),
    # RecBole's KD_DAGFM: another phase failed later (RecBole PR #2208)
    "phase": OneOf("teacher_training", "distillation", "finetuning"),
}
