"""
recbole_attn.upstream.export
############################

``recbole-attn export-upstream --recbole_dir=DIR``: our models written into a RecBole
checkout the way RecBole's own models are contributed, one pull request a model: the
model files the plugin runs, copied (:mod:`recbole_attn.upstream.sources`), so that the
export is never a second copy kept by hand:

* ``recbole/model/sequential_recommender/<name>.py`` per model: the model file of
  :mod:`recbole_attn.model` (a ``SequentialRecommender`` importing only torch, numpy,
  scipy, RecBole and, where the model builds on one, another exported model's file);
* ``recbole/properties/model/<Name>.yaml``: the model's yaml with the keys of our base
  class that it reads, without the plugin's training keys;
* the model's line in ``recbole/model/sequential_recommender/__init__.py``, its docs page
  ``docs/source/user_guide/model/sequential/<name>.rst`` (and its line in
  ``model_intro.rst``), its entry in ``asset/model_list.json`` and its cases in
  ``tests/model/test_model_auto.py``;
* the category metrics CC, ILD and AccDivF1 in RecBole's evaluator, their own pull
  request: with every model (no ``--models``) or alone (``--models=``), not with
  ``--models=NAMES`` unless ``--metrics=True`` (:mod:`recbole_attn.upstream.metric_files`);
* with ``--pr_dir``: one pull-request description per model (``<Name>.md``) and one for
  the metrics (``metrics.md``).

No file carries a mark of the export: it records what it wrote in the checkout's
``.git`` folder (:data:`MANIFEST`), outside any pull request. A file it wrote before is
rewritten, unless it was edited since (``--overwrite`` replaces it); any other existing
file of those names is refused unless it already holds what the export would write, and
so is a pull-request description with other text. RecBole's own files get our lines once,
recognised by their content: a second export leaves them, replaces what an earlier
export wrote, and refuses (one line) where they were edited by hand. Every file is
staged before any is moved into place.
"""

import argparse
import hashlib
import json
import os
import sys

from recbole_attn.files import write_files
from recbole_attn.upstream import metric_files
from recbole_attn.errors import ExportError
from recbole_attn.upstream.models import MODELS
from recbole_attn.upstream.recbole_files import (
    add_docs_lines,
    add_init_lines,
    add_model_list_entries,
    add_test_cases,
    docs_page,
    pr_description,
)
from recbole_attn.upstream.sources import (
    imported_models,
    own_paths,
    python_files,
)
from recbole_attn.upstream.yaml_files import model_yaml

#: what the last export wrote into a checkout: relative path -> sha256 of the text (in
#: the checkout's .git folder when it has one, so that no pull request carries it)
MANIFEST = "recbole-attn-export.json"


def _manifest_path(recbole_dir):
    git = os.path.join(recbole_dir, ".git")
    if os.path.isdir(git):
        return os.path.join(git, MANIFEST)
    return os.path.join(recbole_dir, "." + MANIFEST)


