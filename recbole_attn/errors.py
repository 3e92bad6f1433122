"""Every user-facing error (one ``error:`` line, no trace), and the words for a failed
write or a file that is not text."""

import errno
import os


class RecboleAttnError(Exception):
    """An error in the user's input: one ``error:`` line."""

    exit_status = 2


class Interrupted(RecboleAttnError, KeyboardInterrupt):
    """The user interrupted a run (Ctrl-C); the message says what was saved."""

    exit_status = 130


class ConfigError(RecboleAttnError, ValueError):
    """An invalid configuration value; the message says which and what to set."""


class UnknownModelError(RecboleAttnError, ValueError):
    pass


class DatasetNotFoundError(RecboleAttnError, FileNotFoundError):
    pass


class CategoryFieldError(RecboleAttnError, ValueError):
    pass


class MetricConfigError(RecboleAttnError, ValueError):
    pass


class ExistingOutputError(RecboleAttnError, FileExistsError):
    """An output would replace files the user already has."""


class TrainingError(RecboleAttnError, RuntimeError):
    """Training cannot go on (a non-finite loss); the message says what to change."""


class DataError(RecboleAttnError, ValueError):
    pass


class CheckpointError(RecboleAttnError, ValueError):
    pass


class ExportError(RecboleAttnError):
    """The RecBole checkout cannot take the export."""


class ConversionError(RecboleAttnError, ValueError):
    """A converter cannot convert its input; the message names the file and line."""


#: errno -> (what it means for the user, what to do; ``{folder}``: the file's folder)
_WRITE_FAILURES = {
    errno.ENOSPC: ("the disk is full", "free space under {folder}"),
    errno.EDQUOT: ("the disk quota is used up", "free space in your quota"),
    errno.EFBIG: (
        "the file-size limit of this process was reached (ulimit -f)",
        "raise the limit (ulimit -f unlimited)",
    ),
    errno.EROFS: ("a read-only file system", "choose a folder you can write to"),
    errno.EACCES: ("no permission to write there", "choose a folder you can write to"),
    errno.EPERM: ("no permission to write there", "choose a folder you can write to"),
    errno.EBUSY: (
        "the file is in use",
        "close what holds it (an editor, a mount, a sync client), then run the same "
        "command again",
    ),
}


def write_failure(err, path):
    """``(reason, advice)`` for a failed write, from the ``OSError`` in the chain."""
    cause = err
    while cause is not None and not isinstance(cause, OSError):
        cause = cause.__cause__ or cause.__context__
    folder = os.path.dirname(os.path.abspath(path))
    if cause is None:
        return "the write did not complete", f"check the disk under {folder}"
    meaning, advice = _WRITE_FAILURES.get(
        cause.errno, (None, f"check the disk under {folder}")
    )
    reason = cause.strerror or str(cause)
    if meaning:
        reason = f"{reason}: {meaning}"
    return reason, advice.format(folder=folder)


def not_text_message(path, byte, position, what="file", encoding="utf-8"):
    """What to say about a file that ``encoding`` cannot decode at ``position``."""
    return (
        f"{what} {path} is not {encoding} text (byte 0x{byte.hex()} at position "
        f"{position}): is it a binary file, or saved in another encoding? Save it as "
        f"{encoding}"
    )
