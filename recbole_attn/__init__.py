"""recbole_attn: attention mechanisms for sequential recommendation as a RecBole plugin.

Importing the package makes RecBole's own API work on today's stack and answer to our
model names, and registers our metrics (CC, ILD, F1) in RecBole's metric registry, so
that ``run_recbole(model='STOSA', ...)`` and a plain ``metrics: [Recall, NDCG, CC, ILD,
F1]`` work in any RecBole run started afterwards. :mod:`recbole_attn.host` lists every
change it makes in RecBole, and why.
"""

__version__ = "0.2.0"

from recbole_attn import host  # noqa: E402

host.install()

from recbole_attn.evaluator import register_metrics, validate_dataset  # noqa: E402

__all__ = ["register_metrics", "validate_dataset", "__version__"]
