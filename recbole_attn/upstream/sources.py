"""
recbole_attn.upstream.sources
#############################

The Python files of the RecBole export: each model's file of :mod:`recbole_attn.model`,
copied as it is but for its imports of another model file
(``recbole_attn.model.stosa`` becomes ``recbole.model.sequential_recommender.stosa``). Our
model files already stand alone (torch, numpy, scipy and RecBole; a test checks it), so
the export is the file the plugin runs.
"""

import functools
import importlib.util
import re

from recbole_attn.errors import ExportError
from recbole_attn.upstream.models import MODELS, SEQUENTIAL

#: the package of our model files
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


def file_name(name):
    """The module of model ``name`` in our package and in RecBole's tree (RecBole finds
    a model in the module named as the model in lower case)."""
    return MODELS[name].module.rpartition(".")[2]


def model_file(name):
    """The file of model ``name`` in RecBole's tree."""
    return f"recbole/model/sequential_recommender/{file_name(name)}.py"


def exported_text(module):
    """The source of our model file ``module`` as RecBole's tree holds it."""
    with open(importlib.util.find_spec(module).origin, encoding="utf-8") as f:
        text = f.read()
    text = re.sub(rf"\b{re.escape(OURS)}\.(\w+)", rf"{SEQUENTIAL}.\1", text)
    return format_source(text)


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


@functools.lru_cache(maxsize=1)
def _python_files():
    return {model_file(name): exported_text(m.module) for name, m in MODELS.items()}


def imported_models(files, name):
    """The models whose files the file of model ``name`` imports, transitively (AWRSR:
    STOSA; DPAtt: PAtt; FPARec: PARec), ``name`` first."""
    by_file = {file_name(n): n for n in MODELS}
    seen, todo = [], [name]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.append(current)
        text = files[model_file(current)]
        todo += [
            by_file[f]
            for f in re.findall(rf"from {re.escape(SEQUENTIAL)}\.(\w+) import", text)
        ]
    return seen


def model_sources(files, name):
    """The sources a model runs: its file and the files it imports."""
    return [files[model_file(n)] for n in imported_models(files, name)]
