"""Diversity metrics and the category collector hook (work in progress)."""


def register_metrics():
    """Register recbole_attn's metrics in RecBole's registry (idempotent)."""


def validate_dataset(config, dataset):
    """Check, before training, that the dataset has what the requested metrics need."""
