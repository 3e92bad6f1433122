"""The research wing: study definitions (``experiments.studies``), the runner
(``python -m experiments.runner``), the reports it writes from stored runs
(``experiments.reports``) and the measurement scripts (``experiments.speed`` and
others). Not part of the installed package (experiments/README.md)."""
