"""
recbole_attn.data.dataset
#########################

Training modes for sequential recommenders (docs/models.md, "Shared training and evaluation keys").

``training_mode: last_position`` is RecBole's default: one training sample per prefix of
every user's history, loss on the last position only.

``training_mode: all_position`` (the default of our models, and what the official code of
every paper here does) keeps ONE training sample per user, the longest training prefix
``(s_1 .. s_{n-1}) -> s_n`` (cut to the last ``MAX_ITEM_LIST_LENGTH`` items), and the model
puts a loss on every position ``t`` with target ``s_{t+1}``. Validation and test are
RecBole's leave-one-out samples, unchanged.

Which dataset a run loads (:func:`load_dataset`), and the checks of a model against it
before it loads: the training mode and RecBole's own dataset classes
(:func:`check_sequential_model`), RecBole's sampled negatives or labels
(:func:`check_recbole_negatives`).
"""

import torch
from recbole.data.dataset import SequentialDataset

from recbole_attn.data.checks import CheckedDataset, has_label

from recbole_attn.data.histories import HISTORIES_ATTR, training_histories
from recbole_attn.errors import ConfigError

TRAINING_MODES = ("all_position", "last_position")


def check_training_mode(config):
    """``config['training_mode']``, checked."""
    mode = config["training_mode"]
    if mode not in TRAINING_MODES:
        raise ConfigError(
            f"training_mode must be one of {list(TRAINING_MODES)}, got {mode!r}"
        )
    return mode


def last_sample_per_user(interaction, uid_field):
    """Indices of the last row of every user in ``interaction``.

    RecBole's sequential augmentation sorts by (user, time) and the leave-one-out split keeps
    that order within a user, so the last row of a user is its longest prefix.
    """
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
    """:class:`SequentialDataset` whose training split follows ``training_mode``.

    In ``all_position`` mode the training split holds one sample per user (its longest
    prefix); in ``last_position`` mode it is RecBole's split, unchanged. In both, the
    training split carries the users' complete training histories
    (:func:`~recbole_attn.data.histories.training_histories`). RecBole 1.2.1's loader gets
    the fixes it needs on pandas 3 (installed into RecBole's ``Dataset`` by
    :mod:`recbole_attn.host.install`), and
    repeated interactions are handled and counted
    (:class:`~recbole_attn.data.checks.CheckedDataset`).
    """

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
    """A sequential model against the pipeline's sequential dataset, before it loads:
    ``training_mode`` is valid and one the model trains in (only recbole_attn's models,
    which name their ``dataset_class``, put a loss at every position, so any other model,
    RecBole's SASRec, GRU4Rec, ..., needs ``last_position``: RecBole's prefix samples),
    and the model does not need a dataset class of RecBole's own (``DIENDataset``:
    negative item sequences; ``GRU4RecKGDataset``, ``KSRDataset``: the knowledge graph),
    which the pipeline does not build (a ``KeyError`` deep in training). A
    :class:`~recbole_attn.errors.ConfigError` otherwise; returns the training mode."""
    import importlib

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
    if hasattr(importlib.import_module("recbole.data.dataset"), own):
        raise ConfigError(
            f"{config['model']} trains on RecBole's own {own}, which recbole-attn's "
            "sequential pipeline does not build: this model is not supported by "
            "recbole-attn; choose another model"
        )
    return mode


def check_recbole_negatives(config, model_class):
    """RecBole's own models that train on sampled negatives (pairwise models such as
    BPR, and its sequential models with ``loss_type: BPR``) need RecBole's sampler, which
    our defaults switch off (our models sample inside the model): say how to switch it on
    instead of RecBole's ``KeyError: 'neg_item_id'`` after loading the data. Our models
    train on RecBole's negatives only the way RecBole trains their model files: on its
    prefix samples, with the loss of the model file."""
    from recbole.utils import InputType, ModelType

    sampling = (config["train_neg_sample_args"] or {}).get("distribution", "none")
    name = model_class.__name__
    if hasattr(model_class, "dataset_class"):  # recbole_attn's models
        losses = getattr(model_class, "recbole_loss_types", ())
        sampled = [loss for loss in losses if loss != "CE"]
        if sampling == "none":
            return
        if config["training_mode"] != "last_position" or config["loss_type"] not in (
            sampled
        ):
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
    """The dataset class RecBole's ``create_dataset`` would build for a non-sequential
    model (its ``<Model>Dataset`` if RecBole has one, else by model type), with the checks of
    :class:`~recbole_attn.data.checks.CheckedDataset`. RecBole's ``create_dataset`` itself is
    never called: it unpickles a saved dataset file whenever one exists."""
    import importlib

    from recbole.utils import ModelType

    module = importlib.import_module("recbole.data.dataset")
    name = f"{config['model']}Dataset"
    if not hasattr(module, name):
        by_type = {ModelType.KNOWLEDGE: "KnowledgeBasedDataset"}
        name = by_type.get(config["MODEL_TYPE"], "Dataset")
    base = getattr(module, name)
    return type(base.__name__, (CheckedDataset, base), {})


def load_dataset(config, model_class=None):
    """The dataset of a run, loaded: a sequential model's in our
    :class:`AttnSequentialDataset` (or the dataset class the model names, the research
    wing's records the held-out items), any other model's in
    :func:`recbole_dataset_class`."""
    from recbole.utils import ModelType

    if config["MODEL_TYPE"] == ModelType.SEQUENTIAL:
        return getattr(model_class, "dataset_class", AttnSequentialDataset)(config)
    return recbole_dataset_class(config)(config)
