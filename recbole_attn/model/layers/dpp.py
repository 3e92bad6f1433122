r"""k-DPP quantities of the probabilistic attention of PAtt / DPAtt (the score module is
:class:`~recbole_attn.model.layers.dpp_score.DPPScore`).

Reference:
    Yuli Liu, Christian Walder, Lexing Xie and Yiqun Liu. "Probabilistic Attention for
    Sequential Recommendation." in KDD 2024.

Everything here is closed form (``docs/patt.md``, "Closed forms"): no ``linalg.det``, no
eigendecomposition, no Python loop over pairs or positions. With ``d = diag(L)``:

* all 2x2 principal minors: :math:`M2_{rt} = d_r d_t - L_{rt} L_{tr}` (0 on the diagonal);
* all triple sums :math:`S_{rt} = \sum_{x \ne r,t} \det L_{\{r,t,x\}}`: one batched matmul;
* :math:`e_2 = \sum_{r<t} M2_{rt}`, :math:`e_3 = \frac13 \sum_{r<t} S_{rt}`;
* k-DPP pair marginals :math:`P^2(r,t) = M2_{rt}/e_2`, :math:`P^3(r,t) = S_{rt}/e_3`
  (the probability that a k-subset drawn from the k-DPP contains both r and t).

The causal forms give, for query t, the same marginals under the k-DPP whose ground set is
the valid prefix :math:`\{x \le t\}`: no normalizer sees a future item.

DPAtt's diversity-aware weight of a k-subset Y has two forms (``diversity_form``):
``"ratio"`` (default), :math:`\det L_Y / \det C_Y`, and ``"product"``, the principal
minors of the paper's composite kernel :math:`T = L_{\le t} C_{\le t}^{-1}` on each prefix
(:func:`causal_product_numerators`; it needs one batched LU solve per prefix, the only
non-closed-form step in this module).
"""

from typing import NamedTuple

import torch

SUPPORTED_K = (2, 3)
DIVERSITY_FORMS = ("ratio", "product")


def check_k(k, length=None):
    """Raise a ValueError unless ``k`` is 2 or 3 and ``length`` (if given) is >= k."""
    if k not in SUPPORTED_K:
        raise ValueError(
            f"dpp_k must be 2 (PAtt^2, pairs) or 3 (PAtt^3, triples), got {k!r}; "
            "set dpp_k: 2 or dpp_k: 3 (e.g. --dpp_k=3)"
        )
    if length is not None and length < k:
        raise ValueError(
            f"a {k}-DPP needs a ground set of at least {k} items but the maximum sequence "
            f"length is {length}; raise MAX_ITEM_LIST_LENGTH to >= {k} or lower dpp_k"
        )


def check_diversity_form(form):
    """Raise a ValueError unless ``form`` is one of :data:`DIVERSITY_FORMS`."""
    if form not in DIVERSITY_FORMS:
        raise ValueError(
            f"dpp_diversity_form must be 'ratio' (subset weight det(L_Y)/det(C_Y)) or "
            f"'product' (minors of the paper's T = L C^-1 per prefix), got {form!r}"
        )


def tiny_value(dtype):
    # an absolute normalizer floor far above denormals: 0/0 rows become exact zeros and
    # the gradient of num/Z stays finite
    return torch.finfo(dtype).tiny ** 0.5


def _normalizer_floor(trace, k):
    r"""A floor for :math:`e_k`: ``100 eps * trace^k``. The closed forms lose about
    ``eps * trace^k`` to cancellation, so a kernel of numerical rank < k (every k-minor is
    rounding noise) gives probabilities near 0 (uniform attention) instead of noise / noise.
    """
    eps = torch.finfo(trace.dtype).eps
    return 100.0 * eps * trace.clamp_min(0.0) ** k + tiny_value(trace.dtype)


def masked_kernel(kernel, mask):
    """``kernel`` with the rows and columns of invalid positions set to 0 (exact: a zero
    row contributes nothing to any minor)."""
    m = mask.to(kernel.dtype)
    return kernel * m.unsqueeze(-1) * m.unsqueeze(-2)


def pair_minors(kernel):
    r"""All 2x2 principal minors :math:`d_r d_t - L_{rt} L_{tr}` ``[..., T, T]``."""
    d = torch.diagonal(kernel, dim1=-2, dim2=-1)
    minors = d.unsqueeze(-1) * d.unsqueeze(-2) - kernel * kernel.transpose(-1, -2)
    eye = torch.eye(kernel.size(-1), dtype=torch.bool, device=kernel.device)
    return minors.masked_fill(eye, 0.0)


