"""A trained model outside the training stack: its scoring function as ONNX
(:mod:`~recbole_attn.commands.serving.onnx_export`), the scorers a server runs (ONNX Runtime or the
checkpoint, :mod:`~recbole_attn.commands.serving.scorers`), the ranking of their scores
(:mod:`~recbole_attn.commands.serving.ranking`) and the HTTP app (:mod:`~recbole_attn.commands.serving.app`)
(docs/serving.md)."""
