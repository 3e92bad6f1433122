"""
What every command's parser stands on: errors of one line (:class:`CommandParser`), the
rules of its flags as argparse types and actions (:func:`checked`, :class:`TrueOrFalse`),
RecBole's ``--key=value`` overrides, and :func:`guarded`: an error as one line.
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


class CommandParser(OneLineParser):
    """A command's (sub)parser: an argument it does not know is its own error (argparse
    leaves a subparser's to the parser above), or with ``takes_overrides`` a RecBole
    override ``--key=value``, collected in ``args.overrides``."""

    takes_overrides = False

    def parse_known_args(self, args=None, namespace=None):
        """argparse's parse, then the arguments left over (none are returned)."""
        namespace, rest = super().parse_known_args(args, namespace)
        if self.takes_overrides:
            namespace.overrides = overrides(self, rest)
        elif rest:
            self.error(f"unrecognized arguments: {' '.join(rest)}")
        return namespace, []


def command_parser(prog, doc):
    """A parser whose ``--help`` shows the module docstring ``doc`` (plain text)."""
    return OneLineParser(
        prog=prog,
        description=plain_doc(doc),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def setup_command(module, parser=None, prog=None):
    """``parser`` (a new :class:`CommandParser` named ``prog`` if None) set up as the
    command ``module``: its docstring as the description, its arguments, its ``run``."""
    parser = parser or CommandParser(prog=prog)
    parser.description = plain_doc(module.__doc__)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    module.add_arguments(parser)
    parser.set_defaults(run=module.run)
    return parser


def command_main(module, argv=None, prog=None):
    """Parse ``argv`` as the command ``module``'s arguments and run it (``python -m``
    of a command's module); returns the exit status."""
    args = guarded(setup_command(module, prog=prog).parse_args, argv)
    return args if isinstance(args, int) else guarded(args.run, args)


def overrides(parser, rest):
    """``--key=value`` arguments as a dict (config overrides); anything else is one
    error line."""
    bad = [a for a in rest if not (a.startswith("--") and "=" in a)]
    if bad:
        parser.error(
            f"unrecognized arguments {' '.join(bad)}: config overrides are written "
            "--key=value (e.g. --epochs=2)"
        )
    found = {}
    for arg in rest:
        key, value = arg[2:].split("=", 1)
        if found.setdefault(key, value) != value:
            parser.error(
                f"--{key} is given twice with different values ({found[key]!r}, "
                f"{value!r}); keep one"
            )
    return found


def positive_int(text):
    """argparse ``type=``: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return value


def checked(convert, rule, message):
    """argparse ``type=``: ``convert`` (argparse's own error when it fails), then
    ``rule``; a value against it is the error line ``message.format(value=value)``."""

    def value(text):
        from recbole_attn.errors import RecboleAttnError

        result = convert(text)
        if not rule(result):
            raise RecboleAttnError(message.format(value=result))
        return result

    value.__name__ = convert.__name__  # argparse's "invalid int value: 'x'"
    return value


class TrueOrFalse(argparse.BooleanOptionalAction):
    """``--flag``, ``--no-flag``, or RecBole's spelling ``--flag=True|False``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.nargs = "?"

    def __call__(self, parser, namespace, values, option_string=None):
        """The flag's value; another word than True or False is one error line."""
        if values is None or option_string.startswith("--no-"):
            return super().__call__(parser, namespace, None, option_string)
        if values not in ("True", "False"):
            from recbole_attn.errors import RecboleAttnError

            raise RecboleAttnError(
                f"{option_string} must be True or False, got {values!r}"
            )
        setattr(namespace, self.dest, values == "True")


def guarded(command, *args, **kwargs):
    """Run a command; a ``RecboleAttnError`` is one ``error:`` line and its exit
    status, a Ctrl-C one line and 130, a SIGTERM (schedulers, ``timeout``) a Ctrl-C
    with the status 143. Returns the command's exit status."""
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
def _handling(signum, handler):
    """``handler`` for ``signum`` inside the block, then the handler before again; in
    the main thread only (Python sets handlers there alone): elsewhere nothing changes.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signum, handler)
    try:
        yield
    finally:
        signal.signal(signum, previous)


@contextlib.contextmanager
def sigterm_as_interrupt():
    """Inside the block a SIGTERM raises :class:`KeyboardInterrupt` in the main thread
    (Python's default ends the process at once: no message, no clean-up); yields a list
    that holds the signal once one came. Outside the main thread, nothing changes."""
    terminated = []

    def interrupt(signum, frame):
        if not terminated:  # a second SIGTERM while stopping does not cut the clean-up
            terminated.append(signum)
            raise KeyboardInterrupt

    with _handling(signal.SIGTERM, interrupt):
        yield terminated


@contextlib.contextmanager
def sigint_as_interrupt():
    """Inside the block a SIGINT raises :class:`KeyboardInterrupt` in the main thread,
    also where the process started with SIGINT ignored (a shell's background job,
    ``cmd &``, does; Python then installs no handler). Outside the main thread, nothing
    changes."""
    with _handling(signal.SIGINT, signal.default_int_handler):
        yield


@contextlib.contextmanager
def sigint_held():
    """Inside the block a SIGINT waits: it comes when the block ends, to the handler
    there before (an import such as ``import ray`` is not left half done; Ray's own exit
    handler, ``ray.shutdown``, fails with a traceback on a half-imported ``ray``).
    Outside the main thread, nothing changes."""
    held = []
    with _handling(signal.SIGINT, lambda signum, frame: held.append(signum)):
        yield
    if held:
        signal.raise_signal(signal.SIGINT)
