"""
recbole_attn.upstream.metric_files
##################################

The category-diversity metrics CC, ILD and F1 in RecBole's own evaluator: the three files
of :mod:`recbole_attn.evaluator` that import nothing of the plugin, each copied into the
RecBole file of its name (their imports of each other become RecBole's modules):

* ``recbole/evaluator/base_metric.py``: ``CategoryMetric``, the base of CC and ILD beside
  RecBole's ``TopkMetric`` (:mod:`recbole_attn.evaluator.base_metric`);
* ``recbole/evaluator/metrics.py``: ``CC``, ``ILD``, ``F1`` (RecBole registers every class
  defined in this module, so they are usable by name in ``metrics``;
  :mod:`recbole_attn.evaluator.metrics`);
* ``recbole/evaluator/collector.py``: the item→category table and the check of its field
  (:mod:`recbole_attn.evaluator.collector`), and the lines of ``Collector.data_collect``
  that store it under ``data.item_categories`` when a metric needs it;
* ``tests/metrics/test_category_metrics.py``: the metrics against direct loops over the
  recommended lists, and the collector on RecBole's test data;
* the metric lists and the options in the docs (``evaluation_settings.rst``,
  ``train_eval_intro.rst``).

RecBole's files keep their text: each gets the imports it lacks and one marked block at its
end (a second export rewrites the block), then black, which leaves RecBole's own lines as
they are (they are black-formatted).
"""

import ast
import importlib.util
import os
import re

from recbole_attn import __version__
from recbole_attn.errors import ExportError
from recbole_attn.upstream.models import MARK
from recbole_attn.upstream.sources import format_source

#: the package of our evaluator files, and RecBole's
OURS, THEIRS = "recbole_attn.evaluator", "recbole.evaluator"
#: our files that RecBole's evaluator files of the same names get
EVALUATOR_MODULES = ("base_metric", "metrics", "collector")
METRIC_NAMES = ("CC", "ILD", "F1")
BLOCK_BEGIN = "# --- recbole_attn export: begin (regenerate, do not edit) ---"
BLOCK_END = "# --- recbole_attn export: end ---"
#: the line of RecBole's Collector.data_collect after which ours go, and ours
COLLECT_AFTER = (
    '            self.data_struct.set("data.count_users", '
    "train_data.dataset.user_counter)\n"
)
COLLECT_LINES = (
    "        if self.register.need(ITEM_CATEGORIES):\n"
    "            self.data_struct.set(\n"
    "                ITEM_CATEGORIES,\n"
    "                collected_item_categories(self.config, train_data.dataset),\n"
    "            )\n"
)
TEST_FILE = "tests/metrics/test_category_metrics.py"
#: RecBole's files the metric export extends
EVALUATOR_FILES = tuple(f"recbole/evaluator/{name}.py" for name in EVALUATOR_MODULES)


def _modules(node):
    """The modules an import statement names ('' for a relative one)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    return ["" if node.level else node.module]


def _of_the_plugin(module):
    """Whether an imported module is the plugin's (or a relative one, ``''``)."""
    return module.split(".")[0] in ("recbole_attn", "")


def _one_line(node):
    """An import statement on one line, our evaluator modules named as RecBole's."""
    names = ", ".join(
        a.name + (f" as {a.asname}" if a.asname else "") for a in node.names
    )
    modules = [
        re.sub(rf"^{re.escape(OURS)}\.", f"{THEIRS}.", m) for m in _modules(node)
    ]
    for module in modules:
        if _of_the_plugin(module):
            raise ExportError(
                f"{module or 'a relative module'} is imported by an evaluator file: "
                "the files that RecBole gets import nothing of the plugin"
            )
    if isinstance(node, ast.Import):
        return f"import {names}"
    return f"from {modules[0]} import {names}"


