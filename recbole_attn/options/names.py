"""Model names known without importing torch or RecBole: ours and RecBole's."""

import difflib
import importlib.util
import os
import re

#: our models, in the order of :data:`recbole_attn.plugin.MODELS`
MODEL_NAMES = ("STOSA", "SASRecAP", "PAtt", "DPAtt", "PARec", "FPARec", "AWRSR", "RKSA")

#: the subpackages of ``recbole.model`` that RecBole's ``get_model`` searches
RECBOLE_SUBPACKAGES = tuple(
    f"{kind}_recommender"
    for kind in ("general", "context_aware", "sequential", "knowledge_aware", "exlib")
)


def recbole_model_names(subpackages=RECBOLE_SUBPACKAGES):
    """RecBole's model class names by subpackage, read without importing."""
    spec = importlib.util.find_spec("recbole")
    if spec is None or not spec.submodule_search_locations:
        return {}
    root = os.path.join(list(spec.submodule_search_locations)[0], "model")
    names = {}
    for sub in subpackages:
        path = os.path.join(root, sub, "__init__.py")
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                text = f.read()
            names[sub] = re.findall(r"^from \S+ import (\w+)", text, re.M)
    return names


def known_model_names():
    theirs = [n for names in recbole_model_names().values() for n in names]
    return list(MODEL_NAMES) + [n for n in theirs if n not in MODEL_NAMES]


def closest(name, candidates):
    """The one of ``candidates`` closest to ``name`` (case-insensitive), or None."""
    lowered = {c.lower(): c for c in sorted(candidates)}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[close[0]] if close else None


def did_you_mean(name, candidates):
    """`` (did you mean X?)`` for the closest of ``candidates``, or an empty string."""
    close = closest(name, candidates)
    return f" (did you mean {close}?)" if close else ""


def unknown_model_message(name):
    """The one-line error for a model name that no run resolves."""
    sub = "sequential_recommender"
    seq = recbole_model_names((sub,)).get(sub, [])
    theirs = [n for n in seq if n not in MODEL_NAMES]
    return (
        f"unknown model {name!r}{did_you_mean(name, known_model_names())}. "
        f"recbole_attn models: {', '.join(MODEL_NAMES)}. RecBole's models also work, "
        f"e.g. {', '.join(theirs[:8])} (any name from recbole.model)."
    )
