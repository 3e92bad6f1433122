"""
recbole_attn.engine.memory
##########################

Will a run fit the machine? A lower bound of the memory of one training step and one
evaluation batch, checked before the model is built, for every model the pipeline runs
(RecBole's included): a run that cannot fit stops at once with the numbers, instead of
climbing for minutes until the kernel kills it without a word (RecBole's SASRec at
``MAX_ITEM_LIST_LENGTH=10000`` on a tiny dataset reached 20 GB and exit 137).

What is counted is what any implementation of the configured model must hold, so the
estimate only refuses runs that cannot work:

* self-attention (a model whose configuration has ``n_layers`` and ``n_heads``): every
  layer keeps its ``[B, heads, T, T]`` float32 attention probabilities for the backward
  pass, and a gradient of the same size exists while one layer is differentiated;
* cross-entropy over all items at the last position (RecBole's sequential models,
  ``loss_type: CE``): ``[B, items]`` float32 logits and their gradient (our models
  chunk theirs within ``ce_logits_budget_mb``, not counted);
* full-ranking evaluation: an ``[eval_batch_size, items]`` float32 score block, and the
  forward pass's attention of that batch (one layer at a time).

``B`` is ``train_batch_size``, at most the number of interactions, and an evaluation batch
at most the number of users. The memory there is
what the operating system reports available (``MemAvailable``; the free memory of the
GPU for a CUDA device); where it cannot be read, nothing is checked.
"""

import numpy as np

from recbole_attn.errors import ConfigError

FLOAT = 4


def available_bytes(device):
    """Memory a run on ``device`` can still take (None when it cannot be read)."""
    if getattr(device, "type", str(device)) == "cuda":
        import torch

        try:
            return int(torch.cuda.mem_get_info(device)[0])
        except (RuntimeError, AssertionError):
            return None
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _value(config, key):
    try:
        return config[key] if key in config else None
    except (KeyError, TypeError):
        return None


def estimate(config, n_items, n_interactions, own_model, n_users=None, longest=None):
    """``(bytes, parts)``: the lower bound of a training step's and an evaluation
    batch's memory, and ``{part: bytes}`` of what it counts (module docstring).
    ``own_model``: one of recbole_attn's models (their CE logits are chunked);
    ``longest``: the longest user history, where batches are cut to their longest
    sequence (our models'; None: padded to MAX_ITEM_LIST_LENGTH, as RecBole's)."""
    parts = {}
    T = _value(config, "MAX_ITEM_LIST_LENGTH")
    if T and longest:  # given only where batches are cut to it
        T = min(int(T), int(longest))
    layers, heads = _value(config, "n_layers"), _value(config, "n_heads")
    # a training batch holds sequences: one per user (all_position), else one per
    # interaction at most
    sequences = n_interactions
    if n_users and _value(config, "training_mode") == "all_position":
        sequences = n_users
    batch = min(int(_value(config, "train_batch_size") or 1), max(1, sequences))
    eval_batch = int(_value(config, "eval_batch_size") or 1)
    if n_users:  # a full-ranking batch holds users
        eval_batch = min(eval_batch, n_users)
    if T and layers and heads:
        per_map = int(heads) * int(T) ** 2 * FLOAT
        parts["training attention"] = (int(layers) + 1) * batch * per_map
        parts["evaluation attention"] = 2 * eval_batch * per_map
    if not own_model and str(_value(config, "loss_type") or "").upper() == "CE":
        parts["training logits"] = 2 * batch * n_items * FLOAT
    parts["evaluation scores"] = eval_batch * n_items * FLOAT
    training = sum(v for k, v in parts.items() if k.startswith("training"))
    evaluation = sum(v for k, v in parts.items() if k.startswith("evaluation"))
    return max(training, evaluation), parts


def _gb(n):
    return f"{n / 2**30:.1f} GB"


def check_memory(config, dataset, model_class, available=None, training=True):
    """A :class:`ConfigError` with the numbers when the run cannot fit the memory
    available on its device (``available``: bytes, default :func:`available_bytes`);
    without ``training`` (a loaded checkpoint) only the evaluation counts."""
    available = available_bytes(config["device"]) if available is None else available
    if not available:
        return
    # recbole_attn's models (chunked CE logits) cut every batch to its longest
    # sequence where they say so (the research wing's full-length batches do not)
    trims = getattr(model_class, "trims_batches", None)
    own = trims is not None
    users = dataset.inter_feat[dataset.uid_field]
    users = users.numpy() if hasattr(users, "numpy") else np.asarray(users)
    longest = None
    if own and trims(config) and len(users):
        longest = int(np.bincount(users.astype(np.int64)).max())
    need, parts = estimate(
        config, dataset.item_num, len(users), own, dataset.user_num, longest
    )
    if not training:
        parts = {k: v for k, v in parts.items() if k.startswith("evaluation")}
        need = sum(parts.values())
    if need <= 0.9 * available:
        return
    biggest = max(parts, key=parts.get)
    shown = ", ".join(f"{k} {_gb(v)}" for k, v in parts.items() if v >= 2**27)
    hint = {
        "training attention": "lower MAX_ITEM_LIST_LENGTH or train_batch_size",
        "evaluation attention": "lower MAX_ITEM_LIST_LENGTH or eval_batch_size",
        "training logits": "lower train_batch_size",
        "evaluation scores": "lower eval_batch_size",
    }[biggest]
    where = "GPU" if getattr(config["device"], "type", "") == "cuda" else "machine"
    raise ConfigError(
        f"{config['model']} with these options needs at least {_gb(need)} ({shown}; "
        f"MAX_ITEM_LIST_LENGTH {_value(config, 'MAX_ITEM_LIST_LENGTH')}, "
        f"train_batch_size {_value(config, 'train_batch_size')}), and this {where} has "
        f"{_gb(available)} available: {hint}"
    )
