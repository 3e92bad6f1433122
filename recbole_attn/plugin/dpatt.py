r"""DPAtt as the plugin runs it: PAtt's plugin class on the RecBole file's model
(:class:`recbole_attn.model.dpatt.DPAtt`), its options declared once, and the form
``dpp_diversity_form: product``: the paper's composite kernel (eq. 11) on every causal
prefix, :math:`T^{(t)} = L_{Y_t} C_{Y_t}^{-1}`, in place of the model file's
:math:`\det L_Y / \det C_Y`; O(B T^4) time, exact only (docs/patt.md)."""

import torch

from recbole_attn.model import dpatt
from recbole_attn.model.dpatt import pair_minors
from recbole_attn.model.patt import causal_masks, tiny_value
from recbole_attn.options.declared import Default, Integer, Number, OneOf, Opt
from recbole_attn.plugin.patt import PAtt

#: ``dpp_diversity_form``: the model file's subset weight, or the paper's kernel
DIVERSITY_FORMS = ("ratio", "product")


def triple_minor_sums(kernel):
    r""":math:`S_{rt} = \sum_{x \notin \{r,t\}} \det L_{\{r,t,x\}}` ``[..., T, T]`` by
    one matmul."""
    d = torch.diagonal(kernel, dim1=-2, dim2=-1)
    tau = d.sum(-1)[..., None, None]
    sq = kernel @ kernel
    sq_d = torch.diagonal(sq, dim1=-2, dim2=-1)
    lt = kernel.transpose(-1, -2)
    sums = (
        d.unsqueeze(-1) * d.unsqueeze(-2) * tau
        + kernel * sq.transpose(-1, -2)
        + lt * sq
        - d.unsqueeze(-1) * sq_d.unsqueeze(-2)
        - d.unsqueeze(-2) * sq_d.unsqueeze(-1)
        - kernel * lt * tau
    )
    eye = torch.eye(kernel.size(-1), dtype=torch.bool, device=kernel.device)
    return sums.masked_fill(eye, 0.0)


def prefix_product_kernels(kernel, category, mask):
    """:math:`T^{(t)} = L_{Y_t} C_{Y_t}^{-1}` of every causal prefix, ``[B, (H,) T(t),
    T, T]``."""
    n = kernel.size(-1)
    dtype = kernel.dtype
    incl = torch.ones(n, n, dtype=torch.bool, device=kernel.device).tril()  # [t, x]
    member = (mask.unsqueeze(-2) & incl).to(dtype)  # [B, t, x]: x in Y_t
    block = member.unsqueeze(-1) * member.unsqueeze(-2)  # [B, t, x, y]
    eye = torch.eye(n, dtype=dtype, device=kernel.device)
    outside = eye * (1.0 - member).unsqueeze(-1)  # identity on positions not in Y_t
    systems = category.to(dtype).unsqueeze(-3) * block + outside  # block diagonal
    lu, pivots = torch.linalg.lu_factor(systems)  # one factorization per prefix
    if kernel.dim() == 4:  # heads
        lu, pivots, block = lu.unsqueeze(1), pivots.unsqueeze(1), block.unsqueeze(1)
    rhs = kernel.unsqueeze(-3) * block  # L_{Y_t}, zero outside
    return torch.linalg.lu_solve(lu, pivots, rhs, left=False)  # X C~ = L_{Y_t}


