"""The Python files of the RecBole export: each model file of :mod:`recbole_attn.model`
as it is (it stands alone: torch, numpy, scipy and RecBole), its imports of another
model file made RecBole's (``recbole_attn.model.stosa`` becomes
``recbole.model.sequential_recommender.stosa``)."""

import functools
import importlib.util
import os
import re

from recbole_attn.errors import ExportError
from recbole_attn.upstream.models import MODELS, SEQUENTIAL

OURS = "recbole_attn.model"


def format_source(source):
    try:
        import black
    except ImportError:  # pragma: no cover - black is in the export and test extras
        raise ExportError(
            "export-upstream formats the files with black (as RecBole does): "
            "pip install 'recbole-attn[export]' (or pip install black==26.10.1)"
        ) from None
    return black.format_str(source, mode=black.Mode())


def read_text(path):
    """The text of a file, or None where there is none."""
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            return f.read()


def module_text(module):
    return read_text(importlib.util.find_spec(module).origin)


def file_name(name):
    """The module of model ``name``, here and in RecBole (its name in lower case)."""
    return MODELS[name].module.rpartition(".")[2]


def model_file(name):
    return f"recbole/model/sequential_recommender/{file_name(name)}.py"


def exported_text(module):
    text = module_text(module)
    return format_source(
        re.sub(rf"\b{re.escape(OURS)}\.(\w+)", rf"{SEQUENTIAL}.\1", text)
    )


def with_headers(files, author=("Your Name", "you@example.com"), day="YYYY/MM/DD"):
    """``files`` with RecBole's header on each new Python file (author, email, day;
    by default placeholders, for the descriptions' line counts)."""
    name, email = author
    header = (
        f"# -*- coding: utf-8 -*-\n# @Time    : {day}\n# @Author  : {name}\n"
        f"# @Email   : {email}\n\n"
    )
    return {p: header + t if p.endswith(".py") else t for p, t in files.items()}


def own_paths(name):
    """The files a model's pull request adds whole: its file, yaml and docs page."""
    return [
        model_file(name),
        f"recbole/properties/model/{name}.yaml",
        f"docs/source/user_guide/model/sequential/{name.lower()}.rst",
    ]


def python_files():
    """``{relative path: source}`` of every model file (built once per process)."""
    return dict(_python_files())


@functools.cache
def _python_files():
    return {model_file(name): exported_text(m.module) for name, m in MODELS.items()}


def imported_models(files, name):
    """``name`` and the models its file imports, transitively (AWRSR: STOSA)."""
    by_file = {file_name(n): n for n in MODELS}
    pattern = re.compile(rf"from {re.escape(SEQUENTIAL)}\.(\w+) import")
    seen, todo = [], [name]
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.append(current)
            todo += map(
                by_file.__getitem__, pattern.findall(files[model_file(current)])
            )
    return seen


def model_sources(files, name):
    """The sources a model runs: its file and the files it imports."""
    return [files[model_file(n)] for n in imported_models(files, name)]
