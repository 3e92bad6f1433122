"""Dataset converters: raw public files -> RecBole atomic files with item categories
(``recbole-attn convert <name>``, :data:`CONVERTERS`; docs/datasets.md). Nothing of
RecBole runs."""

import importlib
import sys

#: converter name -> what it reads
CONVERTERS = {
    "amazon": "Amazon review / ratings files (+ metadata: categories, brand)",
    "seqfile": "STOSA/S3Rec/PAtt sequence files 'uid i1 i2 ...' (+ item2attributes.json)",
    "pairs": "SASRec-style 'user item' files, one interaction a line in time order (Games)",
    "movielens": "MovieLens-1M/10M ratings.dat (+ movies.dat: genres)",
    "anime": "Anime rating.csv (+ anime.csv: genres)",
}


def usage(prog="recbole-attn convert"):
    lines = [f"usage: {prog} {{{','.join(CONVERTERS)}}} [options]", "", "converters:"]
    lines += [f"  {name:<10} {what}" for name, what in CONVERTERS.items()]
    lines += ["", f"{prog} <name> --help shows a converter's options"]
    return "\n".join(lines)


def main(argv=None, prog="recbole-attn convert"):
    """``recbole-attn convert <name> [options]``; returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage(prog), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in CONVERTERS:
        print(
            f"error: unknown converter {name!r}; choose one of {', '.join(CONVERTERS)}",
            file=sys.stderr,
        )
        return 2
    from recbole_attn.data.convert import cli

    module = importlib.import_module(f"recbole_attn.data.convert.{name}")
    return cli.run_main(module.main, rest, prog=f"{prog} {name}")
