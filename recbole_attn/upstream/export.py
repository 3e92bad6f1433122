"""``recbole-attn export-upstream --recbole_dir=DIR``: our models written into a RecBole
checkout as RecBole's own files, one pull request a model (its model file, yaml and docs
page, its lines in RecBole's model lists and ``test_model_auto.py``), and the category
metrics CC, ILD and AccDivF1 in RecBole's evaluator (their own pull request); with
``--pr_dir``, the pull-request descriptions. What it wrote is recorded in the checkout's
``.git`` folder: a later export rewrites its own files and refuses to undo a hand edit.
All or nothing: each file is staged before any is moved into place (docs/upstream.md).
"""

import contextlib
import datetime
import hashlib
import json
import os
import subprocess
import sys

from recbole_attn.errors import ExportError
from recbole_attn.files import finish_publishes, write_files
from recbole_attn.upstream import metric_files
from recbole_attn.upstream.models import MODELS
from recbole_attn.upstream.recbole_files import EDITS, MODEL_COUNTS, TEST_CASES
from recbole_attn.upstream.recbole_files import add_test_cases, add_to_model_counts
from recbole_attn.upstream.recbole_files import new_models
from recbole_attn.upstream.recbole_files import docs_page, pr_description
from recbole_attn.upstream.sources import imported_models, own_paths
from recbole_attn.upstream.sources import python_files, read_text, with_headers
from recbole_attn.upstream.yaml_files import model_yaml

MODEL_INTRO = "docs/source/user_guide/model_intro.rst"
#: what the last export wrote (path -> sha256), in the checkout's .git folder
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
        manifest = json.loads(read_text(_manifest_path(recbole_dir)) or "{}")
    except (OSError, ValueError):
        return {}
    return manifest if isinstance(manifest, dict) else {}


def check_checkout(recbole_dir):
    needed = [
        "recbole/model/sequential_recommender/__init__.py",
        "recbole/properties/model",
        TEST_CASES,
        *metric_files.EVALUATOR_FILES,
    ]
    missing = [p for p in needed if not os.path.exists(os.path.join(recbole_dir, p))]
    if missing:
        raise ExportError(
            f"{recbole_dir} is not a RecBole checkout (missing {', '.join(missing)}); "
            "clone https://github.com/RUCAIBox/RecBole and pass its folder"
        )


def with_dependencies(names, files):
    """``names`` and the models their files import, in :data:`MODELS` order."""
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise ExportError(
            f"unknown model(s) {', '.join(unknown)}; exported are: {', '.join(MODELS)}"
        )
    needed = {m for n in names for m in imported_models(files, n)}
    return [n for n in MODELS if n in needed]


def author_of(recbole_dir):
    """``(name, email)`` of who exports: git's author (its environment, else config)."""
    found = []
    for key in ("name", "email"):
        value = os.environ.get(f"GIT_AUTHOR_{key.upper()}")
        if not value:
            with contextlib.suppress(OSError):  # no git installed: as none set
                value = subprocess.run(
                    ["git", "-C", recbole_dir, "config", f"user.{key}"],
                    capture_output=True,
                    text=True,
                ).stdout.strip()
        if not value:
            raise ExportError(
                "the exported files start with RecBole's header, which names their "
                f"author (# @Author, # @Email): no git user.{key} is set; run git -C "
                f"{recbole_dir} config user.{key} VALUE (or set GIT_AUTHOR_NAME and "
                "GIT_AUTHOR_EMAIL)"
            )
        found.append(value)
    return tuple(found)


def planned_files(names=None):
    """``(names, {path: text})``: the models exported and the files written whole."""
    files = python_files()
    names = with_dependencies(list(names or MODELS), files)
    out = {}
    for name in names:
        python, yaml_path, docs = own_paths(name)
        out[python], out[yaml_path] = files[python], model_yaml(name, files)
        out[docs] = docs_page(name, out[yaml_path], files)
    return names, out


def _pr_descriptions(pr_dir, names, files, pr_notes, metrics):
    """``{path: text}`` of the pull-request descriptions."""
    out = {}
    for name in names:
        needed = with_dependencies([name], python_files())
        own = {p: files[p] for n in needed for p in own_paths(n)}
        notes = pr_notes and read_text(os.path.join(pr_notes, f"{name}.md"))
        out[os.path.join(pr_dir, f"{name}.md")] = pr_description(
            name, own, notes, [n for n in needed if n != name]
        )
    if metrics:
        out[os.path.join(pr_dir, "metrics.md")] = metric_files.pr_description()
    return out


