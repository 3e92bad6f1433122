"""FPARec as the plugin runs it: PARec's plugin class on the RecBole file's model
(:class:`recbole_attn.model.fparec.FPARec`), its options declared once."""

from recbole_attn.model import fparec
from recbole_attn.options.declared import Integer, Opt
from recbole_attn.plugin.parec import PARec


class FPARec(PARec, fparec.FPARec):
    __doc__ = fparec.FPARec.__doc__
    yaml_header = """FPARec: PARec with R_l = R1 R2^T, R1, R2 of size n x k per head (PARec.yaml is loaded
first). Paper: k >= 20 is robust (Table 5)."""
    options = {"factor_k": Opt(20, Integer(1), "k, the rank of R1 R2^T")}
    option_rules = (
        lambda c: (
            f"factor_k factorizes the learned R; positional_pattern "
            f"{c['positional_pattern']!r} is fixed: use PARec for fixed patterns"
            if c["positional_pattern"] != "learned"
            else None
        ),
    )