def triple_minor_sums(kernel):
    r""":math:`S_{rt} = \sum_{x \notin \{r,t\}} \det L_{\{r,t,x\}}` ``[..., T, T]`` for any
    square (also non-symmetric) kernel: one matmul, zero diagonal."""
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


def strict_upper(n, device):
    return torch.ones(n, n, dtype=torch.bool, device=device).triu(1)


def elementary_symmetric(kernel, mask, k):
    r""":math:`e_k` of the eigenvalues of the valid block of ``kernel`` ``[B, T, T]`` (the
    k-DPP normalizer: the sum of all k x k principal minors over the valid positions).
    """
    check_k(k)
    lm = masked_kernel(kernel, mask)
    upper = strict_upper(kernel.size(-1), kernel.device)
    minors = pair_minors(lm) if k == 2 else triple_minor_sums(lm)
    total = (minors * upper).sum((-1, -2))
    return total if k == 2 else total / 3.0


def dpp_pair_probabilities(kernel, mask, k):
    r"""k-DPP pair marginals over the valid positions.

    Args:
        kernel (torch.Tensor): ``[B, T, T]`` DPP kernel (PSD for a proper k-DPP; the closed
            forms hold for any square matrix).
        mask (torch.Tensor): ``[B, T]`` bool, True for the positions in the ground set.
        k (int): 2 or 3.

    Returns:
        torch.Tensor: ``[B, T, T]``; for r != t both valid, the probability that the k-subset
        drawn from the k-DPP on the valid positions contains r and t (k = 2:
        :math:`\det L_{rt}/e_2`; k = 3: :math:`\sum_x \det L_{rtx}/e_3`). Zero on the
        diagonal, wherever r or t is invalid, and for rows with fewer than k valid items
        (no k-subset exists).
    """
    check_k(k, kernel.size(-1))
    mask = mask.bool()
    lm = masked_kernel(kernel, mask)
    minors = pair_minors(lm) if k == 2 else triple_minor_sums(lm)
    upper = strict_upper(kernel.size(-1), kernel.device)
    norm = (minors * upper).sum((-1, -2))
    if k == 3:
        norm = norm / 3.0
    trace = torch.diagonal(lm, dim1=-2, dim2=-1).sum(-1)
    norm = torch.maximum(norm, _normalizer_floor(trace, k))
    enough = mask.sum(-1) >= k  # a k-subset exists
    valid = mask.unsqueeze(-1) & mask.unsqueeze(-2) & enough[..., None, None]
    probs = minors / norm[..., None, None]
    return torch.where(valid, probs, torch.zeros_like(probs)).masked_fill(
        torch.eye(kernel.size(-1), dtype=torch.bool, device=kernel.device), 0.0
    )


def det3(a, b, c, f, g, h):
    r"""Determinant of the symmetric 3x3 matrix with diagonal (a, b, c) and off-diagonal
    entries f = (b,c), g = (a,c), h = (a,b): :math:`abc + 2fgh - af^2 - bg^2 - ch^2`."""
    return a * b * c + 2.0 * f * g * h - a * f * f - b * g * g - c * h * h


def causal_strict_lower(mask):
    """``[B, T, T]`` bool: entry (t, r) is True iff r < t and both are valid."""
    n = mask.size(-1)
    lower = torch.ones(n, n, dtype=torch.bool, device=mask.device).tril(-1)
    return lower & mask.unsqueeze(-1) & mask.unsqueeze(-2)


def _triple_dets(kernel, x):
    r"""3x3 principal minors :math:`\det L_{\{r,t,x\}}` ``[..., T(t), T(r), s]`` of a
    symmetric ``kernel [..., T, T]`` for third items ``x [..., T(t), T(r), s]``."""
    n, s = kernel.size(-1), x.size(-1)
    lead = x.shape[:-3]
    d = torch.diagonal(kernel, dim1=-2, dim2=-1)
    flat = x.reshape(*lead, n, n * s)  # row t
    l_tx = torch.gather(kernel, -1, flat).reshape(x.shape)
    by_r = x.transpose(-2, -3).reshape(*lead, n, n * s)  # row r
    l_rx = torch.gather(kernel, -1, by_r).reshape(*lead, n, n, s).transpose(-2, -3)
    d_x = torch.gather(d.unsqueeze(-2).expand(*d.shape[:-1], n, n), -1, flat)
    d_x = d_x.reshape(x.shape)
    d_t = d.unsqueeze(-1).unsqueeze(-1)
    d_r = d.unsqueeze(-2).unsqueeze(-1)
    return det3(d_r, d_t, d_x, l_tx, l_rx, kernel.unsqueeze(-1))


