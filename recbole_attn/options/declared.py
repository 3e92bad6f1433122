"""
recbole_attn.options.declared
#############################

The option is the unit: every key a model reads is declared once, as an :class:`Opt` in
the ``options`` of the class that reads it (default, check, one-line meaning), and a
model states its own values of keys declared elsewhere in ``defaults`` (``{key: value}``
or ``{key: Default(value, note)}``). From those declarations come

* the model's attributes, named as the keys (:func:`load_options`, called by the base
  class before any layer is built): no constructor copies config keys by hand;
* the checks that run before any data is loaded (``config_check.check_model_options``);
* the ``properties/model/<Name>.yaml`` the package ships (:func:`model_yaml`), the block
  of the base class's keys in ``properties/overall.yaml`` (:func:`overall_block`), and
  the option tables of ``docs/models.md`` (:func:`docs_table`): generated, and checked
  equal to the shipped files by a test. ``python -m recbole_attn.upstream.docs`` rewrites
  them after a declaration changed.

Users still pass ``--key=value`` and yaml files exactly as in RecBole.
"""

import math
import re

import yaml


# ---------------------------------------------------------------- what a value must be
def is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class Option:
    """What a configuration key must hold: :meth:`problem` says what it must be, or None.
    A model's declared options (:class:`~recbole_attn.options.declared.Opt`) carry theirs as
    ``check``, applied by :func:`~recbole_attn.options.check.check_model_options` before any data
    is loaded."""

    #: the type a yaml comment and the docs name (``(int)``, ``(float)``, ...)
    kind = "str"

    def problem(self, value):
        raise NotImplementedError

    def convert(self, value):
        """The checked value as a model keeps it."""
        return value


class OneOf(Option):
    """One of the given values (e.g. ``OneOf("paper", "official")``); ``hint`` says what
    they mean."""

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
    """A finite number ``> 0`` (``positive``), ``>= 0`` (``non-negative``), or in
    ``[0, 1)`` (``probability``): ``1e999`` reads as infinity and NaN compares false, and
    either trains a model of NaN weights."""

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


# ---------------------------------------------------------------- options
class Opt:
    """One option: its ``default``, its ``check`` (a :class:`Option`: what a value must
    be) and its one-line ``meaning``."""

    def __init__(self, default, check, meaning):
        self.default, self.check, self.meaning = default, check, meaning

    def convert(self, value):
        """The value as the model keeps it (``int``, ``float``, ``bool``, ``list``)."""
        return value if value is None else self.check.convert(value)

    @property
    def kind(self):
        return self.check.kind


class Default:
    """A model's value of a key declared elsewhere, with a ``note`` on why (yaml comment
    and docs table)."""

    def __init__(self, value, note=""):
        self.value, self.note = value, note


def _own(cls, name):
    return vars(cls).get(name, {})


def declared_options(model_class):
    """key -> :class:`Opt` of every option the class and its base classes declare."""
    merged = {}
    for cls in reversed(model_class.__mro__):
        merged.update(_own(cls, "options"))
    return merged


def load_options(model, config, cls=None):
    """Set every option the model's class declares (with ``cls``: the options ``cls``
    itself declares) as an attribute of ``model``, named as its key, converted
    (:meth:`Opt.convert`); a key the configuration lacks (an option of a class that
    ships no yaml: the research wing's) takes its declared default."""
    declared = _own(cls, "options") if cls else declared_options(type(model))
    for key, opt in declared.items():
        value = config[key] if key in config else opt.default
        setattr(model, key, opt.convert(value))


# ---------------------------------------------------------------------- shipped files
def _yaml_classes(model_class):
    """The classes whose own declarations go into the yaml of ``model_class``: the class
    and its base classes up to the first one that ships a yaml of its own (one with its
    own ``yaml_header``, loaded before it: DPAtt.yaml adds to PAtt.yaml) or whose options
    live in overall.yaml (``options_in_overall``)."""
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
    """``[(key, value, comment)]`` of the model's yaml: its declared options (base
    classes' first), then its ``defaults`` of keys declared elsewhere."""
    every = declared_options(model_class)
    defaults = {}
    for cls in _yaml_classes(model_class):
        defaults.update(_own(cls, "defaults"))
    rows = []
    seen = set()
    for cls in _yaml_classes(model_class):
        for key, opt in _own(cls, "options").items():
            value, note = _value_note(defaults.get(key, opt.default))
            rows.append((key, value, _comment(opt, note)))
            seen.add(key)
    for key, given in defaults.items():
        if key in seen:
            continue
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
    """The text of ``properties/model/<Name>.yaml``: the class's ``yaml_header`` as
    comments, then one ``key: value  # (type) meaning`` line per entry."""
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
    """``[(key, default, comment)]`` of the base class's own options (overall.yaml's
    block and the docs' shared table)."""
    return [
        (key, opt.default, _comment(opt))
        for key, opt in _own(base_class, "options").items()
    ]


def overall_block(base_class):
    """The lines of ``properties/overall.yaml`` between :data:`OVERALL_BEGIN` and
    :data:`OVERALL_END`: the base class's options."""
    return "".join(_line(*entry) for entry in base_entries(base_class))


def _cell(value):
    return f"`{_scalar(value)}`"


def docs_table(model_class, entries=None):
    """The markdown option table of the model (``docs/models.md``): key, default,
    meaning, for every entry of its yaml (or of ``entries``)."""
    rows = ["| key | default | meaning |", "|---|---|---|"]
    for key, value, comment in entries or _entries(model_class):
        meaning = re.sub(r"^\((\w+)\) ", "", comment or "").replace("|", "\\|")
        rows.append(f"| `{key}` | {_cell(value)} | {meaning} |")
    return "\n".join(rows) + "\n"


def docs_markers(name):
    return f"<!-- options: {name} (generated) -->\n", f"<!-- /options: {name} -->\n"


def replace_between(text, begin, end, block, where):
    """``text`` with what lies between the markers ``begin`` and ``end`` replaced by
    ``block``."""
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        raise ValueError(
            f"{where} lacks the markers {begin.strip()!r} ... {end.strip()!r}"
        )
    return text[: start + len(begin)] + block + text[stop:]
