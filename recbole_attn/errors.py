"""
recbole_attn.errors
###################

Every user-facing error of the package: errors in the user's input (configuration,
dataset, checkpoint, files) and runs that cannot go on. The commands print them as one
``error:`` line without a stack trace (:func:`recbole_attn.options.arguments.guarded`). They live
in this small module so that every part of the package can raise them without importing
the pipeline; the modules that raise them re-export their names.
"""


class RecboleAttnError(Exception):
    """An error in the user's input, reported without a stack trace by the CLI (one
    ``error:`` line, exit status :attr:`exit_status`)."""

    exit_status = 2


class Interrupted(RecboleAttnError, KeyboardInterrupt):
    """The user interrupted a run (Ctrl-C); the message says what was saved."""

    exit_status = 130


class ConfigError(RecboleAttnError, ValueError):
    """A configuration value is invalid or inconsistent (model hyper-parameters, training
    mode, checkpoint); the message says which key and what to set."""


class UnknownModelError(RecboleAttnError, ValueError):
    pass


class DatasetNotFoundError(RecboleAttnError, FileNotFoundError):
    pass


class CategoryFieldError(RecboleAttnError, ValueError):
    """A metric needs item categories and the dataset has no usable category field."""


class MetricConfigError(RecboleAttnError, ValueError):
    """A metric option (``ild_distance``, ``f1_accuracy_metrics``, ...) is invalid."""


class ExistingOutputError(RecboleAttnError, FileExistsError):
    """An output would replace files the user already has."""


class TrainingError(RecboleAttnError, RuntimeError):
    """Training cannot go on (a non-finite loss); the message says what to change."""


class DataError(RecboleAttnError, ValueError):
    """A dataset file or the dataset's split cannot give a meaningful run."""


class CheckpointError(RecboleAttnError, ValueError):
    """A checkpoint file cannot be read by recbole_attn, or does not fit the run."""


class ExportError(RecboleAttnError):
    """The RecBole checkout cannot take the export (not a checkout, or a file of that name
    that no export wrote)."""


class ConversionError(RecboleAttnError, ValueError):
    """A converter cannot convert its input (bad input, refused overwrite, ...); the
    message names the file and the line where it can."""
