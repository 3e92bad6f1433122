"""
``recbole-attn`` (also ``python -m recbole_attn``, ``python run_recbole_attn.py``): one
argparse parser, a subcommand per module of :mod:`recbole_attn.commands` (its arguments
and its run); without a command word, a training run (or with ``--params_file`` a search).
"""

import importlib
import sys

from recbole_attn.options.arguments import (
    CommandParser,
    OneLineParser,
    guarded,
    setup_command,
)

PROG = "recbole-attn"
#: the command words, each a module of recbole_attn.commands (tune: run's)
COMMANDS = (
    "run",
    "tune",
    "recommend",
    "evaluate",
    "compare",
    "viz",
    "export-onnx",
    "serve",
)
#: the command words whose module has another name
MODULES = {"tune": "run", "export-onnx": "export_onnx"}
#: the commands whose own module parses their arguments (not in recbole_attn.commands)
OWN_PARSERS = {
    "convert": "recbole_attn.data.convert",
    "export-upstream": "recbole_attn.upstream.export",
}


def main(argv=None, prog=PROG):
    """``recbole-attn [command] ...``: the command's arguments parsed, then its run;
    returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    word = argv[0] if argv and argv[0] in COMMANDS + tuple(OWN_PARSERS) else None
    if word in OWN_PARSERS:
        own = importlib.import_module(OWN_PARSERS[word])
        return own.main(argv[1:], prog=f"{prog} {word}")
    if word is None:  # a training run (or a search)
        word, argv = "run", ["run", *argv]
    args = guarded(build_parser(word, prog).parse_args, argv)
    if isinstance(args, int):  # a value against its flag's rule
        return args
    return guarded(args.run, args)


def build_parser(command="run", prog=PROG):
    """The parser of every command word; only ``command``'s module is imported and
    its arguments added (``--help`` imports neither torch nor RecBole)."""
    parser = OneLineParser(prog=prog)
    words = parser.add_subparsers(
        dest="command", required=True, parser_class=CommandParser
    )
    for word in COMMANDS:
        # run and tune are the command without a word: their help is recbole-attn's
        sub = words.add_parser(word, prog=prog if word in ("run", "tune") else None)
        if word == command:
            module = MODULES.get(word, word)
            setup_command(
                importlib.import_module(f"recbole_attn.commands.{module}"), sub
            )
    return parser
