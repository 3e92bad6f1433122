"""recbole_attn: attention mechanisms for sequential recommendation as a RecBole plugin.

Importing the package makes RecBole's own API work on today's stack and answer to our
model names, and registers our metrics (CC, ILD, F1) in RecBole's metric registry, so
that ``run_recbole(model='STOSA', ...)`` and a plain ``metrics: [Recall, NDCG, CC, ILD,
F1]`` work in any RecBole run started afterwards. :mod:`recbole_attn.host.install` lists every
change it makes in RecBole, and why. The changes are made when RecBole is imported (now,
if it is already): ``import recbole_attn`` itself imports neither RecBole nor torch.
"""

__version__ = "0.2.0"


def _install(recbole_module):
    from recbole_attn.host import install as host

    host.install()


def __getattr__(name):
    # recbole_attn.register_metrics / validate_dataset, without importing RecBole before
    if name == "register_metrics":
        from recbole_attn.evaluator import register_metrics

        return register_metrics
    if name == "validate_dataset":
        from recbole_attn.data.fields import validate_dataset

        return validate_dataset
    raise AttributeError(f"module 'recbole_attn' has no attribute {name!r}")


from recbole_attn.host.hooks import after_import  # noqa: E402

after_import("recbole", _install)

__all__ = ["register_metrics", "validate_dataset", "__version__"]
