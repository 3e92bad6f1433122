"""
recbole_attn.options.arguments
##############################

The layer every command stands on (the bottom floor: it imports nothing of the package
but the errors): a parser whose errors are one line (:class:`OneLineParser`,
:func:`command_parser`) and the wrapper that turns a
:class:`~recbole_attn.errors.RecboleAttnError` into one ``error:`` line and an exit
status (:func:`guarded`). The commands themselves: ``recbole_attn.cli`` (train, search,
evaluate), ``recbole_attn.commands.recommend``, ``recbole_attn.commands.viz``, ``recbole_attn.commands.compare``,
``recbole_attn.data.convert``, ``recbole_attn.upstream.export``.
"""

import argparse
import contextlib
import re
import signal
import sys
import threading


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
    training one line and 130; returns the command's exit status. A SIGTERM (what
    schedulers and ``timeout`` send) stops the command as a Ctrl-C does, so that it
    says what is saved and removes its temporary files; its exit status is 143."""
    from recbole_attn.errors import RecboleAttnError

    with sigterm_as_interrupt() as terminated:
        try:
            return command(*args, **kwargs)
        except RecboleAttnError as err:
            print(f"error: {err}", file=sys.stderr)
            if terminated and isinstance(err, KeyboardInterrupt):
                return 128 + signal.SIGTERM
            return err.exit_status
        except KeyboardInterrupt:
            print("error: interrupted; nothing was saved", file=sys.stderr)
            return 128 + signal.SIGTERM if terminated else 130


@contextlib.contextmanager
def sigterm_as_interrupt():
    """Inside the block a SIGTERM raises :class:`KeyboardInterrupt` in the main thread
    (Python's default ends the process at once: no message, no clean-up); yields a list
    that holds the signal once one came. Outside the main thread, nothing changes."""
    terminated = []
    if threading.current_thread() is not threading.main_thread():
        yield terminated
        return

    def interrupt(signum, frame):
        if not terminated:  # a second SIGTERM while stopping does not cut the clean-up
            terminated.append(signum)
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield terminated
    finally:
        signal.signal(signal.SIGTERM, previous)
