"""A run's console and log file, and its line per epoch (:class:`EpochLines`)."""

import contextlib
import logging
import os
import re
import sys

from recbole_attn.errors import RecboleAttnError
from recbole_attn.files import claim_file, run_stem, write_failure

#: the marker of the handlers :func:`init_logging` installs (replaced at the next run)
_OURS = "_recbole_attn_handler"
#: ``logger.info(..., extra=DETAIL)``: the log file only, unless verbose
DETAIL = {"detail": True}
LOG_ROOT = "log"

_LEVELS = ("debug", "info", "warning", "error", "critical")
_FORMAT = "%(asctime)-15s %(levelname)s  %(message)s"


#: RecBole's lines of every epoch and its closing line, replaced on the console
_EPOCH_RECORD = re.compile(
    r"^(epoch \d+ (training|evaluating)|valid result|Saving current"
    r"|Finished training, best eval result in epoch)"
)
ANSI_COLOR = re.compile(r"\x1b\[[0-9;]*m")


class _ConsoleFilter(logging.Filter):
    """Keeps ``DETAIL`` records, and RecBole's INFO when set, off the console."""

    quiet = False
    epochs = False

    def filter(self, record):
        if self.quiet and record.levelno < logging.WARNING:
            return False
        if self.epochs and record.levelno < logging.WARNING:
            if _EPOCH_RECORD.match(ANSI_COLOR.sub("", str(record.msg))):
                return False
        return not getattr(record, "detail", False)


@contextlib.contextmanager
def console_off(flag):
    """Inside the block, ``"quiet"``: RecBole's INFO messages go to the log file only;
    ``"epochs"``: its epoch lines."""
    filters = [
        f
        for handler in logging.getLogger().handlers
        for f in handler.filters
        if isinstance(f, _ConsoleFilter)
    ]
    for f in filters:
        setattr(f, flag, True)
    try:
        yield
    finally:
        for f in filters:
            setattr(f, flag, False)


def init_logging(config, verbose=False, log_file=True):
    """The console and a new log file (its path; None if none or not ours)."""
    import colorlog
    from recbole.utils.logger import RemoveColorFilter, log_colors_config

    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, _OURS, False)]:
        root.removeHandler(handler)
        handler.close()
    if root.handlers:
        return None
    state = str(config["state"] or "info").lower()
    level = getattr(logging, state.upper()) if state in _LEVELS else logging.INFO
    handlers, path = [], None
    if log_file:
        folder = os.path.join(LOG_ROOT, config["model"])
        for part in (LOG_ROOT, folder):  # "Not a directory" said not which, nor why
            if os.path.exists(part) and not os.path.isdir(part):
                raise RecboleAttnError(
                    f"cannot write the log file: {os.path.abspath(part)} is a file; "
                    f"runs log into a folder {part!r} where they start: move the "
                    "file, or start the run in another folder"
                )
        try:  # exclusive: no concurrent run writes into it
            path = claim_file(
                folder, run_stem(config["model"], config["dataset"]), ".log"
            )
            file_handler = _LogFile(path, mode="a", encoding="utf-8")
        except OSError as err:
            reason, advice = write_failure(err, os.path.join(folder, "x.log"))
            raise RecboleAttnError(
                f"cannot write the log file under {os.path.abspath(folder)} "
                f"({reason}): {advice}, or run from another folder"
            ) from None
        file_handler.setFormatter(logging.Formatter(_FORMAT, "%a %d %b %Y %H:%M:%S"))
        file_handler.addFilter(RemoveColorFilter())
        handlers.append(file_handler)
    console = logging.StreamHandler(sys.stderr)
    if sys.stderr.isatty():
        console.setFormatter(
            colorlog.ColoredFormatter(
                "%(log_color)s" + _FORMAT, "%d %b %H:%M", log_colors=log_colors_config
            )
        )
    else:  # a file or a pipe: no colour codes
        console.setFormatter(logging.Formatter(_FORMAT, "%d %b %H:%M"))
        console.addFilter(RemoveColorFilter())
    if not verbose:
        console.addFilter(_ConsoleFilter())
    for handler in [console] + handlers:
        handler.setLevel(level)
        setattr(handler, _OURS, True)
        root.addHandler(handler)
    root.setLevel(level)
    return path


