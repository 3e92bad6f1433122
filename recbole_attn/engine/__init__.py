"""The run engine: configuration, data, trainer, checkpoints, logs, DDP; written for
one RecBole release, whose private methods its subclasses override."""

from recbole_attn.errors import RecboleAttnError

#: the RecBole release the fixes were written for (and checked against)
RECBOLE_VERSION = "1.2.1"

#: the private methods of RecBole's classes that recbole_attn's own subclasses override
#: (its pipeline's: ``AttnConfig``, ``AttnTrainer``, the checked datasets; never
#: installed into RecBole; the bucketed loader overrides torch's
#: ``DataLoader._index_sampler``): written for :data:`RECBOLE_VERSION`, so the pipeline
#: refuses another release (:func:`check_recbole_version`); a test checks that this list
#: is every such override and that RecBole still has each method
PRIVATE_OVERRIDES = {
    "recbole.config.configurator.Config": (
        "_convert_config_dict",
        "_init_device",
        "_load_cmd_line",
        "_load_config_files",
        "_merge_external_config_dict",
    ),
    "recbole.trainer.trainer.Trainer": (
        "_check_nan",
        "_full_sort_batch_eval",
        "_map_reduce",
        "_save_checkpoint",
        "_train_epoch",
        "_valid_epoch",
    ),
    "recbole.data.dataset.dataset.Dataset": ("_remove_duplication",),
}


def check_recbole_version():
    """A :class:`~recbole_attn.errors.RecboleAttnError` when the installed RecBole is not
    the release recbole_attn's pipeline was written for (its subclasses override
    :data:`PRIVATE_OVERRIDES`, which another release may rename or change)."""
    import recbole

    if recbole.__version__ != RECBOLE_VERSION:
        count = sum(len(m) for m in PRIVATE_OVERRIDES.values())
        raise RecboleAttnError(
            f"recbole_attn's pipeline overrides {count} private methods of RecBole "
            f"{RECBOLE_VERSION} (its Config, Trainer and Dataset), and RecBole "
            f"{recbole.__version__} is installed: pip install recbole=={RECBOLE_VERSION}"
        )
