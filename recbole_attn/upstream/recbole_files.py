"""
recbole_attn.upstream.recbole_files
###################################

RecBole's own files that the export extends (the models' imports, the test cases of
``tests/model/test_model_auto.py``, ``asset/model_list.json``, the docs' model list), each
edit adding our lines once (a second export replaces them); the docs page and the
pull-request description of a model, from its class docstring and its yaml.
"""

import inspect
import json
import re

from recbole_attn import __version__
from recbole_attn.errors import ExportError
from recbole_attn.upstream.models import (
    MARK,
    MODELS,
    SEQUENTIAL,
    TESTS_BEGIN,
    TESTS_END,
    cite_docs,
)


def case_names(name):
    """The test methods of model ``name`` in RecBole's test_model_auto.py."""
    return [
        f"test_{name.lower()}" + (f"_{suffix}" if suffix else "")
        for suffix in MODELS[name].cases
    ]


def recbole_test_cases(names):
    """RecBole's test methods of ``names`` (one per model and variant, with the sizes that
    keep the variant's case cheap on RecBole's test data)."""
    out = [TESTS_BEGIN]
    for name in names:
        model = MODELS[name]
        for method, (suffix, options) in zip(case_names(name), model.cases.items()):
            config = {"model": name, **options, **model.sizes.get(suffix, {})}
            lines = "".join(f"            {k!r}: {v!r},\n" for k, v in config.items())
            out.append(
                f"    def {method}(self):\n        config_dict = {{\n{lines}        }}\n"
                "        quick_test(config_dict)\n\n"
            )
    out.append(TESTS_END)
    return "".join(out).replace("'", '"')


def add_test_cases(text, names):
    """RecBole's test_model_auto.py with our cases inside ``TestSequentialRecommender``
    (replacing the ones of an earlier export)."""
    cases = recbole_test_cases(names)
    if TESTS_BEGIN in text:
        start = text.index(TESTS_BEGIN)
        end = text.index(TESTS_END, start) + len(TESTS_END)
        return text[:start] + cases + text[end:]
    match = re.search(r"^class TestSequentialRecommender\b.*$", text, re.M)
    if match is None:
        raise ExportError(
            "tests/model/test_model_auto.py has no class TestSequentialRecommender: is "
            "--recbole_dir a RecBole checkout?"
        )
    following = re.search(r"^(class |if __name__)", text[match.end() :], re.M)
    end = match.end() + following.start() if following else len(text)
    body = text[:end].rstrip("\n") + "\n\n"
    return body + cases + "\n\n" + text[end:].lstrip("\n")


def add_init_lines(text, names):
    lines = [
        f"from {SEQUENTIAL}.{name.lower()} import {name}\n"
        for name in names
        if f"from {SEQUENTIAL}.{name.lower()} import {name}\n" not in text
    ]
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
    fields = ",\n".join(
        f"          {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}"
        for k, v in entry.items()
    )
    return "      {\n" + fields + "\n      }"


def add_model_list_entries(text, names):
    """``asset/model_list.json`` with an entry for every model of ``names`` that it
    lacks, added before the list's end (the rest of the file kept byte for byte)."""
    present = {e.get("model") for e in json.loads(text)["data"]}
    new = [model_list_entry(n) for n in names if n not in present]
    if not new:
        return text
    end = text.rstrip().rstrip("}").rstrip().rstrip("]").rstrip()
    tail = text[len(end) :]
    out = end + ",\n" + ",\n".join(new) + tail
    json.loads(out)
    return out


def add_docs_lines(text, names):
    lines = text.splitlines(keepends=True)
    last = max(
        (i for i, line in enumerate(lines) if line.startswith("   model/sequential/")),
        default=None,
    )
    if last is None:
        raise ExportError(
            "docs/source/user_guide/model_intro.rst lists no sequential model"
        )
    new = [
        f"   model/sequential/{n.lower()}\n"
        for n in names
        if f"   model/sequential/{n.lower()}\n" not in lines
    ]
    return "".join(lines[: last + 1] + new + lines[last + 1 :])


def _docstring_parts(model_class):
    """(description, NOTE) of a class docstring, dedented."""
    doc = inspect.cleandoc(model_class.__doc__ or "")
    description, _, note = doc.partition("NOTE:")
    return description.strip(), inspect.cleandoc(note) if note else ""


