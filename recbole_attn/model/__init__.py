"""The models, one file a model, each a RecBole ``SequentialRecommender`` that stands
alone as RecBole's own ``sasrec.py`` does (torch and RecBole only; AWRSR builds on STOSA's
file): the files ``recbole-attn export-upstream`` writes into RecBole's tree. The plugin
runs them with its training and options mixed in: :mod:`recbole_attn.plugin`.
"""