def _dense_triple_dets(kernel):
    """All 3x3 principal minors ``[..., T(t), T(r), T(x)]`` of a symmetric kernel."""
    d = torch.diagonal(kernel, dim1=-2, dim2=-1)
    return det3(
        d.unsqueeze(-2).unsqueeze(-1),  # r
        d.unsqueeze(-1).unsqueeze(-1),  # t
        d.unsqueeze(-2).unsqueeze(-2),  # x
        kernel.unsqueeze(-2),  # (t, x)
        kernel.unsqueeze(-3),  # (r, x)
        kernel.unsqueeze(-1),  # (t, r)
    )


def sample_third_items(shape, samples, device, generator=None):
    r"""Indices ``[*shape[:-2], T(t), T(r), s]`` uniform over :math:`\{0..t-1\} \setminus
    \{r\}` (for right-padded sequences every position before a valid t is valid). Entries
    without such an item (t < 2) are arbitrary and masked by the caller."""
    n = shape[-1]
    u = torch.rand(*shape[:-2], n, n, samples, device=device, generator=generator)
    t = torch.arange(n, device=device).view(n, 1, 1)
    r = torch.arange(n, device=device).view(1, n, 1)
    avail = (t - 1).clamp_min(1)
    j = (u * avail).long().clamp_max(avail - 1)
    return j + (j >= r).long()


class CausalMasks(NamedTuple):
    """Masks of the causal per-prefix k-DPP, built once per batch (float, for fused ops).

    ``keys [B, (1,) T, T]``: 1 at (t, r) iff r < t and both are valid; ``pairs``: the same
    where the prefix of t also holds at least k valid items (numerators); ``diag``: 1 at
    (t, t) for valid t."""

    keys: torch.Tensor
    pairs: torch.Tensor
    diag: torch.Tensor


def causal_masks(mask, k, heads=False, dtype=torch.float32):
    """:class:`CausalMasks` of ``mask [B, T]`` (``heads``: with a head axis)."""
    mask = mask.bool()
    keys = causal_strict_lower(mask)
    pairs = (keys & (mask.cumsum(-1) >= k).unsqueeze(-1)).to(dtype)
    keys = keys.to(dtype)
    diag = torch.diag_embed(mask.to(dtype))
    if heads:
        keys, pairs, diag = keys.unsqueeze(1), pairs.unsqueeze(1), diag.unsqueeze(1)
    return CausalMasks(keys, pairs, diag)


