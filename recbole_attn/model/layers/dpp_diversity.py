r"""DPAtt's diversity-aware kernel (Liu et al., KDD 2024, section 3.2.4): the category
kernel :math:`C` over all items (:func:`category_kernel`) and the ``product`` form of the
subset weights, the principal minors of the paper's composite kernel
:math:`T = L_{\le t} C_{\le t}^{-1}` on each prefix (:func:`causal_product_numerators`;
one batched LU solve per prefix). The ``ratio`` form, :math:`\det L_Y / \det C_Y`, is
closed form (:mod:`~recbole_attn.model.layers.dpp`); :func:`causal_dpp_pair_weights` and
:func:`causal_dpp_pair_probabilities` compute either form (this module builds on
``dpp``, never the other way round).
"""

import torch
import torch.nn.functional as F

from recbole_attn.model.layers.dpp import (
    causal_masks,
    causal_pair_numerators,
    check_diversity_form,
    check_k,
    floored_normalizer,
    masked_kernel,
    pair_minors,
    strict_upper,
    tiny_value,
    triple_minor_sums,
)


def category_kernel(vectors, jitter):
    r""":math:`C = (1-\beta) \hat V \hat V^\top + \beta I` from item vectors ``[..., n, r]``
    (rows normalized to unit length): :math:`C_{ii} = 1`, so
    :math:`\beta^{|Y|} \le \det C_Y \le 1` (Hadamard) and log det cannot run away."""
    v = F.normalize(vectors, dim=-1)
    eye = torch.eye(v.size(-2), dtype=v.dtype, device=v.device)
    return (1.0 - jitter) * (v @ v.transpose(-1, -2)) + jitter * eye


def sequence_category_kernel(vectors, item_seq, jitter):
    """The category kernel restricted to the items of ``item_seq [B, T]``: ``[B, T, T]``."""
    return category_kernel(vectors[item_seq], jitter)


def prefix_product_kernels(kernel, category, mask):
    r"""The paper's composite kernel (eq. 11) on every causal prefix:
    :math:`T^{(t)} = L_{Y_t} C_{Y_t}^{-1}` with :math:`Y_t` the valid positions x <= t,
    embedded in ``[..., T(t), T, T]`` (zero outside :math:`Y_t \times Y_t`).

    Exact, with one batched LU solve of ``B*T`` masked T x T systems: :math:`C` restricted
    to :math:`Y_t` with the identity on the other positions is block diagonal, so
    :math:`(L \circ 1_{Y_t Y_t}) \tilde C_t^{-1}` is :math:`L_{Y_t} C_{Y_t}^{-1}` on the
    block and 0 elsewhere. Note :math:`T^{(t)} \ne (L C^{-1})_{Y_t}`: the inverse is taken
    on the prefix (the paper's T on the ground set Y), so no future item leaks in.

    Args:
        kernel (torch.Tensor): L, ``[B, T, T]`` or ``[B, H, T, T]``.
        category (torch.Tensor): C, ``[B, T, T]``, positive definite on every prefix.
        mask (torch.Tensor): ``[B, T]`` bool, valid positions.

    Returns:
        torch.Tensor: ``[B, T(t), T, T]`` or ``[B, H, T(t), T, T]``.
    """
    heads = kernel.dim() == 4
    n = kernel.size(-1)
    dtype = kernel.dtype
    incl = torch.ones(n, n, dtype=torch.bool, device=kernel.device).tril()  # [t, x]
    member = (mask.bool().unsqueeze(-2) & incl).to(dtype)  # [B, t, x]: x in Y_t
    block = member.unsqueeze(-1) * member.unsqueeze(-2)  # [B, t, x, y]
    eye = torch.eye(n, dtype=dtype, device=kernel.device)
    outside = eye * (1.0 - member).unsqueeze(-1)  # identity on positions not in Y_t
    systems = category.to(dtype).unsqueeze(-3) * block + outside  # block diagonal
    lu, pivots = torch.linalg.lu_factor(systems)  # one factorization per prefix
    if heads:
        lu, pivots, block = lu.unsqueeze(1), pivots.unsqueeze(1), block.unsqueeze(1)
    rhs = kernel.unsqueeze(-3) * block  # L_{Y_t}, zero outside
    return torch.linalg.lu_solve(lu, pivots, rhs, left=False)  # X C~ = L_{Y_t}