def causal_product_numerators(kernel, category, mask, k, masks=None):
    """Pair weights ``W[..., t, r]`` of :math:`T^{(t)}` clamped at 0, and their sums
    ``Z[..., t]``."""
    if masks is None:
        masks = causal_masks(mask, k, kernel.dim() == 4, kernel.dtype)
    prod = prefix_product_kernels(kernel, category, mask)  # [B, (H,) t, a, b]
    minors = pair_minors(prod) if k == 2 else triple_minor_sums(prod)
    minors = minors.clamp_min(0.0)
    n = kernel.size(-1)
    upper = torch.ones(n, n, dtype=torch.bool, device=kernel.device).triu(1)
    norm = (minors * upper).sum((-1, -2))  # outside Y_t the minors are 0
    if k == 3:
        norm = norm / 3.0
    # floor 100 eps ||T||_F^k, as (||T||_F^2)^(k/2): no sqrt, whose derivative at 0
    # (zero kernel, padding rows) is infinite
    eps = torch.finfo(kernel.dtype).eps
    floor = 100.0 * eps * prod.square().sum((-1, -2)) ** (0.5 * k)
    norm = torch.maximum(norm, floor + tiny_value(kernel.dtype))
    own = torch.diagonal(minors, dim1=-3, dim2=-2).transpose(-1, -2)  # [..., t, r]
    return own * masks.pairs, norm


class ProductDPPAttention(dpatt.DiversityDPPAttention):
    """DPAtt's attention with the paper's composite kernel on every prefix."""

    def pair_weights(self, kernel, valid, masks):
        return causal_product_numerators(
            kernel, masks.category.to(kernel.dtype), valid, self.k, masks
        )


class DPAttWithForms(dpatt.DPAtt):
    """The model file's DPAtt, or the product form (:class:`ProductDPPAttention`)."""

    def __init__(self, config, dataset):
        self.diversity_form = config["dpp_diversity_form"]
        if self.diversity_form not in DIVERSITY_FORMS:
            raise ValueError(
                f"dpp_diversity_form must be ratio or product, got "
                f"{self.diversity_form!r}"
            )
        super().__init__(config, dataset)

    def attention_layer(self):
        layer = super().attention_layer()
        if self.diversity_form == "product":  # the same layer with the paper's weights
            layer.__class__ = ProductDPPAttention
        return layer


class DPAtt(PAtt, DPAttWithForms):
    __doc__ = dpatt.DPAtt.__doc__
    needs_item_categories = True
    yaml_header = """DPAtt (Liu et al., KDD 2024): PAtt with the diversity-aware kernel, subset weight
det(L_Y) / det(C_Y) (or the paper's product kernel: dpp_diversity_form). C is learned
in a pre-stage with eq. 10 from training histories and item categories (category_field),
then frozen. DPAtt^3: --dpp_k=3. Every other key comes from PAtt.yaml (loaded first)."""
    options = {
        "dpp_cat_jitter": Opt(
            0.1, Number("probability"), "beta of C = (1-beta) V V^T + beta I"
        ),
        "dpp_cat_rank": Opt(32, Integer(1), "rank r of C"),
        "dpp_cat_set_size": Opt(
            4, Integer(2), "size of the (diverse, less diverse) training sets"
        ),
        "dpp_cat_draws": Opt(
            8, Integer(1), "random subsets per training history and step"
        ),
        "dpp_cat_steps": Opt(200, Integer(0), "Adam steps of the pre-stage"),
        "dpp_cat_lr": Opt(0.05, Number("positive"), "learning rate of the pre-stage"),
        "dpp_diversity_form": Opt(
            "ratio",
            OneOf(*DIVERSITY_FORMS),
            "ratio: subset weight det(L_Y)/det(C_Y); product: k-DPP of the paper's "
            "T = L_{<=t} C_{<=t}^-1 per prefix, minors clamped at 0, O(B T^4) time",
        ),
    }
    defaults = {
        "category_field": Default(
            "categories", "token_seq item feature with the categories (ml-100k: class)"
        )
    }
    option_rules = (
        lambda c: (
            "dpp_diversity_form: product is exact only: set dpp_triple_samples: 0 with "
            "it, or use dpp_diversity_form: ratio"
            if c["dpp_diversity_form"] == "product" and c["dpp_triple_samples"]
            else None
        ),
    )

    def calculate_loss(self, interaction):
        """The plugin's loss, after the pre-stage that learns C (once)."""
        self.fit_category_kernel()
        return super().calculate_loss(interaction)
