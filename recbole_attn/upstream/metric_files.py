"""The category-diversity metrics CC, ILD and AccDivF1 in RecBole's evaluator: our
evaluator files that import nothing of the plugin, appended to RecBole's
``base_metric.py``, ``metrics.py`` and ``collector.py`` (whose ``data_collect`` stores
the category table), their options in ``overall.yaml`` and the docs, a new test file.
RecBole's lines stay; ours are recognised by their content (a second export replaces
them, a hand edit is refused)."""

import ast
import os
import re

from recbole_attn.errors import ExportError
from recbole_attn.upstream.sources import format_source, module_text, read_text
from recbole_attn.upstream.sources import with_headers

OURS, THEIRS = "recbole_attn.evaluator", "recbole.evaluator"
#: our evaluator file -> RecBole's that gets it
EVALUATOR_MODULES = {
    "base_metric": "base_metric",
    "metrics": "metrics",
    "item_categories": "collector",
}
METRIC_NAMES = ("CC", "ILD", "AccDivF1")
OVERALL = "recbole/properties/overall.yaml"
#: the line of RecBole's Collector.data_collect after which ours go, and ours
COLLECT_AFTER = (
    '            self.data_struct.set("data.count_users", '
    "train_data.dataset.user_counter)\n"
)
COLLECT_LINES = (
    '        if self.register.need("data.item_categories"):\n'
    "            self.data_struct.set(\n"
    '                "data.item_categories",\n'
    "                collected_item_categories(self.config, train_data.dataset),\n"
    "            )\n"
)
TEST_FILE = "tests/metrics/test_category_metrics.py"
#: RecBole's files the metric export extends
EVALUATOR_FILES = tuple(
    f"recbole/evaluator/{name}.py" for name in EVALUATOR_MODULES.values()
)


def _modules(node):  # '' for a relative one
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    return ["" if node.level else node.module]


def _of_the_plugin(module):
    return module.split(".")[0] in ("recbole_attn", "")


def _one_line(node):
    """An import statement on one line, naming RecBole's modules for ours."""
    for module in _modules(node):
        module = re.sub(rf"^{re.escape(OURS)}\.", f"{THEIRS}.", module)
        if _of_the_plugin(module):
            raise ExportError(
                f"{module or 'a relative module'} is imported by an evaluator file: "
                "the files that RecBole gets import nothing of the plugin"
            )
    return ast.unparse(node).replace(f"from {OURS}.", f"from {THEIRS}.", 1)


def blocks():
    """``{path: (import lines, block)}``: each evaluator file of ours below its
    imports, and those imports but the RecBole file's own."""
    out = {}
    for name, theirs in EVALUATOR_MODULES.items():
        text = module_text(f"{OURS}.{name}")
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
        itself = f"from {THEIRS}.{theirs} import "
        lines = [x for x in map(_one_line, imports) if not x.startswith(itself)]
        body = "".join(text.splitlines(keepends=True)[imports[-1].end_lineno :])
        out[f"recbole/evaluator/{theirs}.py"] = (lines, body.strip("\n") + "\n")
    return out


def _bindings(node):
    """``{(module or None, name, local)}`` that an import statement binds."""
    module = getattr(node, "module", None)
    return {(module, a.name, a.asname or a.name) for a in node.names}


def add_imports(text, lines):
    """``text`` with the import ``lines`` it lacks, after its last top-level import."""
    tree = ast.parse(text)
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    if not imports:
        raise ExportError("an evaluator file of RecBole without imports: not RecBole's")
    present = set().union(*map(_bindings, imports))
    new = []
    for line in lines:
        node = ast.parse(line).body[0]
        missing = {name for _, name, _ in _bindings(node) - present}
        if missing and isinstance(node, ast.ImportFrom):  # only those names, sorted
            names = [a for a in node.names if a.name in missing]
            node.names = sorted(names, key=lambda a: a.name)
        if missing:
            new.append(ast.unparse(node) + "\n")
    if not new:
        return text
    lines_of = text.splitlines(keepends=True)
    after = max(n.end_lineno for n in imports)
    return "".join(lines_of[:after] + new + lines_of[after:])


