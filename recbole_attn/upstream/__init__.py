"""Our models as RecBole's own files: ``recbole-attn export-upstream``."""
