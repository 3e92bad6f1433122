"""Checks of the user's configuration before anything loads, and warnings for unread
keys."""

import functools
import glob
import os

from recbole_attn.errors import ConfigError, RecboleAttnError
from recbole_attn.files import read_yaml
from recbole_attn.options.names import closest
from recbole_attn.options.values import VALUE_RULES

#: keys that were renamed: old key -> what to write instead
RENAMED_KEYS = {
    "stosa_legacy_mean_bug": "stosa_layer_means: official (was True; now STOSA's "
    "default) or stosa_layer_means: paper (was False)"
}


#: the command that trains research-only options and the models of the research wing
RESEARCH_RUNNER = (
    "python -m experiments.runner (a source checkout; experiments/studies.py declares "
    "the variants)"
)


def stosa_preset_form(config, form):
    """The value ``stosa_preset`` gives STOSA's ``form`` (without torch)."""
    preset = config["stosa_preset"] if "stosa_preset" in config else "official"
    return "recbole" if (form, preset) == ("init", "paper") else preset


#: key -> (the product's value, or a function of the config giving it; what another
#: value reproduces), for options moved to the research wing (experiments/research.py)
RESEARCH_WING_KEYS = {
    "neg_exclude_heldout": (
        False,
        "a leak of the users' validation and test items into the negatives, as the "
        "official STOSA and PAtt codes",
    ),
    "dpp_ground_set": (
        "prefix",
        "PAtt's k-DPP over the whole padded sequence, a leak of future items, as the "
        "official PAtt normalizer",
    ),
    "trim_batch": (True, "full-length batches, which measure what trimming saves"),
    "dpp_row_normalize": (True, "PAtt's raw weights D = exp(-lambda P) of the paper"),
    "dpp_diagonal": ("kernel", "PAtt's self weight D_tt = 1 of the paper"),
    "dpp_sampler": ("squared", "PAtt's linear Sampler S = M W of the paper"),
    "add_position_embedding": (False, "PARec's input position embedding, official"),
    "ffn_placement": ("block", "PARec's one FFN after all blocks, official"),
    **{
        f"stosa_{form}": (
            lambda config, form=form: stosa_preset_form(config, form),
            "one form of a STOSA preset alone, an ablation between the paper and the "
            "official code (stosa_preset: paper or official sets all four)",
        )
        for form in ("layer_means", "input", "ffn", "init")
    },
}


def check_research_wing_keys(config, declared):
    """A :class:`ConfigError` for a research-only key the model does not declare."""
    for key, (product, what) in RESEARCH_WING_KEYS.items():
        value = config[key] if key in config else None
        if callable(product):
            product = product(config)
        if value is not None and value != product and key not in declared:
            raise ConfigError(
                f"{key} is a research-only option ({what}); the product commands and "
                f"models do not set it: train it with {RESEARCH_RUNNER}"
            )


def check_options(config, options):
    """A :class:`ConfigError` for the first key whose value its :class:`Option`
    refuses."""
    for key, option in options.items():
        value = config[key] if key in config else None
        if value is None:
            continue
        if expected := option.problem(value):
            raise ConfigError(
                f"{key} must be {expected}, got {value!r} (set --{key}=... or {key}: "
                "in a config file)"
            )


def check_model_options(config, classes, declared):
    """The options the run's ``classes`` declare, then their ``option_rules``."""
    check_options(config, {key: opt.check for key, opt in declared.items()})
    bases = [cls for model_class in classes for cls in reversed(model_class.__mro__)]
    for cls in dict.fromkeys(bases):
        for rule in vars(cls).get("option_rules", ()):
            if message := rule(config):
                raise ConfigError(message)


def check_values(config):
    """A :class:`ConfigError` for a renamed key or an invalid common value."""
    for key, instead in RENAMED_KEYS.items():
        if key in config and config[key] is not None:
            raise ConfigError(f"{key} was renamed; write {instead}")
    check_options(config, VALUE_RULES)
    hidden, heads = (
        config[k] if k in config else None for k in ("hidden_size", "n_heads")
    )
    if hidden and heads and hidden % heads:
        raise ConfigError(
            f"hidden_size ({hidden}) must be a multiple of n_heads ({heads}): every head "
            "gets hidden_size / n_heads dimensions"
        )