def _defined(block):
    """The names the top-level statements of ``block`` define."""
    names = []
    for node in ast.parse(block).body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
    return names


def with_block(text, block, earlier=None, path="the file"):
    """``text`` with ``block`` at its end, replacing ``earlier`` (an earlier export's);
    refused where the text defines one of its names otherwise."""
    if block in text:
        return text
    if earlier and earlier in text:
        return text.replace(earlier, block, 1)
    defined = set(_defined(text))
    clash = [name for name in _defined(block) if name in defined]
    if clash:
        raise ExportError(
            f"{path} already defines {clash[0]}, not as the export writes it (edited by "
            "hand?); restore the file (git checkout) and export again"
        )
    return text.rstrip("\n") + "\n\n\n" + block


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


def edited_evaluator_files(read, earlier=None):
    """``({path: new text}, {path: block added})`` of RecBole's evaluator files."""
    out, added = {}, {}
    for path, (lines, block) in blocks().items():
        block = format_source(block)
        text = with_block(
            add_imports(read(path), lines), block, (earlier or {}).get(path), path
        )
        if path.endswith("collector.py"):
            text = add_collect_lines(text)
        out[path], added[path] = format_source(text), block
    return out, added


OVERALL_COMMENTS = {
    "category_field": "(str) The token_seq item feature with the items' categories, "
    "for CC, ILD and AccDivF1.",
    "ild_distance": "(str) The distance of ILD: 'cosine' or 'jaccard'.",
    "accdivf1_accuracy_metrics": "(list) The accuracy metrics whose mean AccDivF1 combines.",
    "accdivf1_diversity_metrics": "(list) The diversity metrics whose mean AccDivF1 combines.",
}
OVERALL_AFTER = "metric_decimal_place:"


def overall_lines():
    import yaml

    from recbole_attn.evaluator import METRIC_DEFAULTS

    lines = []
    for key, value in METRIC_DEFAULTS.items():
        value = yaml.safe_dump(value, default_flow_style=True).split("\n...")[0]
        text = f"{key}: {value.strip()} "
        lines.append(text.ljust(32) + f"# {OVERALL_COMMENTS[key]}\n")
    return "".join(lines)


def add_overall_lines(text):
    """overall.yaml with the metrics' options after ``metric_decimal_place``."""
    new = overall_lines()
    if new in text:
        return text
    for line in new.splitlines(keepends=True):
        key = line.split(":")[0]
        if re.search(rf"^{key}:", text, re.M):
            raise ExportError(
                f"{OVERALL} already sets {key}, not as the export writes it (edited by "
                "hand?); restore the file (git checkout) and export again"
            )
    lines = text.splitlines(keepends=True)
    at = [i + 1 for i, line in enumerate(lines) if line.startswith(OVERALL_AFTER)]
    at = at[0] if at else len(lines)
    if at == len(lines) and lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    return "".join(lines[:at] + [new] + lines[at:])


#: RecBole's docs that list the ranking metrics
DOCS_LISTS = (
    "docs/source/user_guide/config/evaluation_settings.rst",
    "docs/source/user_guide/train_eval_intro.rst",
)
METRIC_LIST = re.compile(r"^(\s*Ranking-based\s+.*?)(\s*)$", re.M)
OPTIONS_AFTER = "- ``metric_decimal_place(int)``"
OPTIONS = """\
- ``category_field (str)``: The item feature (a ``token_seq`` column of the ``.item``
  file, loaded by ``load_col``) that holds each item's categories, read by the
  category-diversity metrics ``CC``, ``ILD`` and ``AccDivF1``. Defaults to
  ``categories``.
- ``ild_distance (str)``: The distance between two items' category sets in ``ILD``:
  ``cosine`` or ``jaccard``. Defaults to ``cosine``.
- ``accdivf1_accuracy_metrics (list)`` and ``accdivf1_diversity_metrics (list)``: The
  top-k metrics whose means are the accuracy and the diversity that ``AccDivF1``
  combines (their harmonic mean). Default to ``['Recall', 'NDCG']`` and ``['CC', 'ILD']``.
"""


