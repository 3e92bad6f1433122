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
* the CC, ILD and F1 metrics in RecBole's evaluator (``--metrics=False`` leaves them
  out): :mod:`recbole_attn.upstream.metric_files`;
* with ``--pr_dir``: one pull-request description per model (``<Name>.md``) and one for
  the metrics (``metrics.md``).

A file this command wrote before (it carries :data:`MARK`) is rewritten, unless it was
edited since (the export records what it wrote: :data:`MANIFEST`; ``--overwrite``
replaces it); any other existing file of those names is refused, and so is a
pull-request description with other text. Every file is staged before any is moved into
place. RecBole's own files get our lines added once (a second export replaces them).
"""

import argparse
import hashlib
import json
import os
import sys

from recbole_attn.files import write_files
from recbole_attn.upstream import metric_files
from recbole_attn.errors import ExportError
from recbole_attn.upstream.models import MARK, MODELS
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
    model_file,
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


def _ours(path):
    """Whether ``path`` is a file an export wrote (its first line carries :data:`MARK`)."""
    return os.path.isfile(path) and MARK in _read(path)[:200]


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
        out[docs] = docs_page(name, text)
    return names, out


#: RecBole's own files that get our lines, and the edit that adds them
EDITS = {
    "recbole/model/sequential_recommender/__init__.py": add_init_lines,
    "tests/model/test_model_auto.py": add_test_cases,
    "asset/model_list.json": add_model_list_entries,
    "docs/source/user_guide/model_intro.rst": add_docs_lines,
}


def _read_in(recbole_dir):
    def read(path):
        full = os.path.join(recbole_dir, path)
        return _read(full) if os.path.isfile(full) else None

    return read


def _notes(pr_notes, name):
    """The measurements of model ``name`` for its pull request: ``<pr_notes>/<name>.md``
    (written by recbole_attn's experiments), or None."""
    path = os.path.join(pr_notes, f"{name}.md") if pr_notes else None
    return _read(path) if path and os.path.isfile(path) else None


def export(
    recbole_dir, names=None, pr_dir=None, metrics=True, pr_notes=None, overwrite=False
):
    """Write the export of ``names`` (default: every model; the models they import come
    with them; ``[]``: none) and, with ``metrics``, of the CC, ILD and F1 metrics into the
    RecBole checkout ``recbole_dir``; returns the paths written (relative).

    All or nothing: every file is staged first, then all are moved into place. Nothing is
    written when a file of ours would replace one of theirs, when a file an earlier export
    wrote was edited since (its text differs from what that export recorded), or when a
    pull-request description in ``pr_dir`` exists with other text; ``overwrite``
    replaces the last two."""
    check_checkout(recbole_dir)
    if names == []:
        names, files = [], {}
    else:
        names, files = planned_files(names)
    metric_edits = {}
    if metrics:
        metric_edits = metric_files.metric_files(_read_in(recbole_dir))
        # the new test file is ours, RecBole's evaluator files and docs are edited
        files[metric_files.TEST_FILE] = metric_edits.pop(metric_files.TEST_FILE)
    for path in files:
        full = os.path.join(recbole_dir, path)
        if os.path.exists(full) and not _ours(full):
            raise ExportError(
                f"{full} exists and was not written by recbole-attn export-upstream; "
                "export into a fresh RecBole checkout (or remove that file)"
            )
    # the models an earlier export put there keep their lines (the test cases are one
    # block, rewritten whole)
    earlier = [n for n in MODELS if _ours(os.path.join(recbole_dir, model_file(n)))]
    listed = [n for n in MODELS if n in names or n in earlier]
    edited = {
        path: edit(_read(os.path.join(recbole_dir, path)), listed)
        for path, edit in EDITS.items()
        if names and os.path.exists(os.path.join(recbole_dir, path))
    }
    edited.update(metric_edits)
    manifest = _read_manifest(recbole_dir)
    if not overwrite:
        _refuse_edited(recbole_dir, files, manifest)
    descriptions = {}
    if pr_dir:
        for name in names:
            own = {p: files[p] for p in own_paths(name)}
            descriptions[os.path.join(pr_dir, f"{name}.md")] = pr_description(
                name, _notes(pr_notes, name), own
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
    manifest.update({path: _digest(text) for path, text in files.items()})
    written = {os.path.join(recbole_dir, p): t for p, t in {**files, **edited}.items()}
    written[_manifest_path(recbole_dir)] = json.dumps(
        manifest, indent=1, sort_keys=True
    )
    write_files({**written, **descriptions}, "the export", overwrite=True)
    return sorted(files) + sorted(edited)


def _refuse_edited(recbole_dir, files, manifest):
    """An :class:`ExportError` for the first file an earlier export wrote whose text was
    changed since (a hand edit the export would revert)."""
    for path, text in files.items():
        full = os.path.join(recbole_dir, path)
        if path not in manifest or not os.path.isfile(full):
            continue
        current = _read(full)
        if current != text and _digest(current) != manifest[path]:
            raise ExportError(
                f"{full} was edited since recbole-attn export-upstream wrote it; the "
                "export would undo those edits. Commit or move them, or pass "
                "--overwrite to replace the file"
            )


def main(argv=None, prog="recbole-attn export-upstream"):
    """``recbole-attn export-upstream``; returns the exit status."""
    from recbole_attn.commands import OneLineParser, guarded

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
        default="True",
        choices=["True", "False"],
        help="also export the CC, ILD and F1 metrics (default True)",
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
        written = export(
            args.recbole_dir,
            names,
            args.pr_dir,
            args.metrics == "True",
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
