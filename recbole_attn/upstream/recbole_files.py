"""RecBole's own files that the export extends (the models' imports, the cases of
``test_model_auto.py``, ``model_list.json``, the docs' model list), each edit adding our
lines once; and a model's docs page and pull-request description."""

import inspect
import json
import re
import textwrap

import yaml

from recbole_attn.errors import ExportError
from recbole_attn.upstream.models import MODELS, SEQUENTIAL


def case_names(name):
    return [f"test_{name.lower()}" + (f"_{s}" if s else "") for s in MODELS[name].cases]


def recbole_test_methods(names):
    """``{method: text}``: RecBole's test methods of ``names``, one a model and case."""
    out = {}
    for name in names:
        model = MODELS[name]
        for method, (suffix, options) in zip(case_names(name), model.cases.items()):
            config = {"model": name, **options, **model.sizes.get(suffix, {})}
            lines = "".join(f"            {k!r}: {v!r},\n" for k, v in config.items())
            out[method] = (
                f"    def {method}(self):\n        config_dict = {{\n{lines}        }}\n"
                "        quick_test(config_dict)\n"
            ).replace("'", '"')
    return out


def recbole_test_cases(names):
    return "\n".join(recbole_test_methods(names).values())


def _method_span(text, method, start, end):
    """``(begin, stop)`` of ``method`` in ``text[start:end]``, or None."""
    match = re.compile(rf"^    def {method}\(self\):\n", re.M).search(text, start, end)
    if match is None:
        return None
    following = re.compile(r"^(    \S|\S)", re.M).search(text, match.end(), end)
    stop = following.start() if following else end
    return match.start(), len(text[:stop].rstrip("\n")) + 1


def _class_end(text, start):
    following = re.compile(r"^(class |if __name__)", re.M).search(text, start)
    return following.start() if following else len(text)


def add_test_cases(text, names, earlier=None):
    """``(text, methods)``: test_model_auto.py with the cases of ``names`` in
    ``TestSequentialRecommender``, and the methods. A case as an earlier export wrote it
    (``earlier``: ``{method: text}``) is replaced; another of that name is refused."""
    methods = recbole_test_methods(names)
    match = re.search(r"^class TestSequentialRecommender\b.*$", text, re.M)
    if match is None:
        raise ExportError(
            "tests/model/test_model_auto.py has no class TestSequentialRecommender: is "
            "--recbole_dir a RecBole checkout?"
        )
    new = []
    for method, case in methods.items():
        span = _method_span(text, method, match.end(), _class_end(text, match.end()))
        current = span and text[span[0] : span[1]]
        if span is None:
            new.append(case)
        elif current != case and current != (earlier or {}).get(method):
            raise ExportError(
                f"tests/model/test_model_auto.py: {method} differs from what the export "
                "writes (edited by hand?); remove it or leave that model out of --models"
            )
        else:
            text = text[: span[0]] + case + text[span[1] :]
    if new:
        end = _class_end(text, match.end())
        body = text[:end].rstrip("\n") + "\n\n"
        text = body + "\n".join(new) + "\n\n" + text[end:].lstrip("\n")
    return text, methods


def add_init_lines(text, names):
    """``sequential_recommender/__init__.py`` with the imports of ``names`` it lacks."""
    lines = []
    for name in names:
        line = f"from {SEQUENTIAL}.{name.lower()} import {name}\n"
        if line in text:
            continue
        if re.search(rf"\bimport .*\b{name}\b", text):
            raise ExportError(
                f"recbole/model/sequential_recommender/__init__.py imports {name} in "
                f"another form than {line.strip()!r} (edited by hand?); make it that line"
            )
        lines.append(line)
    return text.rstrip("\n") + "\n" + "".join(lines) if lines else text


def model_list_entry(name):
    model = MODELS[name]
    entry = {
        "category": "Sequential Recommendation",
        "cate_link": "/docs/user_guide/model_intro.html#sequential-recommendation",
        "year": model.year,
        "pub": model.pub,
        "model": name,
        "model_link": f"/docs/user_guide/model/sequential/{name.lower()}.html",
        "paper": model.paper,
        "paper_link": model.paper_link,
        "authors": model.authors,
        "ref_code": model.ref_code,
        "repository": "RecBole",
        "repo_link": "https://github.com/RUCAIBox/RecBole",
    }
    return textwrap.indent(json.dumps(entry, indent=4, ensure_ascii=False), " " * 6)


