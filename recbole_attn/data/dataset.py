"""The dataset a run loads (:func:`load_dataset`), the training modes
(``last_position``: RecBole's one sample per prefix; ``all_position``: one sample per
user, a loss at every position; docs/models.md) and the checks of a model against the
dataset before it loads."""

import torch
from recbole.data import dataset as recbole_datasets
from recbole.data.dataset import SequentialDataset
from recbole.utils import InputType, ModelType

from recbole_attn.data.checks import CheckedDataset, has_label

from recbole_attn.data.histories import HISTORIES_ATTR, training_histories
from recbole_attn.errors import ConfigError

TRAINING_MODES = ("all_position", "last_position")


def check_training_mode(config):
    mode = config["training_mode"]
    if mode not in TRAINING_MODES:
        raise ConfigError(
            f"training_mode must be one of {list(TRAINING_MODES)}, got {mode!r}"
        )
    return mode


def last_sample_per_user(interaction, uid_field):
    """Indices of every user's last row (its longest prefix)."""
    uid = interaction[uid_field]
    n = uid.numel()
    if n == 0:
        return torch.zeros(0, dtype=torch.long)
    order = torch.arange(n)
    n_users = int(uid.max()) + 1
    last = torch.full((n_users,), -1, dtype=torch.long)
    last.scatter_reduce_(0, uid, order, reduce="amax")
    return last[last >= 0]


class AttnSequentialDataset(CheckedDataset, SequentialDataset):
    """RecBole's ``SequentialDataset`` with a training split of ``training_mode`` and
    its histories."""

    def __init__(self, config):
        self.training_mode = check_training_mode(config)
        super().__init__(config)

    def build(self):
        datasets = super().build()
        train = datasets[0]
        # complete histories, before the all_position mode drops rows
        setattr(train, HISTORIES_ATTR, training_histories(train))
        if self.training_mode == "all_position":
            keep = last_sample_per_user(train.inter_feat, self.uid_field)
            train.inter_feat = train.inter_feat[keep]
        return datasets


def check_sequential_model(config, model_class=None):
    """``training_mode``, checked against the model (RecBole's train in
    ``last_position``, on none of its own dataset classes)."""
    mode = check_training_mode(config)
    if model_class is None or hasattr(model_class, "dataset_class"):
        return mode
    name = model_class.__name__
    if mode == "all_position":
        raise ConfigError(
            f"{name} is not a recbole_attn model: it trains on RecBole's prefix samples "
            "with a loss at the last position only, so training_mode: all_position would "
            f"silently train it on one sample per user. Use training_mode: last_position "
            f"with {name}, or the all-position SASRec of this package, SASRecAP."
        )
    own = f"{config['model']}Dataset"
    if hasattr(recbole_datasets, own):
        raise ConfigError(
            f"{config['model']} trains on RecBole's own {own}, which recbole-attn's "
            "sequential pipeline does not build: this model is not supported by "
            "recbole-attn; choose another model"
        )
    return mode


def check_recbole_negatives(config, model_class):
    """A model that trains on RecBole's negatives or labels gets them, or a
    :class:`ConfigError` saying how."""
    sampling = (config["train_neg_sample_args"] or {}).get("distribution", "none")
    name = model_class.__name__
    if hasattr(model_class, "dataset_class"):  # recbole_attn's models
        losses = getattr(model_class, "recbole_loss_types", ())
        sampled = [loss for loss in losses if loss != "CE"]
        if sampling == "none":
            return
        last_position = config["training_mode"] == "last_position"
        if not last_position or config["loss_type"] not in sampled:
            raise ConfigError(
                f"train_neg_sample_args: RecBole's sampler draws the negatives {name} "
                "trains on RecBole's way only (training_mode: last_position, loss_type: "
                f"{' or '.join(sampled) or 'none'}); otherwise {name} draws its own "
                "(neg_sample_num): remove train_neg_sample_args"
            )
        return
    pairwise = getattr(model_class, "input_type", None) == InputType.PAIRWISE
    sequential_bpr = (
        config["MODEL_TYPE"] == ModelType.SEQUENTIAL and config["loss_type"] == "BPR"
    )
    if (pairwise or sequential_bpr) and sampling == "none":
        raise ConfigError(
            f"{name} trains on negatives from RecBole's sampler, which "
            "recbole_attn's defaults switch off; set --train_neg_sample_args=\"{"
            "'distribution': 'uniform', 'sample_num': 1}\""
        )
    # point-wise models (context-aware ones, DIN, DIEN, NeuMF, ...) train on labels,
    # which RecBole's sampler makes (1, and 0 for each sampled negative) unless the
    # data has them; Pop and the other traditional models count interactions
    pointwise = getattr(model_class, "input_type", None) == InputType.POINTWISE
    traditional = getattr(model_class, "type", None) == ModelType.TRADITIONAL
    if pointwise and not traditional and sampling == "none" and not has_label(config):
        raise ConfigError(
            f"{model_class.__name__} trains on labelled interactions (1, or 0 for a "
            f"negative), and the data has no {config['LABEL_FIELD']} field while "
            "recbole_attn's defaults switch off RecBole's sampler, which would label "
            "them; set --train_neg_sample_args=\"{'distribution': 'uniform', "
            "'sample_num': 1}\", or load a label field (or --threshold=\"{'rating': "
            '4}")'
        )


def recbole_dataset_class(config):
    """The class RecBole would build for a non-sequential model, with
    :class:`CheckedDataset`."""
    name = f"{config['model']}Dataset"
    if not hasattr(recbole_datasets, name):
        knowledge = config["MODEL_TYPE"] == ModelType.KNOWLEDGE
        name = "KnowledgeBasedDataset" if knowledge else "Dataset"
    base = getattr(recbole_datasets, name)
    return type(base.__name__, (CheckedDataset, base), {})


def load_dataset(config, model_class=None):
    """The run's dataset: the model's ``dataset_class``, or
    :func:`recbole_dataset_class`."""
    if config["MODEL_TYPE"] == ModelType.SEQUENTIAL:
        return getattr(model_class, "dataset_class", AttnSequentialDataset)(config)
    return recbole_dataset_class(config)(config)