#: keys RecBole sets or reads without a yaml default (``encoding``: of the atomic files)
RECBOLE_INTERNAL_KEYS = tuple(
    "encoding model dataset config_files MODEL_TYPE MODEL_INPUT_TYPE eval_type "
    "device single_spec local_rank nproc world_size ip port offset verbose "
    "valid_neg_sample_args test_neg_sample_args".split()
)

#: recbole_attn keys read with a default in code (no yaml line): the metrics' options
PLUGIN_OPTIONAL_KEYS = (
    "ild_distance",
    "accdivf1_accuracy_metrics",
    "accdivf1_diversity_metrics",
    "f1_accuracy_metrics",
    "f1_diversity_metrics",
)


def yaml_keys(path):
    try:
        return frozenset(read_yaml(path) or ())
    except RecboleAttnError:
        return frozenset()


#: the shipped yaml files are read once per process (every run and trial asks again)
_shipped_yaml_keys = functools.lru_cache(maxsize=None)(yaml_keys)


def _recbole_properties():
    import recbole

    return os.path.join(os.path.dirname(recbole.__file__), "properties")


def _model_yaml_keys(folder):
    return {
        os.path.basename(path)[: -len(".yaml")]: _shipped_yaml_keys(path)
        for path in sorted(glob.glob(os.path.join(folder, "*.yaml")))
    }


def known_keys(model_names, run_files):
    """The keys a run of the model (class and base names) reads."""
    props = _recbole_properties()
    keys = set(RECBOLE_INTERNAL_KEYS) | set(PLUGIN_OPTIONAL_KEYS)
    general = [os.path.join(props, "overall.yaml")]
    general += glob.glob(os.path.join(props, "dataset", "*.yaml"))
    general += glob.glob(os.path.join(props, "quick_start_config", "*.yaml"))
    for path in general + list(run_files):
        keys |= _shipped_yaml_keys(path)
    recbole_models = _model_yaml_keys(os.path.join(props, "model"))
    for name in model_names:
        keys |= recbole_models.get(name, set())
    return keys


def model_keys(properties_dir):
    """key -> names of the models (ours and RecBole's) whose yaml sets it."""
    owners = {}
    for root in (properties_dir, _recbole_properties()):
        for model, keys in _model_yaml_keys(os.path.join(root, "model")).items():
            for key in keys:
                owners.setdefault(key, []).append(model)
    return owners


def known_run_keys(config):
    """The keys the run of ``config`` reads, declared options included."""
    names = [c.__name__ for cls in config.run_classes for c in cls.__mro__]
    return known_keys(names, config.shipped_files) | set(config.declared)


#: the unknown keys warned of one by one; those after them are one line
WARNED_KEYS = 10


def unknown_key_warnings(config, properties_dir):
    """Warnings for the keys the run does not read: the closest key, or who reads it;
    after :data:`WARNED_KEYS` of them, one line for the rest (40,000 keys were 40,000
    lines and a minute of closest-key searches)."""
    known, owners = known_run_keys(config), model_keys(properties_dir)
    model_name, messages = config.model_class.__name__, []
    unknown = sorted(set(config.given_keys) - known)
    for key in unknown[:WARNED_KEYS]:
        if key in owners:
            models = ", ".join(sorted(set(owners[key]))[:5])
            messages.append(
                f"{key!r} is not read by {model_name} (it is a key of {models}); "
                "it has no effect"
            )
            continue
        close = closest(key, known)
        hint = f"; did you mean {close!r}?" if close else ""
        messages.append(
            f"{key!r} is not a RecBole, recbole_attn or {model_name} key and has no "
            f"effect{hint}"
        )
    if rest := unknown[WARNED_KEYS:]:
        shown = ", ".join(repr(k) for k in rest[:3])
        messages.append(
            f"{len(rest)} more keys ({shown}, ...) are not read by {model_name} and "
            "have no effect; check the configuration files and the options given"
        )
    return messages
