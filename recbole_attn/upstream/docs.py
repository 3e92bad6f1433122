"""The files generated from the option declarations and the model files: the models'
``properties/model/<Name>.yaml``, the base class's block of ``properties/overall.yaml``,
the option tables of ``docs/models.md`` and the pull requests in ``docs/upstream.md``.
A test checks that the shipped files are these::

    python -m recbole_attn.upstream.docs            # rewrite them
    python -m recbole_attn.upstream.docs --check    # only say which differ (exit 1)
"""

import os

from recbole_attn.files import write_files
from recbole_attn.options import declared
from recbole_attn.upstream.sources import read_text


def generated_files(root):
    """path -> text of every generated file under the checkout ``root``."""
    from recbole_attn.plugin import MODELS
    from recbole_attn.sequential.recommender import AttnSequentialRecommender as Base
    from recbole_attn.upstream.export import DOCS_BEGIN, DOCS_END, docs_section

    props = os.path.join(root, "properties")
    out = {
        os.path.join(props, "model", f"{name}.yaml"): declared.model_yaml(cls)
        for name, cls in MODELS.items()
    }
    tables = {"base": declared.docs_table(None, declared.base_entries(Base))}
    tables.update({name: declared.docs_table(cls) for name, cls in MODELS.items()})
    overall = (
        declared.OVERALL_BEGIN,
        declared.OVERALL_END,
        declared.overall_block(Base),
    )
    sections = {  # path -> [(begin marker, end marker, generated block)]
        os.path.join(props, "overall.yaml"): [overall],
        os.path.join(root, "docs", "models.md"): [
            (*declared.docs_markers(name), table) for name, table in tables.items()
        ],
        os.path.join(root, "docs", "upstream.md"): [
            (DOCS_BEGIN, DOCS_END, docs_section())
        ],
    }
    for path, blocks in sections.items():
        out[path] = read_text(path)
        for begin, end, block in blocks:
            out[path] = declared.replace_between(out[path], begin, end, block, path)
    return out


def main(argv=None):
    from recbole_attn.options.arguments import command_parser

    parser = command_parser("python -m recbole_attn.upstream.docs", __doc__)
    parser.add_argument("--check", action="store_true", help="only say which differ")
    args = parser.parse_args(argv)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    files = generated_files(root)
    differ = [path for path, text in files.items() if read_text(path) != text]
    if not args.check:  # as the export writes its files: all of them or none
        write_files(
            {path: files[path] for path in differ},
            "the generated files",
            overwrite=True,
        )
    for path in differ:
        print(
            ("differs: " if args.check else "rewritten: ") + os.path.relpath(path, root)
        )
    return 1 if args.check and differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