def _digest(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _read_manifest(recbole_dir):
    try:
        with open(_manifest_path(recbole_dir), encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        return {}
    return manifest if isinstance(manifest, dict) else {}


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def check_checkout(recbole_dir):
    needed = [
        "recbole/model/sequential_recommender/__init__.py",
        "recbole/properties/model",
        "tests/model/test_model_auto.py",
        *metric_files.EVALUATOR_FILES,
    ]
    missing = [p for p in needed if not os.path.exists(os.path.join(recbole_dir, p))]
    if missing:
        raise ExportError(
            f"{recbole_dir} is not a RecBole checkout (missing {', '.join(missing)}); "
            "clone https://github.com/RUCAIBox/RecBole and pass its folder"
        )


def with_dependencies(names, files):
    """``names`` and the models their files import (DPAtt needs PAtt's file, FPARec
    PARec's, AWRSR STOSA's), in :data:`MODELS` order."""
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise ExportError(
            f"unknown model(s) {', '.join(unknown)}; exported are: {', '.join(MODELS)}"
        )
    needed = {m for n in names for m in imported_models(files, n)}
    return [n for n in MODELS if n in needed]


def planned_files(names=None):
    """``(names, {relative path: text})``: the models exported (``names``, default all,
    with the models they import) and every file the export writes whole (Python files,
    yaml, docs pages)."""
    files = python_files()
    names = with_dependencies(list(names or MODELS), files)
    out = {}
    for name in names:
        text = model_yaml(name, files)
        python, yaml_path, docs = own_paths(name)
        out[python] = files[python]
        out[yaml_path] = text
        out[docs] = docs_page(name, text, files)
    return names, out


#: RecBole's own files that get our lines, and the edit that adds them (the test cases:
#: :func:`add_test_cases`)
EDITS = {
    "recbole/model/sequential_recommender/__init__.py": add_init_lines,
    "asset/model_list.json": add_model_list_entries,
    "docs/source/user_guide/model_intro.rst": add_docs_lines,
}
TEST_CASES = "tests/model/test_model_auto.py"


def _read_in(recbole_dir):
    def read(path):
        full = os.path.join(recbole_dir, path)
        return _read(full) if os.path.isfile(full) else None

    return read


def _notes(pr_notes, name):
    """The measurements of model ``name`` for its pull request: ``<pr_notes>/<name>.md``,
    or None."""
    path = os.path.join(pr_notes, f"{name}.md") if pr_notes else None
    return _read(path) if path and os.path.isfile(path) else None


def export(
    recbole_dir, names=None, pr_dir=None, metrics=True, pr_notes=None, overwrite=False
):
    """Write the export of ``names`` (default: every model; the models they import come
    with them; ``[]``: none) and, with ``metrics``, of the category metrics into the
    RecBole checkout ``recbole_dir``; returns the paths written (relative).

    All or nothing: every file is staged first, then all are moved into place. Nothing is
    written when a file of ours would replace one of theirs, when a file an earlier export
    wrote was edited since (its text differs from what that export recorded), when our
    lines in RecBole's own files were edited by hand, or when a pull-request description
    in ``pr_dir`` exists with other text; ``overwrite`` replaces edited files and
    descriptions."""
    check_checkout(recbole_dir)
    if names == []:
        names, files = [], {}
    else:
        names, files = planned_files(names)
    manifest = _read_manifest(recbole_dir)
    written = manifest.get("written", {})
    read = _read_in(recbole_dir)
    metric_edits, blocks = {}, {}
    if metrics:
        metric_edits, blocks = metric_files.metric_files(
            read, manifest.get("blocks", {})
        )
        # the new test file and overall.yaml's keys are ours, RecBole's evaluator files
        # and docs are edited
        files[metric_files.TEST_FILE] = metric_edits.pop(metric_files.TEST_FILE)
    _refuse_theirs(recbole_dir, files, written, overwrite)
    edited = {
        path: edit(read(path), names)
        for path, edit in EDITS.items()
        if names and read(path) is not None
    }
    methods = dict(manifest.get("methods", {}))
    if names:
        edited[TEST_CASES], new = add_test_cases(read(TEST_CASES), names, methods)
        methods.update(new)
    edited.update(metric_edits)
    descriptions = {}
    if pr_dir:
        for name in names:
            # its pull request: its files and those of the models it imports
            needed = with_dependencies([name], python_files())
            own = {p: files[p] for n in needed for p in own_paths(n)}
            descriptions[os.path.join(pr_dir, f"{name}.md")] = pr_description(
                name, own, _notes(pr_notes, name), [n for n in needed if n != name]
            )
        if metrics:
            descriptions[os.path.join(pr_dir, "metrics.md")] = (
                metric_files.pr_description()
            )
        changed = [
            p
            for p, text in descriptions.items()
            if os.path.exists(p) and _read(p) != text
        ]
        if changed and not overwrite:
            raise ExportError(
                f"{changed[0]} exists with other text (a description edited by hand, or "
                "of an earlier version); choose another --pr_dir, or pass --overwrite "
                "to replace it"
            )
    record = {
        "written": {**written, **{p: _digest(t) for p, t in files.items()}},
        "methods": methods,
        "blocks": {**manifest.get("blocks", {}), **blocks},
    }
    out = {os.path.join(recbole_dir, p): t for p, t in {**files, **edited}.items()}
    out[_manifest_path(recbole_dir)] = json.dumps(record, indent=1, sort_keys=True)
    write_files({**out, **descriptions}, "the export", overwrite=True)
    return sorted(files) + sorted(edited)


def _refuse_theirs(recbole_dir, files, written, overwrite):
    """An :class:`ExportError` for the first file the export would write over: one it did
    not write (unless it holds what the export writes), or one an earlier export wrote
    whose text was changed since (a hand edit the export would revert; ``overwrite``
    replaces it)."""
    for path, text in files.items():
        full = os.path.join(recbole_dir, path)
        if not os.path.isfile(full):
            if os.path.exists(full):
                raise ExportError(f"{full} exists and is not a file")
            continue
        current = _read(full)
        if current == text:
            continue
        if path not in written:
            raise ExportError(
                f"{full} exists and was not written by recbole-attn export-upstream; "
                "export into a fresh RecBole checkout (or remove that file)"
            )
        if _digest(current) != written[path] and not overwrite:
            raise ExportError(
                f"{full} was edited since recbole-attn export-upstream wrote it; the "
                "export would undo those edits. Commit or move them, or pass "
                "--overwrite to replace the file"
            )


#: the markers of the generated section of docs/upstream.md
DOCS_BEGIN = (
    "<!-- pull requests (generated: python -m recbole_attn.upstream.docs) -->\n"
)
DOCS_END = "<!-- /pull requests -->\n"


def _quoted(text):
    return "".join(
        ("> " + line).rstrip() + "\n" for line in text.rstrip("\n").split("\n")
    )


def _stosa_description():
    names, files = planned_files(["STOSA"])
    return pr_description("STOSA", files, dependencies=names[:-1])


def docs_section():
    """docs/upstream.md's section of the pull requests as a maintainer sees them: STOSA's
    and the metrics' descriptions, each with its files and lines."""
    return (
        "\n### STOSA's pull request\n\n"
        "`recbole-attn export-upstream --recbole_dir=RecBole --models=STOSA "
        "--pr_dir=prs` writes it; `prs/STOSA.md`:\n\n"
        + _quoted(_stosa_description())
        + "\n### The metrics' pull request\n\n"
        "`recbole-attn export-upstream --recbole_dir=RecBole --models= --pr_dir=prs` "
        "writes it; `prs/metrics.md`:\n\n"
        + _quoted(metric_files.pr_description())
        + "\n"
    )


def main(argv=None, prog="recbole-attn export-upstream"):
    """``recbole-attn export-upstream``; returns the exit status."""
    from recbole_attn.options.arguments import OneLineParser, guarded

    parser = OneLineParser(
        prog=prog,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--recbole_dir", required=True, help="a RecBole checkout (git clone of RecBole)"
    )
    parser.add_argument(
        "--models", help=f"comma-separated (default: all of {','.join(MODELS)})"
    )
    parser.add_argument(
        "--metrics",
        choices=["True", "False"],
        help="also export the category metrics CC, ILD and AccDivF1 (their own pull "
        "request; default: with every model, or alone with --models=, not with "
        "--models=NAMES)",
    )
    parser.add_argument(
        "--pr_dir", help="also write one pull-request description per model here"
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace exported files edited since the last export, and existing "
        "pull-request descriptions",
    )
    parser.add_argument(
        "--pr_notes",
        help="a folder of <Model>.md measurements to put into the descriptions "
        "(recbole_attn's experiments/recbole_training_office/pr_notes)",
    )
    args = parser.parse_args(argv)
    if args.pr_notes and not os.path.isdir(args.pr_notes):
        parser.error(f"--pr_notes={args.pr_notes} is not a folder")

    def run():
        names = None
        if args.models is not None:  # --models= (empty): the metrics alone
            names = [n.strip() for n in args.models.split(",") if n.strip()]
        metrics = not names if args.metrics is None else args.metrics == "True"
        written = export(
            args.recbole_dir,
            names,
            args.pr_dir,
            metrics,
            args.pr_notes,
            args.overwrite,
        )
        print(f"wrote {len(written)} files into {args.recbole_dir}:")
        for path in written:
            print(f"  {path}")
        if args.pr_dir:
            print(f"pull-request descriptions: {args.pr_dir}")
        return 0

    return guarded(run)


if __name__ == "__main__":
    sys.exit(main(prog="python -m recbole_attn.upstream.export"))
