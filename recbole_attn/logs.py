"""
recbole_attn.logs
#################

The console and the log file of a run: RecBole's formats and levels (``state``), a log file
``log/<model>/<model>-<dataset>-<time>-<token>.log`` that no concurrent run can share
(RecBole's name has only the second and a hash of the configuration), and a concise
console: the configuration, dataset and model summaries go to the log file only unless
``verbose``.
"""

import contextlib
import logging
import os
import re
import sys

from recbole_attn.files import claim_file, run_stem

#: the marker of the handlers :func:`init_logging` installs (replaced at the next run)
_OURS = "_recbole_attn_handler"
#: ``logger.info(..., extra=DETAIL)``: the log file only, unless verbose
DETAIL = {"detail": True}
LOG_ROOT = "log"

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}


#: RecBole's four to five lines per epoch (training, evaluation, validation result,
#: saving) and its closing line (which counts epochs from 0), which the console replaces
#: by the trainer's lines (epochs counted from 1)
_EPOCH_RECORD = re.compile(
    r"^(epoch \d+ (training|evaluating)|valid result|Saving current"
    r"|Finished training, best eval result in epoch)"
)
_COLOR = re.compile(r"\x1b\[[0-9;]*m")


class _ConsoleFilter(logging.Filter):
    """Keeps records logged with ``extra=DETAIL`` (the configuration, dataset and model
    summaries), RecBole's messages below WARNING while :attr:`quiet` is set (loading
    the data) and RecBole's lines of every epoch while :attr:`epochs` is set (training:
    the trainer prints one line per epoch) out of the console; the log file still gets
    them."""

    quiet = False
    epochs = False

    def filter(self, record):
        if self.quiet and record.levelno < logging.WARNING:
            return False
        if self.epochs and record.levelno < logging.WARNING:
            if _EPOCH_RECORD.match(_COLOR.sub("", str(record.msg))):
                return False
        return not getattr(record, "detail", False)


def _console_filters():
    return [
        f
        for handler in logging.getLogger().handlers
        for f in handler.filters
        if isinstance(f, _ConsoleFilter)
    ]


@contextlib.contextmanager
def epoch_lines_on_console():
    """Inside the block (training), RecBole's lines of every epoch go to the log file
    only; the console gets the trainer's one line per epoch."""
    filters = _console_filters()
    for f in filters:
        f.epochs = True
    try:
        yield
    finally:
        for f in filters:
            f.epochs = False


@contextlib.contextmanager
def log_file_only():
    """RecBole's INFO messages inside the block (dataset and dataloader summaries) go to
    the log file only, where the console is concise."""
    filters = _console_filters()
    for f in filters:
        f.quiet = True
    try:
        yield
    finally:
        for f in filters:
            f.quiet = False


def init_logging(config, verbose=False, log_file=True):
    """The console and a new log file of this run (RecBole's formats, level ``state``);
    unless ``verbose``, the console gets the run's progress and results and the log file
    everything. The handlers of an earlier run in this process are replaced; where the
    root logger has handlers of someone else's, they are kept and none is added. Returns
    the log file's path (None when logging is configured elsewhere, or without
    ``log_file``: the console alone)."""
    import colorlog
    from recbole.utils.logger import RemoveColorFilter, log_colors_config

    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, _OURS, False)]:
        root.removeHandler(handler)
        handler.close()
    if root.handlers:
        return None
    level = _LEVELS.get(str(config["state"] or "info").lower(), logging.INFO)
    handlers, path = [], None
    if log_file:
        folder = os.path.join(LOG_ROOT, config["model"])
        path = claim_file(
            folder, run_stem(config["model"], config["dataset"]), ".log"
        )  # exclusive: no concurrent run writes into it
        file_handler = logging.FileHandler(path, mode="a", encoding="utf-8")
        file_handler.setFormatter(
            logging.Formatter(
                "%(asctime)-15s %(levelname)s  %(message)s", "%a %d %b %Y %H:%M:%S"
            )
        )
        file_handler.addFilter(RemoveColorFilter())
        handlers.append(file_handler)
    console = logging.StreamHandler(sys.stderr)
    if sys.stderr.isatty():
        console.setFormatter(
            colorlog.ColoredFormatter(
                "%(log_color)s%(asctime)-15s %(levelname)s  %(message)s",
                "%d %b %H:%M",
                log_colors=log_colors_config,
            )
        )
    else:  # a file or a pipe: no colour codes
        console.setFormatter(
            logging.Formatter(
                "%(asctime)-15s %(levelname)s  %(message)s", "%d %b %H:%M"
            )
        )
        console.addFilter(RemoveColorFilter())
    if not verbose:
        console.addFilter(_ConsoleFilter())
    for handler in [console] + handlers:
        handler.setLevel(level)
        setattr(handler, _OURS, True)
        root.addHandler(handler)
    root.setLevel(level)
    return path


def show_progress(config):
    """``show_progress``: a progress bar per epoch; unset (the default) = when the console
    (stderr) is a terminal; RecBole logs one summary line per epoch in any case."""
    value = config["show_progress"]
    return sys.stderr.isatty() if value is None else bool(value)


def quiet_logging():
    """Silence RecBole's console output (tests, tuning)."""
    logging.getLogger().setLevel(logging.ERROR)