def export(
    recbole_dir, names=None, pr_dir=None, metrics=True, pr_notes=None, overwrite=False
):
    """Export ``names`` (default all, ``[]`` none) and the metrics into ``recbole_dir``;
    returns the paths written. ``overwrite``: replace files and descriptions edited."""
    check_checkout(recbole_dir)
    # an export stopped midway (a file that could not be replaced, a kill) is finished
    # before the checkout is read: its files and its record agree again
    within = [recbole_dir, pr_dir]
    finish_publishes([_manifest_path(recbole_dir)], "the export", within)
    names, files = ([], {}) if names == [] else planned_files(names)
    manifest = _read_manifest(recbole_dir)
    written = manifest.get("written", {})

    def read(path):
        return read_text(os.path.join(recbole_dir, path))

    metric_edits, blocks = {}, {}
    if metrics:
        metric_edits, blocks = metric_files.metric_files(
            read, manifest.get("blocks", {})
        )
        # the new test file is ours; RecBole's files are edited
        files[metric_files.TEST_FILE] = metric_edits.pop(metric_files.TEST_FILE)
    files = with_headers(
        files, author_of(recbole_dir), f"{datetime.date.today():%Y/%m/%d}"
    )
    _refuse_theirs(recbole_dir, files, written, overwrite)
    edited = {
        path: edit(read(path), names)
        for path, edit in EDITS.items()
        if names and read(path) is not None
    }
    # RecBole's count of its models, raised by the models new to model_intro.rst
    added = len(new_models(read(MODEL_INTRO), names))
    for path in MODEL_COUNTS if added else ():
        if read(path) is not None:
            text = edited.get(path, read(path))
            edited[path] = add_to_model_counts(text, added, path)
    methods = dict(manifest.get("methods", {}))
    if names:
        edited[TEST_CASES], new = add_test_cases(read(TEST_CASES), names, methods)
        methods.update(new)
    edited.update(metric_edits)
    descriptions = {}
    if pr_dir:
        descriptions = _pr_descriptions(pr_dir, names, files, pr_notes, metrics)
        changed = [
            p
            for p, t in descriptions.items()
            if os.path.exists(p) and read_text(p) != t
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
    # the record last: its plan is kept beside it while the files are replaced
    write_files({**descriptions, **out}, "the export", overwrite=True)
    return sorted(files) + sorted(edited)


def _refuse_theirs(recbole_dir, files, written, overwrite):
    """Refuse to write over a file the export did not write, or one edited since."""
    for path, text in files.items():
        full = os.path.join(recbole_dir, path)
        if not os.path.isfile(full):
            if os.path.exists(full):
                raise ExportError(f"{full} exists and is not a file")
            continue
        current = read_text(full)
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
        f"> {line}".rstrip() + "\n" for line in text.rstrip("\n").split("\n")
    )


def docs_section():
    """docs/upstream.md's section: STOSA's and the metrics' pull requests."""
    names, files = planned_files(["STOSA"])
    files = with_headers(files)
    stosa = pr_description("STOSA", files, dependencies=names[:-1])
    return (
        "\n### STOSA's pull request\n\n"
        "`recbole-attn export-upstream --recbole_dir=RecBole --models=STOSA "
        f"--pr_dir=prs` writes it; `prs/STOSA.md`:\n\n{_quoted(stosa)}"
        "\n### The metrics' pull request\n\n"
        "`recbole-attn export-upstream --recbole_dir=RecBole --models= --pr_dir=prs` "
        f"writes it; `prs/metrics.md`:\n\n{_quoted(metric_files.pr_description())}\n"
    )


def main(argv=None, prog="recbole-attn export-upstream"):
    from recbole_attn.options.arguments import command_parser, guarded

    parser = command_parser(prog, __doc__)
    add = parser.add_argument
    add(
        "--recbole_dir", required=True, help="a RecBole checkout (git clone of RecBole)"
    )
    add("--models", help=f"comma-separated (default: all of {','.join(MODELS)})")
    add(
        "--metrics",
        choices=["True", "False"],
        help="also export the category metrics CC, ILD and AccDivF1 (their own pull "
        "request; default: with every model, or alone with --models=, not with "
        "--models=NAMES)",
    )
    add("--pr_dir", help="also write one pull-request description per model here")
    add(
        "--overwrite",
        action="store_true",
        help="replace exported files edited since the last export, and existing "
        "pull-request descriptions",
    )
    add(
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
            args.recbole_dir, names, args.pr_dir, metrics, args.pr_notes, args.overwrite
        )
        print(f"wrote {len(written)} files into {args.recbole_dir}:")
        print("".join(f"  {path}\n" for path in written), end="")
        if args.pr_dir:
            print(f"pull-request descriptions: {args.pr_dir}")
        return 0

    return guarded(run)


if __name__ == "__main__":
    sys.exit(main(prog="python -m recbole_attn.upstream.export"))
