"""Declared options: a model's keys as :class:`Opt` s, from which come its attributes,
its checks, its shipped yaml and its docs table."""

import math
import re

import yaml


def is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class Option:
    """What a configuration key must hold: :meth:`problem` says what, or None."""

    #: the type a yaml comment and the docs name (``(int)``, ``(float)``, ...)
    kind = "str"

    def problem(self, value):
        raise NotImplementedError

    def convert(self, value):
        return value


class OneOf(Option):

    def __init__(self, *values, hint=None):
        self.values, self.hint = values, hint
        self.kind = type(values[0]).__name__

    def problem(self, value):
        if not any(value == v and type(value) is type(v) for v in self.values):
            return f"one of {list(self.values)}" + (
                f" ({self.hint})" if self.hint else ""
            )


class Integer(Option):
    """An integer ``>= minimum`` (and ``<= maximum``, if given)."""

    kind = "int"

    def __init__(self, minimum, maximum=None):
        self.minimum, self.maximum = minimum, maximum

    def convert(self, value):
        return int(value)

    def problem(self, value):
        if self.maximum is not None:
            if not (is_int(value) and self.minimum <= value <= self.maximum):
                return f"an integer from {self.minimum} to {self.maximum}"
        elif not (is_int(value) and value >= self.minimum):
            return f"an integer >= {self.minimum}"


class Number(Option):
    """A finite number: ``positive``, ``non-negative`` or a ``probability``."""

    kind = "float"

    def __init__(self, range="non-negative"):
        self.range = range

    def problem(self, value):
        if is_number(value) and not math.isfinite(value):
            return f"a finite number ({value} is not)"
        if self.range == "positive" and not (is_number(value) and value > 0):
            return "a number > 0"
        if self.range == "non-negative" and not (is_number(value) and value >= 0):
            return "a number >= 0"
        if self.range == "probability" and not (is_number(value) and 0 <= value < 1):
            return "a probability in [0, 1)"

    def convert(self, value):
        return float(value)


class Flag(Option):
    """True or False."""

    kind = "bool"

    def convert(self, value):
        return bool(value)

    def problem(self, value):
        if not isinstance(value, bool):
            return "True or False"


class Subset(Option):
    """A non-empty list of distinct names from the given ones."""

    kind = "list"

    def __init__(self, *names):
        self.names = names

    def convert(self, value):
        return list(value)

    def problem(self, value):
        values = list(value) if isinstance(value, (list, tuple)) else None
        if (
            not values
            or len(set(values)) != len(values)
            or not all(v in self.names for v in values)
        ):
            return f"a non-empty list of distinct names from {list(self.names)}"


class Opt:
    """One option: its ``default``, its ``check`` and its one-line ``meaning``."""

    def __init__(self, default, check, meaning):
        self.default, self.check, self.meaning = default, check, meaning

    def convert(self, value):
        return value if value is None else self.check.convert(value)

    @property
    def kind(self):
        return self.check.kind


class Default:
    """A model's value of a key declared elsewhere, with a ``note`` on why."""

    def __init__(self, value, note=""):
        self.value, self.note = value, note


def _own(cls, name):
    return vars(cls).get(name, {})


def declared_options(model_class):
    merged = {}
    for cls in reversed(model_class.__mro__):
        merged.update(_own(cls, "options"))
    return merged


def load_options(model, config, cls=None):
    """Set the declared options (of ``cls``) as attributes of ``model``."""
    declared = _own(cls, "options") if cls else declared_options(type(model))
    for key, opt in declared.items():
        value = config[key] if key in config else opt.default
        setattr(model, key, opt.convert(value))


def _yaml_classes(model_class):
    """The classes whose declarations go into ``model_class``'s own yaml."""
    classes = []
    for cls in model_class.__mro__:
        own = vars(cls)
        if cls is not model_class and (
            own.get("yaml_header") or own.get("options_in_overall", False)
        ):
            break
        classes.append(cls)
    return list(reversed(classes))


def _scalar(value):
    if value is None:
        return "~"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_scalar(v) for v in value) + "]"
    if isinstance(value, (float, str)):  # as yaml writes them (1.0e-12, quoted strings)
        return yaml.safe_dump(value).splitlines()[0]
    return str(value)


def _line(key, value, comment):
    text = f"{key}: {_scalar(value)}"
    return ((text + " ").ljust(32) + f"# {comment}" if comment else text) + "\n"


def _entries(model_class):
    """``[(key, value, comment)]`` of the model's yaml."""
    every, classes = declared_options(model_class), _yaml_classes(model_class)
    # the classes' own options, then the keys they only give defaults for
    values = {k: o.default for cls in classes for k, o in _own(cls, "options").items()}
    for cls in classes:
        values.update(_own(cls, "defaults"))
    rows = []
    for key, given in values.items():
        value, note = _value_note(given)
        opt = every.get(key)
        rows.append((key, value, _comment(opt, note) if opt else note))
    return rows


def _value_note(given):
    return (given.value, given.note) if isinstance(given, Default) else (given, "")


def _comment(opt, note=""):
    text = f"({opt.kind}) {opt.meaning}"
    return text + (f"; {note}" if note else "")


def model_yaml(model_class):
    """The text of ``properties/model/<Name>.yaml``."""
    header = "".join(
        f"# {line}".rstrip() + "\n"
        for line in (model_class.yaml_header or "").strip().splitlines()
    )
    lines = [_line(k, v, c) for k, v, c in _entries(model_class)]
    return header + "".join(lines)


OVERALL_BEGIN = (
    "# >>> the options of recbole_attn's base model class "
    "(generated: python -m recbole_attn.upstream.docs)\n"
)
OVERALL_END = "# <<< the options of recbole_attn's base model class\n"


def base_entries(base_class):
    return [
        (key, opt.default, _comment(opt))
        for key, opt in _own(base_class, "options").items()
    ]


def overall_block(base_class):
    """The generated block of ``properties/overall.yaml``."""
    return "".join(_line(*entry) for entry in base_entries(base_class))


def docs_table(model_class, entries=None):
    rows = ["| key | default | meaning |", "|---|---|---|"]
    for key, value, comment in entries or _entries(model_class):
        meaning = re.sub(r"^\((\w+)\) ", "", comment or "").replace("|", "\\|")
        rows.append(f"| `{key}` | `{_scalar(value)}` | {meaning} |")
    return "\n".join(rows) + "\n"


def docs_markers(name):
    return f"<!-- options: {name} (generated) -->\n", f"<!-- /options: {name} -->\n"


def replace_between(text, begin, end, block, where):
    """``text`` with what lies between ``begin`` and ``end`` replaced by ``block``."""
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        raise ValueError(
            f"{where} lacks the markers {begin.strip()!r} ... {end.strip()!r}"
        )
    return text[: start + len(begin)] + block + text[stop:]
