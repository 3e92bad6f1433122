"""A trained model outside the training stack: its scoring function as ONNX
(:mod:`~recbole_attn.serving.onnx_export`), the scorers a server runs (ONNX Runtime or the
checkpoint, :mod:`~recbole_attn.serving.scorers`), the ranking of their scores
(:mod:`~recbole_attn.serving.ranking`) and the HTTP app (:mod:`~recbole_attn.serving.app`)
(docs/serving.md)."""
