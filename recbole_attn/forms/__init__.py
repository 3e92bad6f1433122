"""The forms of our models beside the model files (which hold the one form per paper
that reproduces): STOSA's paper model, PARec's fixed patterns, RKSA's other kernels and
DPAtt's product form, each a subclass of a model file's class or layers
(docs/models.md)."""
