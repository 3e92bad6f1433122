"""The run engine (config, pipeline, trainer, checkpoints, logs, DDP), for one RecBole
release."""

from recbole_attn.errors import RecboleAttnError

#: the RecBole release the fixes were written for (and checked against)
RECBOLE_VERSION = "1.2.1"

#: the private RecBole methods our subclasses override, so the pipeline refuses another
#: release (a test keeps the list complete and checks RecBole still has each)
PRIVATE_OVERRIDES = {
    "recbole.config.configurator.Config": tuple(
        "_convert_config_dict _init_device _load_cmd_line _load_config_files "
        "_merge_external_config_dict".split()
    ),
    "recbole.trainer.trainer.Trainer": tuple(
        "_check_nan _full_sort_batch_eval _map_reduce _save_checkpoint _train_epoch "
        "_valid_epoch".split()
    ),
    "recbole.data.dataset.dataset.Dataset": ("_remove_duplication",),
}


def check_recbole_version():
    """A :class:`RecboleAttnError` unless RecBole is :data:`RECBOLE_VERSION`."""
    import recbole

    if recbole.__version__ != RECBOLE_VERSION:
        count = sum(len(m) for m in PRIVATE_OVERRIDES.values())
        raise RecboleAttnError(
            f"recbole_attn's pipeline overrides {count} private methods of RecBole "
            f"{RECBOLE_VERSION} (its Config, Trainer and Dataset), and RecBole "
            f"{recbole.__version__} is installed: pip install recbole=={RECBOLE_VERSION}"
        )