def docs_page(name, yaml_text):
    from recbole_attn.config import get_model_class

    model = MODELS[name]
    description, note = _docstring_parts(get_model_class(name))
    description, note = cite_docs(description), cite_docs(note)
    params = []
    for line in yaml_text.splitlines():
        match = re.match(r"(\w+):\s*([^#]*?)\s*(?:#\s*(.*))?$", line)
        if match and match.group(1) not in ("train_neg_sample_args",):
            key, value, comment = match.groups()
            params.append(f"- ``{key}`` : {comment or ''} Defaults to ``{value}``.")
    link = f"`[paper] <{model.paper_link}>`_\n\n" if model.paper_link else ""
    code = f"Reference code: {model.ref_code}\n\n" if model.ref_code else ""
    title = f"{name}\n{'=' * max(len(name), 11)}\n\n"
    return (
        f".. {MARK} {__version__}\n\n"
        + title
        + "Introduction\n---------------------\n\n"
        + link
        + f"**Title:** {model.paper}\n\n**Authors:** {model.authors}\n\n"
        + code
        + description
        + "\n\n"
        + ("**Deviations from the paper:**\n\n" + note + "\n\n" if note else "")
        + "Running with RecBole\n-------------------------\n\n**Model Hyper-Parameters:**\n\n"
        + "\n".join(params)
        + "\n\n**A Running Example:**\n\n.. code:: python\n\n"
        + "   from recbole.quick_start import run_recbole\n\n"
        + f"   run_recbole(model='{name}', dataset='ml-100k')\n"
    )


#: what the plugin adds to a model file, beyond what the pull request contributes
PLUGIN_ADDS = (
    "recbole_attn trains the same model file with what only the plugin has: one "
    "sequence per user with a loss at every position (`training_mode: all_position`, "
    "the official codes' way and its default), every loss for every model (CE under a "
    "memory budget, BPR, BCE, the log-Q corrected sampled softmax SSM; several "
    "negatives per position, by popularity), batches cut to their longest sequence and "
    "split into groups of similar lengths, and the attention matrices of every layer "
    "(`attention_weights`); none of it is in this pull request."
)


def training_text(name):
    """What the pull request says of how the model trains."""
    from recbole_attn.config import get_model_class

    losses = getattr(get_model_class(name), "recbole_loss_types", ("BPR", "CE"))
    sampled = [loss for loss in losses if loss != "CE"]
    how = (
        f"`loss_type: {sampled[0]}` on the negatives of RecBole's sampler "
        "(`train_neg_sample_args`) or `CE`"
        if sampled
        else "`loss_type: CE`"
    )
    return (
        "The model trains RecBole's way: one sample per prefix, the loss at its last "
        f"position, with {how}, as RecBole's SASRec. {PLUGIN_ADDS}"
    )


def files_table(name, files=None):
    """The files of the pull request of model ``name`` with their line counts (those
    written whole; RecBole's own files get a line or a test case)."""
    from recbole_attn.upstream.sources import own_paths, python_files
    from recbole_attn.upstream.yaml_files import model_yaml

    if files is None:  # what the export writes for it
        python, yaml_path, docs = own_paths(name)
        text = model_yaml(name, python_files())
        files = {
            python: python_files()[python],
            yaml_path: text,
            docs: docs_page(name, text),
        }
    planned = files
    rows = ["| file | lines |", "|---|---|"]
    for path, text in planned.items():
        rows.append(f"| `{path}` | {text.count(chr(10))} |")
    rows.append(
        "| `recbole/model/sequential_recommender/__init__.py`, "
        "`tests/model/test_model_auto.py`, `asset/model_list.json`, "
        "`docs/source/user_guide/model_intro.rst` | the model's line / test cases |"
    )
    return "\n".join(rows)


def pr_description(name, measured=None, files=None):
    """The pull-request text of model ``name``; ``measured``: a markdown section of what
    was measured (recbole_attn's experiments write one per model), or None; ``files``:
    the files of its pull request (default: what the export writes for it)."""
    from recbole_attn.config import get_model_class

    model = MODELS[name]
    description, note = _docstring_parts(get_model_class(name))
    description, note = cite_docs(description), cite_docs(note)
    tests = "\n".join(f"- `{c}`" for c in case_names(name))
    return (
        f"# Add {name} ({model.paper})\n\n"
        f"Paper: {model.paper} ({model.authors}"
        + (f", {model.pub}" if model.pub else ", venue and year: to fill in")
        + f") {model.paper_link}\n"
        + (f"Reference code: {model.ref_code}\n" if model.ref_code else "")
        + f"\n## What is implemented\n\n{description}\n\n"
        f"## Deviations from the paper\n\n{note or 'None.'}\n\n"
        "## Training\n\n"
        f"{training_text(name)}\n\n"
        f"## Files\n\n{files_table(name, files)}\n\n"
        f"## Tests\n\nAdded to `tests/model/test_model_auto.py`:\n\n{tests}\n\n"
        + (measured.rstrip("\n") + "\n\n" if measured else "")
        + (f"## Note\n\n{model.notes}\n\n" if model.notes else "")
        + f"Generated by recbole_attn {__version__} (`recbole-attn export-upstream`).\n"
    )