def causal_product_numerators(kernel, category, mask, k, masks=None):
    r"""Per-prefix pair weights ``W[..., t, r]`` and floored normalizers ``Z[..., t]`` of
    the product form of DPAtt: for query t the k-DPP kernel is the paper's
    :math:`T^{(t)} = L_{Y_t} C_{Y_t}^{-1}` (:func:`prefix_product_kernels`).

    * k = 2: :math:`W_{tr} = \max(0, T_{tt} T_{rr} - T_{tr} T_{rt})` (the 2x2 principal
      minor of :math:`T^{(t)}`);
    * k = 3: :math:`W_{tr} = \max(0, S^{(t)}_{tr})`, :math:`S_{tr}` = the sum of the 3x3
      principal minors of :math:`T^{(t)}` over every third item of the prefix
      (:func:`triple_minor_sums`, valid for non-symmetric kernels);
    * :math:`Z_t = \sum_{a<b \in Y_t} \max(0, M_{ab})` with M the pair minors (k = 2) or
      triple sums (k = 3) of :math:`T^{(t)}`, divided by 3 for k = 3; floored at
      ``100 eps ||T^(t)||_F^k`` (the rounding scale of the minors).

    **Negative minors.** :math:`T^{(t)}` is similar to the PSD matrix
    :math:`R^{-1} L_{Y_t} R^{-\top}` (:math:`C_{Y_t} = R R^\top`), so :math:`e_k(T^{(t)})
    \ge 0`, but its principal minors are not :math:`\det L_Y / \det C_Y` and can be
    negative. We clamp every pair quantity at 0 and normalize by the sum of the clamped
    quantities over the prefix, so P is a proper distribution over pairs (k = 2:
    :math:`0 \le P \le 1`, :math:`\sum_{r<s} P = 1`; k = 3: :math:`0 \le P \le 3`) and
    never divides by a near-zero signed sum. For k = 3 the clamp acts on the sum over third
    items, not on each triple. Where no minor is negative (e.g. :math:`C = I`) this is the
    exact k-DPP of :math:`T^{(t)}`.

    Cost: one LU of a T x T system per prefix (``B*T`` of them, O(B T^4)), and the full
    :math:`T^{(t)}` per prefix and head, O(B H T^3) memory and, for k = 3, one batched
    matmul of O(B H T^4) time; the ratio form is O(B H T^2) for k = 2.
    """
    check_k(k)
    heads = kernel.dim() == 4
    if masks is None:
        masks = causal_masks(mask, k, heads, kernel.dtype)
    prod = prefix_product_kernels(kernel, category, mask)  # [..., t, a, b]
    n = kernel.size(-1)
    if k == 2:
        minors = pair_minors(prod)
    else:
        minors = triple_minor_sums(prod)
    minors = minors.clamp_min(0.0)
    upper = strict_upper(n, kernel.device)
    norm = (minors * upper).sum((-1, -2))  # outside Y_t the minors are 0
    if k == 3:
        norm = norm / 3.0
    # floor 100 eps ||T||_F^k, as (||T||_F^2)^(k/2): no sqrt, whose derivative at 0
    # (zero kernel, padding rows) is infinite
    eps = torch.finfo(kernel.dtype).eps
    floor = 100.0 * eps * prod.square().sum((-1, -2)) ** (0.5 * k)
    norm = torch.maximum(norm, floor + tiny_value(kernel.dtype))
    # row t of the query: minors of T^(t) at (t, r)
    own = torch.diagonal(minors, dim1=-3, dim2=-2).transpose(-1, -2)  # [..., t, r]
    return own * masks.pairs, norm


def causal_dpp_pair_weights(
    kernel, mask, k, diversity_form="ratio", category=None, masks=None, **kwargs
):
    r"""The numerators ``W[..., t, r]`` and floored normalizers ``Z[..., t]`` of
    :func:`causal_dpp_pair_probabilities` (``P = W / Z``), so that a caller scaling P
    (the attention logits :math:`-\lambda P`) divides only once."""
    check_k(k)
    check_diversity_form(diversity_form)
    mask = mask.bool()
    if diversity_form == "product" and category is not None:
        return causal_product_numerators(kernel, category, mask, k, masks=masks)
    num, norm = causal_pair_numerators(
        kernel, mask, k, category=category, masks=masks, **kwargs
    )
    if not kwargs.get("premasked"):
        kernel = masked_kernel(kernel, mask.unsqueeze(1) if kernel.dim() == 4 else mask)
    return num, floored_normalizer(norm, kernel, k)


def causal_dpp_pair_probabilities(kernel, mask, k, **kwargs):
    r"""Per-prefix k-DPP pair marginals ``P[..., t, r]``: for r < t both valid, the
    probability that the k-subset drawn from the k-DPP on the valid prefix
    :math:`\{x \le t\}` contains r and t; zero elsewhere (also for prefixes with fewer than k
    items). ``kernel`` is ``[B, T, T]`` or ``[B, H, T, T]``, ``mask`` ``[B, T]``.
    ``diversity_form="product"`` (needs ``category``): the k-DPP of
    :math:`L_{\le t} C_{\le t}^{-1}` (:func:`causal_product_numerators`). ``masks``: the
    batch's :func:`causal_masks`, when already built; other keyword arguments go to
    the ratio form's :func:`~recbole_attn.model.layers.dpp.causal_pair_numerators`."""
    num, norm = causal_dpp_pair_weights(kernel, mask, k, **kwargs)
    return num / norm.unsqueeze(-1)
