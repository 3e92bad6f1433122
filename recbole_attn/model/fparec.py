r"""
FPARec
################################################

Reference:
    Fan Luo, Juan Zhang and Shenghui Xu. "Learning Positional Attention for Sequential
    Recommendation."

Reference code:
    https://github.com/NetEase-Media/FPARec

PARec (:mod:`recbole_attn.model.parec`) with the factorized positional attention.
"""

from recbole_attn.model.parec import PARec


class FPARec(PARec):
    r"""FPARec: PARec with the factorized positional attention of eq. 7,
    :math:`\mathrm{softmax}(R_{1,l} R_{2,l}^\top / \sqrt{d_h})` with
    :math:`R_{1,l}, R_{2,l} \in \mathbb{R}^{h \times n \times k}` (``factor_k``): 2kn
    parameters per head instead of :math:`n^2`.

    NOTE:
        PARec's notes apply. The factors are initialized with std
        :math:`\sqrt{0.01}/k^{1/4}` so that the product has std 0.01, as PARec's R.
    """

    factored = True
