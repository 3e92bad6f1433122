"""The plugin's sequential training and prediction around a model file (:mod:`recbole_attn.sequential.recommender`)."""