def add_docs(text):
    """A docs page with our metrics in its ranking-metric list (and their options)."""
    match = METRIC_LIST.search(text)
    if match is None:
        raise ExportError("a RecBole docs page without its 'Ranking-based' metric list")
    names, end = ", ".join(METRIC_NAMES), match.end(1)
    if names not in match.group(1):
        text = f"{text[:end]}, {names}{text[end:]}"
    if OPTIONS_AFTER in text and "``category_field (str)``" not in text:
        lines = text.splitlines(keepends=True)
        at = 1 + next(i for i, l in enumerate(lines) if l.startswith(OPTIONS_AFTER))
        while at < len(lines) and lines[at].startswith("  ") and lines[at].strip():
            at += 1  # the option's continuation lines
        text = "".join(lines[:at] + [OPTIONS] + lines[at:])
    return text


def test_file():
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "recbole_tests", os.path.basename(TEST_FILE))
    return format_source(read_text(path))


#: RecBole's docs pages in short, as the edit meets them
_DOCS_SHAPES = {
    DOCS_LISTS[0]: "  Ranking-based     Recall, MRR\n\n"
    "- ``metric_decimal_place(int)``: The decimal place. Defaults to ``4``.\n",
    DOCS_LISTS[1]: "  Ranking-based     Recall, MRR\n\n",
}


def files_table():
    """The files of the metrics' pull request (RecBole's: the installed ones)."""
    import recbole

    from recbole_attn.upstream.recbole_files import added_lines, table

    root = os.path.dirname(os.path.dirname(recbole.__file__))

    def read(path):
        return read_text(os.path.join(root, path))

    out, _ = metric_files(read)
    edits = {p: added_lines(read(p), t) for p, t in out.items() if p != TEST_FILE}
    for path, shape in _DOCS_SHAPES.items():
        edits[path] = added_lines(shape, add_docs(shape))
    return table(with_headers({TEST_FILE: out[TEST_FILE]}), edits)


def pr_description():
    from recbole_attn.evaluator import metrics

    doc = "Notation:" + metrics.__doc__.split("Notation:", 1)[1].rstrip()
    return (
        "# Add category-diversity metrics CC, ILD and AccDivF1\n\n"
        "Top-k metrics of the categories of the recommended items, as PAtt (KDD'24) "
        "reports them (its F1 is `AccDivF1` here: the harmonic mean of accuracy and "
        "diversity, not of precision and recall), for any RecBole model on any dataset "
        "whose `.item` file has a `token_seq` category column (the item→category table "
        "reaches the metrics through the collector, under `data.item_categories`).\n\n"
        f"{doc}\n\n"
        "## What changes\n\n"
        "- `recbole/evaluator/base_metric.py`: `CategoryMetric` (the base of CC and ILD) "
        "and the name of the category table the metrics and the collector share.\n"
        "- `recbole/evaluator/metrics.py`: `CC`, `ILD`, `AccDivF1`.\n"
        "- `recbole/evaluator/collector.py`: `Collector.data_collect` stores the "
        "item→category table under `data.item_categories` when a metric needs it "
        "(`collected_item_categories`: a `ValueError` when `category_field` is not a "
        "loaded `token_seq` item feature).\n"
        "- `recbole/properties/overall.yaml`: the options `category_field`, "
        "`ild_distance`, `accdivf1_accuracy_metrics`, `accdivf1_diversity_metrics` with their "
        "defaults, documented in `evaluation_settings.rst`.\n\n"
        f"## Files\n\n{files_table()}\n\n"
        "## Tests\n\n"
        f"`{TEST_FILE}`: CC, ILD (cosine and Jaccard) and AccDivF1 against direct loops "
        "over the recommended lists, AccDivF1's components, the options' defaults, the "
        "errors, and the collector on `tests/test_data` (its `class` genres).\n"
    )


def metric_files(read, earlier=None):
    """``({path: text}, {path: block added})``: what the metric export writes."""
    out, added = edited_evaluator_files(read, earlier)
    out[TEST_FILE] = test_file()
    overall = read(OVERALL)
    if overall is not None:
        out[OVERALL] = add_overall_lines(overall)
    for path in DOCS_LISTS:
        text = read(path)
        if text is not None:
            out[path] = add_docs(text)
    return out, added
