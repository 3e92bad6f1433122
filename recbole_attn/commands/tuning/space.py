"""
Search spaces in RecBole's hyper-parameter file format (``hidden_size choice [32,64]``,
``dropout uniform 0.1,0.5``, ...), the space shipped for each model
(``properties/hyper/<Model>.hyper``), and their Ray Tune and hyperopt forms.
"""

import math
import os
from dataclasses import dataclass, field

import yaml

from recbole_attn.errors import RecboleAttnError
from recbole_attn.files import read_text, safe_yaml


@dataclass
class Param:
    """One line of a hyper-parameter file."""

    name: str
    kind: str  # choice | uniform | loguniform | quniform
    values: list = field(default_factory=list)  # choice
    bounds: tuple = ()  # (low, high[, q]); loguniform: natural-log bounds


def shipped_spaces():
    """Model name -> path of the search space the package ships
    (``properties/hyper/<Model>.hyper``)."""
    from recbole_attn.engine.config import properties_dir

    folder = os.path.join(properties_dir(), "hyper")
    return {
        name[: -len(".hyper")]: os.path.join(folder, name)
        for name in sorted(os.listdir(folder))
        if name.endswith(".hyper")
    }


def resolve_params_file(value):
    """The search-space file ``value`` names: a file that exists, else a shipped space
    named by its model (``STOSA``, ``STOSA.hyper``, or the checkout path
    ``properties/hyper/STOSA.hyper`` run from another folder)."""
    if os.path.isfile(value):
        return value
    name = os.path.basename(value)
    name = name[: -len(".hyper")] if name.endswith(".hyper") else name
    parent = os.path.dirname(os.path.normpath(value))
    shipped = shipped_spaces()
    if name in shipped and parent in ("", os.path.join("properties", "hyper")):
        return shipped[name]
    raise RecboleAttnError(
        f"params file not found: {value}; give a RecBole hyper-parameter file, or the "
        f"name of a shipped search space: {', '.join(shipped)}"
    )


def read_params_file(path):
    """The :class:`Param` lines of a RecBole hyper-parameter file (comments and blank lines
    skipped), or of a shipped space named by its model (:func:`resolve_params_file`); a
    missing file, a malformed line or an empty file is a :class:`RecboleAttnError`."""
    path = resolve_params_file(path)
    params = []
    for number, raw in enumerate(read_text(path, "params file").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            params.append(_parse_line(line))
        except (ValueError, TypeError, yaml.YAMLError) as err:
            raise RecboleAttnError(
                f"{path}, line {number}: cannot read {line!r} ({err}). Expected "
                "'<name> choice [a,b,...]', '<name> uniform low,high', "
                "'<name> loguniform low,high' (natural-log bounds) or "
                "'<name> quniform low,high,q'."
            ) from None
    if not params:
        raise RecboleAttnError(f"{path} defines no hyperparameter to search")
    names = [p.name for p in params]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise RecboleAttnError(f"{path}: {', '.join(repeated)} given more than once")
    return params


def _parse_line(line):
    """One line as a :class:`Param`; a ``ValueError`` says what is wrong."""
    parts = line.split(None, 2)
    if len(parts) < 3:
        raise ValueError("a name, a distribution and its arguments are needed")
    name, kind, spec = parts
    if kind == "choice":
        values = safe_yaml(spec, "its choice values")
        if not isinstance(values, list) or not values:
            raise ValueError("choice needs a non-empty list")
        return Param(name, kind, values=values)
    numbers = tuple(float(v) for v in spec.replace(" ", "").split(","))
    expected = {"uniform": 2, "loguniform": 2, "quniform": 3}
    if kind not in expected:
        raise ValueError(f"unknown distribution {kind!r}")
    if len(numbers) != expected[kind] or not numbers[0] < numbers[1]:
        raise ValueError(f"{kind} needs {expected[kind]} numbers with low < high")
    return Param(name, kind, bounds=numbers)


def check_space(params, known, model_name, algo):
    """Every parameter is a key the run reads (``known``); ``exhaustive`` has only
    ``choice`` parameters."""
    unknown = [p.name for p in params if p.name not in known]
    if unknown:
        from recbole_attn.options.names import closest

        hints = []
        for name in unknown:
            close = closest(name, known)
            hints.append(f"{name!r}" + (f" (did you mean {close!r}?)" if close else ""))
        raise RecboleAttnError(
            f"not a config key of {model_name} or of the pipeline: {', '.join(hints)}; "
            "a searched parameter must be one the run reads"
        )
    if algo == "exhaustive":
        continuous = [p.name for p in params if p.kind != "choice"]
        if continuous:
            raise RecboleAttnError(
                f"--algo=exhaustive tries every combination of 'choice' values, but "
                f"{', '.join(continuous)} are continuous; write them as choice [...] or "
                "use --algo=random or --algo=bayes"
            )


def total_trials(search):
    """The trials of a search: every combination (exhaustive), else its samples."""
    if search["algo"] == "exhaustive":
        return math.prod(len(p.values) for p in search["params"])
    return search["num_samples"]


def ray_space(params, algo):
    """The Ray Tune search space (``grid_search`` for exhaustive)."""
    from ray import tune

    space = {}
    for p in params:
        if p.kind == "choice":
            maker = tune.grid_search if algo == "exhaustive" else tune.choice
            space[p.name] = maker(list(p.values))
        elif p.kind == "uniform":
            space[p.name] = tune.uniform(*p.bounds)
        elif p.kind == "loguniform":  # exp(U(a, b)), as RecBole/hyperopt
            space[p.name] = tune.loguniform(
                math.exp(p.bounds[0]), math.exp(p.bounds[1])
            )
        else:
            space[p.name] = tune.quniform(*p.bounds)
    return space


def hyperopt_space(params):
    """The hyperopt space RecBole's ``HyperTuning`` samples (built here: RecBole's own
    reader ``eval``\\ s the choice lists)."""
    from hyperopt import hp

    space = {}
    for p in params:
        if p.kind == "choice":
            space[p.name] = hp.choice(p.name, list(p.values))
        else:
            space[p.name] = getattr(hp, p.kind)(p.name, *p.bounds)
    return space


def parse_params_file(path):
    """A RecBole hyper-parameter file as a Ray Tune search space (random sampling)."""
    return ray_space(read_params_file(path), "random")