def causal_pair_numerators(
    kernel,
    mask,
    k,
    triple_samples=0,
    category=None,
    jitter=0.1,
    third_items=None,
    masks=None,
    premasked=False,
):
    r"""Unnormalized per-prefix pair weights ``W[..., t, r]`` (r < t, both valid) and the
    per-prefix normalizers ``Z[..., t]`` for a symmetric PSD ``kernel`` ``[B, T, T]`` or
    ``[B, H, T, T]``; ``mask [B, T]``.

    For query t the ground set is the valid prefix :math:`\{x \le t\}`, and the
    (unnormalized) weight of a k-subset Y is :math:`\det L_Y`, or
    :math:`\det L_Y / \det C_Y` with a category kernel ``category`` (DPAtt, ``[B, T, T]``):

    * k = 2: :math:`W_{tr}` = the weight of :math:`\{r,t\}`; :math:`Z_t` = the sum of all
      pair weights inside the prefix (:math:`e_2` of the prefix without C).
    * k = 3 exact: :math:`W_{tr} = \sum_{x<t,\,x\ne r} w(\{r,t,x\})`; :math:`Z_t =
      \sum_{t'\le t} \frac12 \sum_{r<t'} W_{t'r}` (every triple in the prefix once).
      Without C: a handful of matmuls (``docs/patt.md``); with C: dense
      ``[..., T, T, T]`` (O(T^3) memory).
    * k = 3 sampled (``triple_samples = s > 0``): :math:`W_{tr} = \frac{t-1}{s}\sum_j
      w(\{r,t,x_j\})`, :math:`x_j` uniform over :math:`\{0..t-1\} \setminus \{r\}`
      (an unbiased estimate of the exact sum). :math:`Z_t` is exact without C (closed
      form) and built from the sampled :math:`W` with C.

    Rows whose prefix holds fewer than k valid items get W = 0 (no k-subset exists).
    Minors of a PSD kernel are >= 0; rounding can make the closed forms slightly negative,
    so every numerator is clamped at 0 (then :math:`W_{tr} \le Z_t` for k = 2 and
    :math:`W_{tr} \le 2 Z_t` for k = 3: probabilities stay bounded). ``premasked``: the
    rows and columns of invalid positions of ``kernel`` are already 0.
    """
    heads = kernel.dim() == 4
    if masks is None:
        masks = causal_masks(mask, k, heads, kernel.dtype)
    pairs = masks.pairs
    if heads and category is not None:
        category = category.unsqueeze(1)
    lm = (
        kernel
        if premasked
        else masked_kernel(kernel, mask.unsqueeze(1) if heads else mask)
    )
    d = torch.diagonal(lm, dim1=-2, dim2=-1)
    d_t, d_r = d.unsqueeze(-1), d.unsqueeze(-2)
    if k == 2:
        num = torch.addcmul(d_t * d_r, lm, lm, value=-1.0)
        if category is not None:
            num = num / pair_minors(category).clamp_min(jitter * jitter)
        num = num.clamp_min(0.0) * pairs
        return num, num.sum(-1).cumsum(-1)

    n = kernel.size(-1)
    if triple_samples:
        x = third_items
        if x is None:
            x = sample_third_items(lm.shape, triple_samples, lm.device)
        dets = _triple_dets(lm, x).clamp_min(0.0)
        if category is not None:
            cat = category.expand(*lm.shape)
            dets = dets / _triple_dets(cat, x).clamp_min(jitter**3)
        count = (torch.arange(n, device=lm.device, dtype=lm.dtype) - 1.0).clamp_min(0)
        num = dets.mean(-1) * (count.unsqueeze(-1) * pairs)
        if category is not None:
            return num, (0.5 * num.sum(-1)).cumsum(-1)
        _, norm = causal_pair_numerators(lm, mask, 3, masks=masks, premasked=True)
        return num, norm

    if category is not None:
        t = torch.arange(n, device=lm.device).view(n, 1, 1)
        r = torch.arange(n, device=lm.device).view(1, n, 1)
        xs = torch.arange(n, device=lm.device).view(1, 1, n)
        allowed = ((xs < t) & (xs != r)).to(lm.dtype)
        dets = _dense_triple_dets(lm).clamp_min(0.0)
        dets = dets / _dense_triple_dets(category).clamp_min(jitter**3)
        num = (dets * allowed).sum(-1) * pairs
        return num, (0.5 * num.sum(-1)).cumsum(-1)

    # k = 3 exact, closed form (docs/patt.md, "Closed forms")
    incl = torch.ones(n, n, dtype=lm.dtype, device=lm.device).tril()  # U[t, x]=[x<=t]
    tau = d.cumsum(-1).unsqueeze(-1)  # tau_t = sum_{x<=t} d_x
    sq = lm * lm
    prefix_l = (lm * incl) @ lm  # [t, r] = sum_{x<=t} L_tx L_xr
    sq_rows = sq @ incl.transpose(0, 1)  # [r, t] = sum_{x<=t} L_rx^2
    q_t = torch.diagonal(sq_rows, dim1=-2, dim2=-1).unsqueeze(-1)  # sum_{x<=t} L_tx^2
    r_tr = sq_rows.transpose(-1, -2)  # [t, r]
    # (d_t d_r - L_tr^2) tau_t + 2 L_tr prefix_l - d_r q_t - d_t r_tr, as one outer
    # product and three fused multiply-adds (four passes over [.., T, T] instead of ten)
    num = d_r * (d_t * tau - q_t)
    num = torch.addcmul(num, sq, tau, value=-1.0)
    num = torch.addcmul(num, d_t, r_tr, value=-1.0)
    num = torch.addcmul(num, lm, prefix_l, value=2.0)
    num = num.clamp_min(0.0) * pairs
    return num, (0.5 * num.sum(-1)).cumsum(-1)


def floored_normalizer(norm, kernel, k):
    """``norm`` floored at the rounding scale of the minors of ``kernel``."""
    trace = torch.diagonal(kernel, dim1=-2, dim2=-1).cumsum(-1)
    return torch.maximum(norm, _normalizer_floor(trace, k))


__all__ = [
    "SUPPORTED_K",
    "DIVERSITY_FORMS",
    "check_k",
    "check_diversity_form",
    "pair_minors",
    "triple_minor_sums",
    "elementary_symmetric",
    "dpp_pair_probabilities",
    "causal_pair_numerators",
    "causal_masks",
    "CausalMasks",
    "sample_third_items",
]
