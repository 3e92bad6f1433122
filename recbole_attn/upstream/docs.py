"""The files generated from the option declarations and the model files: the models'
``properties/model/<Name>.yaml``, the base class's block of ``properties/overall.yaml``,
the option tables of ``docs/models.md`` and the pull requests in ``docs/upstream.md``.
A test checks that the shipped files are these::

    python -m recbole_attn.upstream.docs            # rewrite them
    python -m recbole_attn.upstream.docs --check    # only say which differ (exit 1)
"""

import os

from recbole_attn.options.declared import (
    OVERALL_BEGIN,
    OVERALL_END,
    base_entries,
    docs_markers,
    docs_table,
    model_yaml,
    overall_block,
    replace_between,
)
from recbole_attn.upstream.sources import read_text


def generated_files(root):
    """path -> text of every generated file under the checkout ``root``."""
    from recbole_attn.sequential.models import MODELS
    from recbole_attn.sequential.recommender import AttnSequentialRecommender as Base
    from recbole_attn.upstream.export import DOCS_BEGIN, DOCS_END, docs_section

    props = os.path.join(root, "properties")
    out = {
        os.path.join(props, "model", f"{name}.yaml"): model_yaml(cls)
        for name, cls in MODELS.items()
    }
    path = os.path.join(props, "overall.yaml")
    block = overall_block(Base)
    out[path] = replace_between(
        read_text(path), OVERALL_BEGIN, OVERALL_END, block, path
    )
    path = os.path.join(root, "docs", "models.md")
    tables = {"base": docs_table(None, base_entries(Base))}
    tables.update({name: docs_table(cls) for name, cls in MODELS.items()})
    out[path] = read_text(path)
    for name, table in tables.items():
        out[path] = replace_between(out[path], *docs_markers(name), table, path)
    path = os.path.join(root, "docs", "upstream.md")
    out[path] = replace_between(
        read_text(path), DOCS_BEGIN, DOCS_END, docs_section(), path
    )
    return out


def main(argv=None):
    from recbole_attn.options.arguments import command_parser

    parser = command_parser("python -m recbole_attn.upstream.docs", __doc__)
    parser.add_argument("--check", action="store_true", help="only say which differ")
    args = parser.parse_args(argv)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    differ = []
    for path, text in generated_files(root).items():
        if read_text(path) != text:
            differ.append(path)
            if not args.check:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
    for path in differ:
        print(
            ("differs: " if args.check else "rewritten: ") + os.path.relpath(path, root)
        )
    return 1 if args.check and differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