def blocks():
    """``{path: (import lines, block text)}`` of RecBole's three evaluator files: each
    of our files below its imports, and its imports but those of the file itself."""
    out = {}
    for name in EVALUATOR_MODULES:
        with open(
            importlib.util.find_spec(f"{OURS}.{name}").origin, encoding="utf-8"
        ) as f:
            text = f.read()
        tree = ast.parse(text)
        imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        for node in ast.walk(tree):  # an import inside a function is copied as it is
            if isinstance(node, (ast.Import, ast.ImportFrom)) and node not in imports:
                if any(map(_of_the_plugin, _modules(node))):
                    raise ExportError(
                        f"{OURS}.{name}, line {node.lineno}: an import of the plugin "
                        "inside a function would be copied into RecBole as it is"
                    )
        docstring = ast.get_docstring(tree) is not None
        if tree.body.index(imports[-1]) != docstring + len(imports) - 1:
            # what stands between the imports would not be copied
            raise ExportError(
                f"{OURS}.{name}: the export copies what follows the imports, which "
                "must all stand at the top of the file (after its docstring)"
            )
        itself = f"from {THEIRS}.{name} import "
        lines = [
            line for line in map(_one_line, imports) if not line.startswith(itself)
        ]
        body = "".join(text.splitlines(keepends=True)[imports[-1].end_lineno :])
        out[f"recbole/evaluator/{name}.py"] = (lines, body.strip("\n") + "\n")
    return out


def _bindings(node):
    """``{(module or None, name, local)}`` that an import statement binds."""
    if isinstance(node, ast.Import):
        return {(None, a.name, a.asname or a.name) for a in node.names}
    return {(node.module, a.name, a.asname or a.name) for a in node.names}


def add_imports(text, lines):
    """``text`` with those of the import ``lines`` whose names it does not import yet at
    top level, after its last top-level import."""
    tree = ast.parse(text)
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    if not imports:
        raise ExportError("an evaluator file of RecBole without imports: not RecBole's")
    present = set().union(*(_bindings(n) for n in imports))
    new = []
    for line in lines:
        node = ast.parse(line).body[0]
        missing = _bindings(node) - present
        if missing:
            if isinstance(node, ast.ImportFrom):
                names = ", ".join(
                    n if n == local else f"{n} as {local}"
                    for _, n, local in sorted(missing, key=lambda b: b[1])
                )
                line = f"from {node.module} import {names}"
            new.append(line + "\n")
    if not new:
        return text
    lines_of = text.splitlines(keepends=True)
    after = max(n.end_lineno for n in imports)
    return "".join(lines_of[:after] + new + lines_of[after:])


def with_block(text, block):
    """``text`` with ``block`` as its marked last block (replacing an earlier one)."""
    if BLOCK_BEGIN in text:
        start = text.index(BLOCK_BEGIN)
        end = text.index(BLOCK_END, start) + len(BLOCK_END)
        text = text[:start] + text[end:]
    return (
        text.rstrip("\n")
        + f"\n\n\n{BLOCK_BEGIN}\n# generated by recbole_attn {__version__} from "
        f"recbole_attn.evaluator\n{block.rstrip()}\n\n\n{BLOCK_END}\n"
    )


def add_collect_lines(text):
    """RecBole's collector.py whose ``data_collect`` stores the category table."""
    if COLLECT_LINES in text:
        return text
    if COLLECT_AFTER not in text:
        raise ExportError(
            "recbole/evaluator/collector.py has no line "
            f"{COLLECT_AFTER.strip()!r} in Collector.data_collect: RecBole changed it; "
            "add the lines of recbole_attn.upstream.metric_files.COLLECT_LINES by hand"
        )
    return text.replace(COLLECT_AFTER, COLLECT_AFTER + COLLECT_LINES, 1)


def edited_evaluator_files(read):
    """``{path: new text}`` of RecBole's evaluator files; ``read(path)`` gives the
    current text of a file of the checkout."""
    out = {}
    for path, (lines, block) in blocks().items():
        text = with_block(add_imports(read(path), lines), block)
        if path.endswith("collector.py"):
            text = add_collect_lines(text)
        out[path] = format_source(text)
    return out


