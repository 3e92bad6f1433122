"""
recbole_attn.commands
#####################

The layer every command stands on (the bottom floor: it imports nothing of the package
but the errors): a parser whose errors are one line (:class:`OneLineParser`,
:func:`command_parser`) and the wrapper that turns a
:class:`~recbole_attn.errors.RecboleAttnError` into one ``error:`` line and an exit
status (:func:`guarded`). The commands themselves: ``recbole_attn.cli`` (train, search,
evaluate), ``recbole_attn.recommend``, ``recbole_attn.viz``, ``recbole_attn.compare``,
``recbole_attn.data.convert``, ``recbole_attn.upstream.export``.
"""

import argparse
import re
import sys


def plain_doc(doc):
    """A module docstring as --help text: without its reStructuredText title, and
    ````code```` and :role:`name` as plain words."""
    lines = doc.strip("\n").splitlines()
    if len(lines) > 1 and set(lines[1]) <= set("#=-~"):
        lines = lines[2:]
    text = "\n".join(lines).strip("\n")
    text = re.sub(r":\w+:`~?([^`]+)`", r"\1", text)
    return text.replace("``", "")


class OneLineParser(argparse.ArgumentParser):
    """argparse with errors of one line (argparse prints its whole usage block first),
    and no abbreviations: ``--model`` is not ``--model_file``, and a misspelled option
    is an error rather than another option."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message):
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def command_parser(prog, doc):
    """The parser of a command whose ``--help`` shows its module docstring ``doc``
    (plain text)."""
    return OneLineParser(
        prog=prog,
        description=plain_doc(doc),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def guarded(command, *args, **kwargs):
    """Run a command: a :class:`~recbole_attn.errors.RecboleAttnError` becomes one
    ``error:`` line and its exit status (2; 130 for an interrupted run), a Ctrl-C outside
    training one line and 130; returns the command's exit status."""
    from recbole_attn.errors import RecboleAttnError

    try:
        return command(*args, **kwargs)
    except RecboleAttnError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.exit_status
    except KeyboardInterrupt:
        print("error: interrupted; nothing was saved", file=sys.stderr)
        return 130