def add_model_list_entries(text, names):
    """``asset/model_list.json`` with the entries of ``names`` it lacks, at its end."""
    present = {e.get("model") for e in json.loads(text)["data"]}
    new = [model_list_entry(n) for n in names if n not in present]
    if not new:
        return text
    end = text.rstrip().rstrip("}").rstrip().rstrip("]").rstrip()
    out = end + ",\n" + ",\n".join(new) + text[len(end) :]
    json.loads(out)
    return out


def add_docs_lines(text, names):
    lines = text.splitlines(keepends=True)
    at = [i for i, line in enumerate(lines) if line.startswith("   model/sequential/")]
    if not at:
        raise ExportError(
            "docs/source/user_guide/model_intro.rst lists no sequential model"
        )
    new = [f"   model/sequential/{n.lower()}\n" for n in names]
    new = [line for line in new if line not in lines]
    return "".join(lines[: at[-1] + 1] + new + lines[at[-1] + 1 :])


#: RecBole's files that get our lines: path -> edit(text, names); and the test cases
EDITS = {
    "recbole/model/sequential_recommender/__init__.py": add_init_lines,
    "asset/model_list.json": add_model_list_entries,
    "docs/source/user_guide/model_intro.rst": add_docs_lines,
}
TEST_CASES = "tests/model/test_model_auto.py"


def _docstring_parts(name):
    """(description, NOTE) of the model's class docstring, dedented."""
    from recbole_attn.plugin import get_model_class

    doc = inspect.cleandoc(get_model_class(name).__doc__ or "")
    description, _, note = doc.partition("NOTE:")
    return description.strip(), inspect.cleandoc(note) if note else ""


def _yaml_literal(value):
    return yaml.safe_dump({"v": value}, default_flow_style=True)[4:-2]


def _yaml_block(values):
    lines = "".join(f"   {k}: {_yaml_literal(v)}\n" for k, v in values.items())
    return ".. code:: yaml\n\n" + lines


def settings_text(name, files):
    """The docs page's settings a model yaml cannot hold (T, the training budget), and
    the defaults RecBole ignores of the model whose file it runs (AWRSR: STOSA's)."""
    from recbole_attn.upstream.models import RECBOLE_NEGATIVES
    from recbole_attn.upstream.yaml_files import exported_keys, reproduction_settings

    out = []
    settings = reproduction_settings(name)
    if settings:
        out.append(
            "**Reproduction settings:** RecBole reads "
            "``MAX_ITEM_LIST_LENGTH`` from ``recbole/properties/dataset/sample.yaml`` "
            "(``50``) after the model's yaml, and the training and evaluation settings "
            "from ``overall.yaml``, so the model's yaml holds none of them. To train "
            "as the model was reproduced, set them in your own config "
            "file (or ``config_dict``):\n\n" + _yaml_block(settings)
        )
    own = exported_keys(name, files)
    for other in MODELS[name].also_reads:
        theirs = exported_keys(other, files)
        differ = {k: v for k, v in theirs.items() if k in own and own[k] != v}
        if "train_neg_sample_args" in own and theirs.get("loss_type") != "CE":
            differ["train_neg_sample_args"] = RECBOLE_NEGATIVES
        if differ:
            out.append(
                f"**On the {other} backbone:** RecBole reads only ``{name}.yaml`` for "
                f"{name}, whatever its backbone, so its values above apply to "
                f"``backbone: '{other}'`` too. {other}'s own defaults differ in:\n\n"
                + _yaml_block(differ)
            )
    return "\n".join(out)


def docs_page(name, yaml_text, files=None):
    """The docs page of model ``name``, as RecBole writes its models' pages."""
    from recbole_attn.upstream.sources import python_files

    model, values, params = MODELS[name], yaml.safe_load(yaml_text), []
    description, note = _docstring_parts(name)
    for line in yaml_text.splitlines():
        match = re.match(r"(\w+):[^#]*(?:#\s*(?:\((\w+)\)\s*)?(.*))?$", line)
        if match:
            key, kind, meaning = match.groups()
            kind = f" ({kind})" if kind else ""
            value = values[key]
            shown = "None" if value is None else _yaml_literal(value)
            params.append(
                f"- ``{key}{kind}`` : {meaning or ''} Defaults to ``{shown}``."
            )
    link = f"`[paper] <{model.paper_link}>`_\n\n" if model.paper_link else ""
    code = f"**Reference code:** {model.ref_code}\n\n" if model.ref_code else ""
    settings = settings_text(name, files or python_files())
    return (
        f"{name}\n{'=' * max(len(name), 11)}\n\n"
        f"Introduction\n---------------------\n\n{link}"
        f"**Title:** {model.paper}\n\n**Authors:** {model.authors}\n\n{code}"
        f"{description}\n\n"
        + (f"**Notes:**\n\n{note}\n\n" if note else "")
        + "Running with RecBole\n-------------------------\n\n"
        "**Model Hyper-Parameters:**\n\n"
        + "\n".join(params)
        + "\n\n"
        + (settings + "\n" if settings else "")
        + "**A Running Example:**\n\n"
        "Write the following code to a python file, such as `run.py`\n\n"
        ".. code:: python\n\n   from recbole.quick_start import run_recbole\n\n"
        f"   run_recbole(model='{name}', dataset='ml-100k')\n"
        "\nAnd then:\n\n.. code:: bash\n\n   python run.py\n"
    )


