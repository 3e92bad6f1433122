"""Will a run fit the machine? A lower bound of its memory, checked before the model."""

import numpy as np

from recbole_attn.errors import ConfigError

FLOAT = 4


def available_bytes(device):
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
    """``(bytes, {part: bytes})``: the lower bound of a step's and a batch's memory."""
    parts = {}
    T = _value(config, "MAX_ITEM_LIST_LENGTH")
    if T and longest:  # given only where batches are cut to it
        T = min(int(T), int(longest))
    layers, heads = _value(config, "n_layers"), _value(config, "n_heads")
    # a training batch holds one sequence per user (all_position) or per interaction
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
    """A :class:`ConfigError` with the numbers when the run cannot fit its device."""
    available = available_bytes(config["device"]) if available is None else available
    if not available:
        return
    # our models (chunked CE logits) cut batches to their longest sequence if they say so
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