class _LogFile(logging.FileHandler):
    """The run's log file; a failed write is one warning, then the run goes on."""

    def handleError(self, record):
        err = sys.exc_info()[1]
        logging.getLogger().removeHandler(self)
        with contextlib.suppress(OSError, ValueError):
            self.close()
        self.stream = None
        reason, _ = write_failure(err, self.baseFilename)
        print(
            f"warning: cannot write the log file {self.baseFilename} ({reason}); the "
            "run goes on without it",
            file=sys.stderr,
        )


def show_progress(config):
    value = config["show_progress"]
    return sys.stderr.isatty() if value is None else bool(value)


def duration(seconds):
    """A time as people write it: ``42 s``, ``4 min 5 s``, ``2 h 10 min`` (rounded to
    the second, then to the minute from an hour on; seconds never count past 59)."""
    total = max(0, round(seconds))
    if total < 60:
        return f"{total} s"
    if total < 3600:
        minutes, rest = divmod(total, 60)
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    hours, minutes = divmod((total + 30) // 60, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def loss_names(model, count):
    names = getattr(model, "loss_names", None)
    names = tuple(names(count)) if callable(names) else ()
    if len(names) != count:
        names = ("",) if count == 1 else tuple(f"loss{i + 1}" for i in range(count))
    return names


class EpochLines:
    """The console's lines of one training, epochs counted from 1."""

    def __init__(self, trainer):
        self.trainer = trainer
        self.seconds = []  # training + validation of every evaluated epoch
        self.last_epoch = None

    def evaluated(self, epoch_idx):
        """Epoch ``epoch_idx`` was evaluated."""
        self.last_epoch = epoch_idx
        self.seconds.append(sum(self.trainer.last_epoch_seconds.values()))

    def budget_line(self):
        t = self.trainer
        return (
            f"training {t.config['model']} for up to {t.epochs} epochs (from "
            f"epoch {t.start_epoch + 1}); it stops early after {t.stopping_step} "
            f"evaluations without a better {t.valid_metric}"
        )

    def epoch_line(self, epoch_idx, valid_score):
        t = self.trainer
        losses = t.last_losses if isinstance(t.last_losses, tuple) else (t.last_losses,)
        names = loss_names(t.model, len(losses))
        loss_text = ", ".join(f"{n} {float(v):.4f}" for n, v in zip(names, losses))
        seconds = self.seconds[-1] if self.seconds else 0.0
        per_epoch = sum(self.seconds) / len(self.seconds) if self.seconds else 0.0
        left = t.epochs - epoch_idx - 1
        # RecBole stops once cur_step exceeds stopping_step: this many epochs more
        patience = (t.stopping_step - t.cur_step + 1) * t.eval_step
        best = t.best_valid_epoch
        where = "" if best is None else f", epoch {best + 1}"  # a resumed old file
        line = (
            f"epoch {epoch_idx + 1}/{t.epochs}: loss {loss_text} | "
            f"{t.valid_metric} {valid_score:.4f} (best {t.best_valid_score:.4f}"
            f"{where}) | {seconds:.1f} s"
        )
        if left > 0 and patience <= 0:
            line += (
                f" | stops here: no better {t.valid_metric} in "
                f"{t.stopping_step} evaluations"
            )
        elif left > 0:
            line += f" | left: at most {duration(left * per_epoch)}"
            if patience < left:
                line += f" ({duration(patience * per_epoch)} if it does not improve)"
        return line

    def closing_line(self):
        t = self.trainer
        trained = self.last_epoch + 1
        if trained < t.epochs:
            stop = f"stopped early after epoch {trained} of {t.epochs}"
        else:
            stop = f"done: all {t.epochs} epochs"
        best = t.best_valid_epoch
        where = "" if best is None else f" in epoch {best + 1}"
        return f"training {stop}; best {t.valid_metric} {t.best_valid_score:.4f}{where}"
