"""
recbole_attn.data.preparation
#############################

The dataloaders of a run, built from the dataset every time. RecBole's
``data_preparation`` first ``pickle.load``\\ s ``<checkpoint_dir>/<dataset>-for-<model>-
dataloader.pth`` (or ``dataloaders_save_path``) whenever such a file exists, and its
``create_dataset`` does the same with ``<dataset>-<DatasetClass>.pth``: a file planted
under that name runs its code in the next ordinary run, and a file saved by an earlier
run silently replaces the configuration's data. recbole_attn never unpickles a file:
:func:`data_preparation` is RecBole's split-and-load step without the load, and
:func:`check_no_pickles` refuses the options that would save or load pickled datasets or
dataloaders.
"""

from recbole_attn.data.checks import cap_eval_batch_size, check_split, check_topk
from recbole_attn.errors import ConfigError

#: RecBole's options that save or load pickled datasets and dataloaders
PICKLE_OPTIONS = (
    "save_dataset",
    "dataset_save_path",
    "save_dataloaders",
    "dataloaders_save_path",
)


def check_no_pickles(config):
    """A :class:`ConfigError` for any of :data:`PICKLE_OPTIONS` that is set."""
    given = [key for key in PICKLE_OPTIONS if key in config and config[key]]
    if given:
        raise ConfigError(
            f"{', '.join(given)}: recbole_attn never saves or loads RecBole's pickled "
            "datasets or dataloaders (loading a pickle runs whatever code the file "
            "holds); the data is rebuilt from the atomic files in every run. Remove "
            f"{' and '.join(given)} from the configuration."
        )


def data_preparation(config, dataset):
    """``(train, valid, test)`` dataloaders of ``dataset``, split by ``eval_args``: what
    RecBole's ``data_preparation`` builds when it finds no saved file, never loading one
    (and never saving one: :func:`check_no_pickles`). The split is checked
    (:func:`~recbole_attn.data.checks.check_split`: users too short to evaluate are
    counted; none to evaluate is an error)."""
    from recbole.data.utils import create_samplers, get_dataloader
    from recbole.sampler import KGSampler
    from recbole.utils import ModelType

    check_no_pickles(config)
    built = dataset.build()
    check_split(config, dataset, built)
    check_topk(config, dataset)
    cap_eval_batch_size(config, dataset)
    train_dataset, valid_dataset, test_dataset = built
    train_sampler, valid_sampler, test_sampler = create_samplers(config, dataset, built)
    if config["MODEL_TYPE"] == ModelType.KNOWLEDGE:
        kg_sampler = KGSampler(
            dataset,
            config["train_neg_sample_args"]["distribution"],
            config["train_neg_sample_args"]["alpha"],
        )
        train_data = get_dataloader(config, "train")(
            config, train_dataset, train_sampler, kg_sampler, shuffle=True
        )
    else:
        train_data = get_dataloader(config, "train")(
            config, train_dataset, train_sampler, shuffle=config["shuffle"]
        )
    valid_data = get_dataloader(config, "valid")(
        config, valid_dataset, valid_sampler, shuffle=False
    )
    test_data = get_dataloader(config, "test")(
        config, test_dataset, test_sampler, shuffle=False
    )
    return train_data, valid_data, test_data
