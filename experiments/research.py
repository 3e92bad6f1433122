"""The research wing's models: the product models with the switches that only reproduce an
official code's numbers, LEAKS of held-out or future data included. No command of the
package can build them; ``experiments/runner.py`` builds one where a study's variant sets
one of their options (:func:`model_for`), e.g. ``experiments/studies.py``'s
``STOSA_OFFICIAL`` and ``PATT_OFFICIAL``.

* ``neg_exclude_heldout`` (every model): the negatives also avoid the user's validation and
  test items, as the official STOSA and PAtt codes do (they exclude all of the user's
  items, so the held-out items are never pushed away in training). The training split of
  :class:`HeldoutDataset` records every user's held-out items for it.
* ``dpp_ground_set: sequence`` (PAtt): the k-DPP of every query lives on the whole padded
  sequence, padding and future items included, as the official normalizer sums (row t
  then reads the items after t); batches keep their full length.

Stored runs name the product model (``"model": "STOSA"``) and these options among their
overrides, as before the options moved here.
"""

import torch

from recbole_attn.config_check import Flag, OneOf
from recbole_attn.data.dataset import AttnSequentialDataset
from recbole_attn.errors import ConfigError
from recbole_attn.model import MODELS
from recbole_attn.model.layers.dpp_score import GROUND_SETS
from recbole_attn.options import Opt, declared_options

#: attribute of a training split that holds its :func:`heldout_table`
HELDOUT_ATTR = "_heldout_items"


def heldout_table(n_users, uid, items):
    """``[n_users, W]`` LongTensor: row u holds the items of user u's held-out
    (validation and test) rows, in row order, 0-padded; W = the most rows of one user
    (at least 1)."""
    uid, items = uid.long(), items.long()
    counts = torch.bincount(uid, minlength=n_users)
    width = max(int(counts.max()) if counts.numel() else 0, 1)
    table = torch.zeros(n_users, width, dtype=torch.long)
    if uid.numel() == 0:
        return table
    order = torch.argsort(uid, stable=True)
    uid, items = uid[order], items[order]
    starts = torch.zeros(n_users + 1, dtype=torch.long)
    starts[1:] = counts.cumsum(0)
    rank = torch.arange(uid.numel()) - starts[uid]
    table[uid, rank] = items
    return table


class HeldoutDataset(AttnSequentialDataset):
    """The product dataset whose training split also records every user's validation and
    test items (:func:`heldout_items`), for ``neg_exclude_heldout`` alone."""

    def build(self):
        datasets = super().build()
        held = [d.inter_feat for d in datasets[1:]]
        empty = [torch.zeros(0, dtype=torch.long)]
        table = heldout_table(
            self.user_num,
            torch.cat([f[self.uid_field] for f in held] + empty),
            torch.cat([f[self.iid_field] for f in held] + empty),
        )
        setattr(datasets[0], HELDOUT_ATTR, table)
        return datasets


def heldout_items(dataset):
    """The held-out items per user recorded on a training split by
    :class:`HeldoutDataset`, or None."""
    return getattr(dataset, HELDOUT_ATTR, None)


class HeldoutNegatives:
    """Mixin of a product model: ``neg_exclude_heldout``."""

    dataset_class = HeldoutDataset
    options = {
        "neg_exclude_heldout": Opt(
            False,
            Flag(),
            "negatives also avoid the user's validation and test items",
            research="a LEAK of held-out data, as the official STOSA and PAtt codes",
        )
    }

    def __init__(self, config, dataset, *args, **kwargs):
        super().__init__(config, dataset, *args, **kwargs)
        if self.neg_exclude_heldout:
            table = heldout_items(dataset)
            if table is None:
                raise ConfigError(
                    "neg_exclude_heldout needs the users' held-out items, which "
                    "HeldoutDataset records on the training split; this dataset has none"
                )
            self.register_buffer("heldout_items", table, persistent=False)

    def excluded_heldout(self):
        return self.heldout_items if self.neg_exclude_heldout else None


class SequenceGroundSet:
    """Mixin of PAtt: ``dpp_ground_set``."""

    options = {
        "dpp_ground_set": Opt(
            "prefix",
            OneOf(*GROUND_SETS),
            "prefix: query t's k-DPP on the valid prefix; sequence: on every position "
            "of the padded sequence (full-length batches)",
            research="sequence is a LEAK (row t reads the items after t), as the "
            "official PAtt normalizer",
        )
    }
    option_rules = (
        lambda c: (
            "dpp_ground_set: sequence computes the exact marginals only: set "
            "dpp_triple_samples: 0 with it"
            if c["dpp_ground_set"] == "sequence" and c["dpp_triple_samples"]
            else None
        ),
    )

    def __init__(self, config, dataset, *args, **kwargs):
        super().__init__(config, dataset, *args, **kwargs)
        if self.dpp_ground_set == "sequence":
            # the k-DPP of a sequence reads every position of its padded row: batches
            # keep their full length MAX_ITEM_LIST_LENGTH (no trimming, no length groups)
            self.trim_batch = False

    def encode(self, context):
        if self.dpp_ground_set == "sequence":
            context.positions = padding_numbered_first(context)
        return super().encode(context)


def padding_numbered_first(context):
    """Position ids with the padding of every row numbered ``0 .. T-n-1``, as the
    left-padded official code numbers it (the items keep theirs). Only the leaky
    ``dpp_ground_set: sequence`` reads the padding's inputs."""
    steps = torch.arange(context.item_seq.size(1), device=context.item_seq.device)
    padding = steps.unsqueeze(0) - context.item_seq_len.unsqueeze(1)
    return torch.where(context.valid, context.positions, padding)


def _research_class(name, mixins):
    product = MODELS[name]
    return type(f"{name}Research", (*mixins, product), {"__module__": __name__})


#: product model name -> its research class (the leaks it can reproduce)
RESEARCH_MODELS = {
    name: _research_class(
        name,
        (
            (HeldoutNegatives, SequenceGroundSet)
            if name == "PAtt"
            else (HeldoutNegatives,)
        ),
    )
    for name in MODELS
}


def research_keys(name):
    """The options the research class of model ``name`` adds to the product's."""
    product = declared_options(MODELS[name])
    return set(declared_options(RESEARCH_MODELS[name])) - set(product)


def model_for(name, overrides):
    """What the runner builds for a variant: the research class of model ``name`` where
    ``overrides`` set one of its research-wing options, else the product model's name.
    """
    if name in RESEARCH_MODELS and research_keys(name) & set(overrides):
        return RESEARCH_MODELS[name]
    return name
