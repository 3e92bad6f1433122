"""
recbole_attn.upstream.exported
##############################

Definitions written for RecBole's tree in place of ours
(:data:`recbole_attn.upstream.bundle.FUNCTION_SUBSTITUTES`): the exported models have no
option declarations, only the keys each class reads (``config_keys``).
"""


def load_options(model, config):
    """Set every key that the model's classes list in ``config_keys`` as an attribute of
    ``model`` named as the key (base classes first)."""
    for cls in reversed(type(model).__mro__):
        for key in vars(cls).get("config_keys", ()):
            setattr(model, key, config[key])
