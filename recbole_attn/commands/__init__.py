"""The commands of ``recbole-attn``: each module adds its flags to its parser
(``add_arguments``) and runs (``run``); ``recbole_attn.cli`` parses and dispatches."""