def training_text(name):
    from recbole_attn.upstream.sources import python_files
    from recbole_attn.upstream.yaml_files import accepted_losses

    losses = accepted_losses(name, python_files())
    sampled = [loss for loss in losses if loss != "CE"]
    how = (
        f"`loss_type: {sampled[0]}` on the negatives of RecBole's sampler "
        "(`train_neg_sample_args`) or `CE`"
        if sampled
        else "`loss_type: CE`"
    )
    return (
        "The model trains as RecBole's SASRec: one sample per prefix, the loss at its "
        f"last position, with {how}."
    )


#: RecBole's own files in short, as the edits meet them: they add the same lines here
_SHAPES = {
    "recbole/model/sequential_recommender/__init__.py": (
        f"from {SEQUENTIAL}.sasrec import SASRec\n"
    ),
    "tests/model/test_model_auto.py": (
        "class TestSequentialRecommender(unittest.TestCase):\n"
        "    def test_sasrec(self):\n        quick_test({})\n\n\n"
        "class TestKnowledgeRecommender(unittest.TestCase):\n    pass\n"
    ),
    "asset/model_list.json": (
        '{\n  "data": [\n      {\n          "model": "SASRec"\n      }\n  ]\n}'
    ),
    "docs/source/user_guide/model_intro.rst": "   model/sequential/sasrec\n\nNext\n",
}


def added_lines(before, after):
    """``(added, removed)`` lines, as ``git diff`` counts them."""
    import difflib

    diff = list(difflib.ndiff(before.splitlines(), after.splitlines()))
    return sum(d[:2] == "+ " for d in diff), sum(d[:2] == "- " for d in diff)


def recbole_edits(names):
    """``{path: (added, removed)}``: the lines a pull request of ``names`` adds."""
    edit = {**EDITS, TEST_CASES: lambda text, names: add_test_cases(text, names)[0]}
    return {p: added_lines(t, edit[p](t, names)) for p, t in _SHAPES.items()}


def table(new, edits):
    """A pull request's files: the new ones, then RecBole's, with their lines."""
    rows = ["| file | lines |", "|---|---|"]
    for path, text in new.items():
        rows.append(f"| `{path}` (new) | {text.count(chr(10))} |")
    for path, (added, removed) in edits.items():
        changed = f", {removed} changed" if removed else ""
        rows.append(f"| `{path}` | +{added - removed}{changed} |")
    return "\n".join(rows)


def pr_description(name, files, measured=None, dependencies=()):
    """The pull request of ``name``: ``files`` those written whole (``dependencies``'
    too), ``measured`` a markdown section or None."""
    model = MODELS[name]
    description, note = _docstring_parts(name)
    tests = "\n".join(f"- `{c}`" for c in case_names(name))
    needs = (
        "\n## Depends on\n\n"
        + ", ".join(f"{d} (`{SEQUENTIAL}.{d.lower()}`)" for d in dependencies)
        + f": {name}'s file imports it; this pull request includes its files.\n"
        if dependencies
        else ""
    )
    return (
        f"# Add {name} ({model.paper})\n\n"
        f"Paper: {model.paper} ({model.authors}"
        + (f", {model.pub}" if model.pub else ", venue and year: to fill in")
        + f") {model.paper_link}\n"
        + (f"Reference code: {model.ref_code}\n" if model.ref_code else "")
        + needs
        + f"\n## What is implemented\n\n{description}\n\n"
        f"## Deviations from the paper\n\n{note or 'None.'}\n\n"
        "## Training\n\n"
        f"{training_text(name)}\n\n"
        f"## Files\n\n{table(files, recbole_edits([*dependencies, name]))}\n\n"
        f"## Tests\n\nAdded to `tests/model/test_model_auto.py`:\n\n{tests}\n"
        + ("\n" + measured.rstrip("\n") + "\n" if measured else "")
        + (f"\n## Note\n\n{model.notes}\n" if model.notes else "")
    )
