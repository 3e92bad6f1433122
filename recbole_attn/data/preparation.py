"""The dataloaders of a run, built from the dataset every time: RecBole's
``data_preparation`` and ``create_dataset`` unpickle a saved file whenever one exists (a
planted file runs its code, an old one silently replaces the data); ours never do
(:func:`check_no_pickles`). After the split, :func:`check_split`, :func:`check_topk` and
:func:`cap_eval_batch_size`."""

from logging import getLogger

from recbole_attn.errors import ConfigError, DataError
from recbole_attn.options.values import SAMPLED_MODE

#: RecBole's options that save or load pickled datasets and dataloaders
PICKLE_OPTIONS = (
    "save_dataset",
    "dataset_save_path",
    "save_dataloaders",
    "dataloaders_save_path",
)


def check_no_pickles(config):
    given = [key for key in PICKLE_OPTIONS if key in config and config[key]]
    if given:
        raise ConfigError(
            f"{', '.join(given)}: recbole_attn never saves or loads RecBole's pickled "
            "datasets or dataloaders (loading a pickle runs whatever code the file "
            "holds); the data is rebuilt from the atomic files in every run. Remove "
            f"{' and '.join(given)} from the configuration."
        )


def data_preparation(config, dataset):
    """``(train, valid, test)`` dataloaders: RecBole's ``data_preparation`` without
    pickles, checked."""
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
    extra, shuffle = (), config["shuffle"]
    if config["MODEL_TYPE"] == ModelType.KNOWLEDGE:
        args = config["train_neg_sample_args"]
        extra = (KGSampler(dataset, args["distribution"], args["alpha"]),)
        shuffle = True
    train_data = get_dataloader(config, "train")(
        config, train_dataset, train_sampler, *extra, shuffle=shuffle
    )
    valid_data, test_data = (
        get_dataloader(config, phase)(config, part, sampler, shuffle=False)
        for phase, part, sampler in (
            ("valid", valid_dataset, valid_sampler),
            ("test", test_dataset, test_sampler),
        )
    )
    return train_data, valid_data, test_data


def eval_modes(config):
    """The evaluation modes of ``eval_args`` (its ``mode``, or its values per phase)."""
    mode = (config["eval_args"] or {}).get("mode")
    return set(mode.values()) if isinstance(mode, dict) else {mode}


def check_topk(config, dataset):
    """``topk`` within a full ranking's items and below a sampled ranking's candidates."""
    modes = eval_modes(config)
    items = dataset.item_num - 1  # ids 1.. (0 is padding)
    largest = max(config["topk"])
    if "full" in modes and largest > items:
        raise DataError(
            f"topk {config['topk']} ranks more items than the {items} of "
            f"{config['dataset']!r}: lower topk (and valid_metric's cutoff)"
        )
    for name in sorted(m for m in modes if isinstance(m, str)):
        sampled = SAMPLED_MODE.fullmatch(name)
        if sampled and largest > int(sampled.group(2)):
            n = int(sampled.group(2))
            raise DataError(
                f"topk {config['topk']} reaches past the {n + 1} candidates of a "
                f"{name} evaluation (the target and {n} sampled items): Recall@{largest} "
                f"and Hit@{largest} would be 1 for any model; sample more items "
                f"(--eval_args=\"{{'mode': '{sampled.group(1)}{max(100, largest)}'}}\") "
                f"or lower topk to at most {n}"
            )


def cap_eval_batch_size(config, dataset):
    """Lower ``eval_batch_size`` (said) to keep a full-ranking block within
    ``eval_scores_budget_mb``."""
    full = "full" in eval_modes(config)
    budget = config["eval_scores_budget_mb"]
    if not full or not budget:
        return
    users = max(1, int(budget * 2**20) // (4 * dataset.item_num))
    if config["eval_batch_size"] > users:
        getLogger().warning(
            f"eval_batch_size lowered from {config['eval_batch_size']} to {users} users: "
            f"full ranking over {dataset.item_num} items keeps each batch's scores "
            f"within eval_scores_budget_mb ({budget} MB)"
        )
        config["eval_batch_size"] = users


#: leave-one-out mode -> the evaluation phases it fills, with the index of each one's
#: split in RecBole's (train, valid, test): ``test_only`` leaves the validation split empty
LOO_PHASES = {
    "valid_and_test": (("validation", 1), ("test", 2)),
    "valid_only": (("validation", 1),),
    "test_only": (("test", 2),),
}


def check_split(config, dataset, splits):
    """Count the users a leave-one-out split leaves out; none left is a
    :class:`DataError`."""
    split = (config["eval_args"] or {}).get("split") or {}
    phases = LOO_PHASES.get(split.get("LS")) if isinstance(split, dict) else None
    if not phases:
        return
    users = dataset.user_num - 1  # ids 1.. (0 is padding)
    short = {}
    for phase, index in phases:
        part = splits[index]
        evaluated = len(set(part.inter_feat[dataset.uid_field].tolist()))
        if not evaluated:
            raise DataError(
                f"no user of {config['dataset']!r} has enough interactions for a "
                f"{phase} sample ({users} users; leave-one-out with a sequential model "
                "needs 3 interactions for a test sample and 4 for a validation one, "
                "other models 2 and 3): use more data or filter less (k-core)"
            )
        short[phase] = users - evaluated
    if any(short.values()):
        counts = " and ".join(f"{n} for a {p} sample" for p, n in short.items())
        getLogger().warning(
            f"{config['dataset']}: of {users} users, {counts} have too few interactions; "
            "they are trained on but not evaluated there"
        )