#: RecBole's docs that list the ranking metrics: the line, and the options' place
DOCS_LISTS = (
    "docs/source/user_guide/config/evaluation_settings.rst",
    "docs/source/user_guide/train_eval_intro.rst",
)
METRIC_LIST = re.compile(r"^(\s*Ranking-based\s+.*?)(\s*)$", re.M)
OPTIONS_AFTER = "- ``metric_decimal_place(int)``"
OPTIONS = """\
- ``category_field (str)``: The item feature (a ``token_seq`` column of the ``.item``
  file, loaded by ``load_col``) that holds each item's categories, read by the
  category-diversity metrics ``CC``, ``ILD`` and ``F1``. Defaults to ``categories``.
- ``ild_distance (str)``: The distance between two items' category sets in ``ILD``:
  ``cosine`` or ``jaccard``. Defaults to ``cosine``.
- ``f1_accuracy_metrics (list)`` and ``f1_diversity_metrics (list)``: The top-k metrics
  whose means are ``F1``'s accuracy and diversity. Default to ``['Recall', 'NDCG']`` and
  ``['CC', 'ILD']``.
"""


def add_docs(text):
    """A docs page of RecBole with CC, ILD, F1 in its ranking-metric list (and, on the
    evaluation-settings page, their options)."""
    match = METRIC_LIST.search(text)
    if match is None:
        raise ExportError("a RecBole docs page without its 'Ranking-based' metric list")
    if "CC, ILD, F1" not in match.group(1):
        text = (
            text[: match.end(1)] + ", " + ", ".join(METRIC_NAMES) + text[match.end(1) :]
        )
    if OPTIONS_AFTER in text and "``category_field (str)``" not in text:
        lines = text.splitlines(keepends=True)
        at = next(i for i, line in enumerate(lines) if line.startswith(OPTIONS_AFTER))
        at += 1
        while at < len(lines) and lines[at].startswith("  ") and lines[at].strip():
            at += 1  # the option's continuation lines
        text = "".join(lines[:at] + [OPTIONS] + lines[at:])
    return text


#: the test file itself (a real Python file, read as text; black-formatted, linted with
#: the package): recbole_tests/test_category_metrics.py
TEST_SOURCE = os.path.join(
    os.path.dirname(os.path.abspath(__file__)),
    "recbole_tests",
    "test_category_metrics.py",
)


def test_file():
    """RecBole's test of the metrics (a new file of ``tests/metrics``), under the mark of
    the export."""
    with open(TEST_SOURCE, encoding="utf-8") as f:
        return format_source(f"# {MARK} {__version__}\n" + f.read())


def pr_description():
    from recbole_attn.evaluator import metrics

    doc = "Notation:" + metrics.__doc__.split("Notation:", 1)[1].rstrip()
    return (
        "# Add category-diversity metrics CC, ILD and F1\n\n"
        "Top-k metrics of the categories of the recommended items, as PAtt (KDD'24) "
        "reports them, for any RecBole model on any dataset whose `.item` file has a "
        "`token_seq` category column (the item→category table reaches the metrics "
        "through the collector, under `data.item_categories`).\n\n"
        f"{doc}\n\n"
        "## What changes\n\n"
        "- `recbole/evaluator/base_metric.py`: `CategoryMetric` (the base of CC and ILD) "
        "and the name of the category table the metrics and the collector share.\n"
        "- `recbole/evaluator/metrics.py`: `CC`, `ILD`, `F1`.\n"
        "- `recbole/evaluator/collector.py`: `Collector.data_collect` stores the "
        "item→category table under `data.item_categories` when a metric needs it "
        "(`collected_item_categories`, which checks the field and says how to fix it: "
        "missing from the `.item` file, not loaded by `load_col`, not `token_seq`).\n"
        "- Options `category_field`, `ild_distance`, `f1_accuracy_metrics`, "
        "`f1_diversity_metrics`, documented in `evaluation_settings.rst`.\n\n"
        "## Tests\n\n"
        f"`{TEST_FILE}`: CC, ILD (cosine and Jaccard) and F1 against direct loops over the "
        "recommended lists, F1's components, the errors, and the collector on "
        "`tests/test_data` (its `class` genres).\n\n"
        f"Generated by recbole_attn {__version__} (`recbole-attn export-upstream`).\n"
    )


def metric_files(read):
    """``{path: text}`` of everything the metric export writes or edits in a checkout
    (``read(path)``: the text of a file of it, None when it lacks the file)."""
    out = edited_evaluator_files(read)
    out[TEST_FILE] = test_file()
    for path in DOCS_LISTS:
        text = read(path)
        if text is not None:
            out[path] = add_docs(text)
    return out
