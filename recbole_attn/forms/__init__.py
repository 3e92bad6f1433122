"""
recbole_attn.forms
##################

The forms of our models that the plugin offers beside the model files of
:mod:`recbole_attn.model` (what RecBole could merge holds one model per paper, the form
that reproduces): STOSA's paper model (``stosa_preset: paper``), PARec's fixed
positional patterns, RKSA's other kernels and DPAtt's other uses of the category
kernel (its product form; its pre-stage as the plugin runs it). Each is a subclass of a
model file's class or of its layers; :mod:`recbole_attn.sequential.models` builds the plugin's
models on them.
"""
