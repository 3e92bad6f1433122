"""
recbole_attn.errors
###################

Errors in the user's input (configuration, dataset). The CLI prints them without a stack
trace. They live in this small module so that every part of the package can raise them
without importing the pipeline; ``recbole_attn.quick_start`` re-exports them.
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
