"""recbole_attn: attention mechanisms for sequential recommendation as a RecBole plugin.

Importing the package registers its metrics (CC, ILD, F1) in RecBole's metric registry, so
that a plain ``metrics: [Recall, NDCG, CC, ILD, F1]`` works in any RecBole config created
afterwards.
"""

from recbole_attn.compat import (
    silence_harmless_recbole_warnings,
    undo_recbole_anomaly_detection,
)

silence_harmless_recbole_warnings()  # first: importing RecBole's models raises some
undo_recbole_anomaly_detection()

from recbole_attn.evaluator import register_metrics, validate_dataset  # noqa: E402

__version__ = "0.2.0"

register_metrics()

__all__ = ["register_metrics", "validate_dataset", "__version__"]
