"""The commands besides training: evaluate, recommend, compare, tune, plot."""
