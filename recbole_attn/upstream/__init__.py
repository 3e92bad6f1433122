"""Our models as RecBole's own: ``recbole-attn export-upstream`` writes them, generated from
this package's code, into a RecBole checkout (:mod:`recbole_attn.upstream.export`;
docs/upstream.md)."""
