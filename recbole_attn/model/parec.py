r"""
PARec, FPARec
################################################

Reference:
    "Positional Attention for Sequential Recommendation" (PARec / FPARec).

Reference code:
    https://github.com/NetEase-Media/FPARec (TensorFlow; read for its behaviour only,
    docs/models.md, "PARec / FPARec")

The attention of every block is a learned function of the query and key positions only
(:class:`~recbole_attn.model.layers.positional.PositionalScore`): no query or key
projection.
"""

from torch import nn

from recbole_attn.config_check import Flag, Integer, Number, OneOf
from recbole_attn.model.item_embedding import ItemEmbeddingRecommender
from recbole_attn.model.layers import (
    FeedForward,
    MultiHeadSelfAttention,
    TransformerEncoder,
    TransformerLayer,
)
from recbole_attn.model.layers.positional import PATTERNS, PositionalScore

FFN_PLACEMENTS = ("block", "after")


class PARec(ItemEmbeddingRecommender):
    r"""PARec: item embeddings :math:`F_0 = M[s]`, then L pre-LN positional attention
    blocks,

    .. math::
        V_l = \mathrm{LN}(F_{l-1}) W_{V,l}, \quad
        \tilde F_l = F_{l-1} + \mathrm{Mask}(\mathrm{softmax}(R_l/\sqrt{d_h})) V_l, \quad
        F_l = \tilde F_l + \mathrm{FFN}(\mathrm{LN}(\tilde F_l))

    (eq. 5, 6, 8, with the residuals and dropout of section 3.1), a final
    :math:`\mathrm{LN}` (eq. 9), and scores :math:`\hat F_L M^\top` (eq. 10), trained with
    cross-entropy over all items at every position (eq. 11).

    NOTE:
        Choices where the paper is silent, and options for the official code's behaviour:

        * ``position_alignment: last`` by default: the most recent item is position n - 1
          (the official code right-aligns sequences), so :math:`R_l` learns patterns
          relative to the most recent item. ``first`` counts from the first item.
        * Multi-head: :math:`R_l \in \mathbb{R}^{h \times n \times n}`, scale
          :math:`1/\sqrt{d_h}` (the official code's; the paper writes :math:`\sqrt{d}`,
          the same for one head). No output projection after the attention (the paper's
          parameter count :math:`d^2 + n^2` has none); the value projection has a bias.
        * Dropout on the embeddings, on the attention weights (``attn_dropout_prob``) and
          on the outputs of the attention and FFN sublayers; the FFN is
          ``dense_2(ReLU(dense_1(.)))`` of width ``inner_size``.
        * ``add_position_embedding: True`` adds a learned position embedding to the
          input, as the official code always does (off by default: the paper has none).
          ``ffn_placement: after`` applies one FFN after all attention sublayers, as the
          official code does, instead of one per block (``block``, the paper's).
        * ``positional_pattern``: ``average``, ``linear`` or ``exponential``
          (``pattern_decay``) replaces the learned R by the fixed pattern of the paper's
          ablation (Table 4; the paper gives no formula: ours are in
          :func:`~recbole_attn.model.layers.positional.fixed_pattern`).
        * R is initialized from a normal with std 0.01 truncated at 2 std (the official
          code's truncated normal); Linear and embedding weights as RecBole's SASRec.
    """

    last_position_shortcut = True
    options = {
        "add_position_embedding": Flag(),
        "ffn_placement": OneOf(*FFN_PLACEMENTS),
        "positional_pattern": OneOf(*PATTERNS),
        "pattern_decay": Number("positive"),
    }
    #: FPARec sets the factorization rank key
    factorized = False

    def __init__(self, config, dataset):
        super().__init__(config, dataset)

        # load parameters info
        self.n_layers = config["n_layers"]
        self.n_heads = config["n_heads"]
        self.hidden_size = config["hidden_size"]
        self.inner_size = config["inner_size"]
        self.hidden_dropout_prob = config["hidden_dropout_prob"]
        self.attn_dropout_prob = config["attn_dropout_prob"]
        self.hidden_act = config["hidden_act"]
        self.layer_norm_eps = config["layer_norm_eps"]
        self.initializer_range = config["initializer_range"]
        self.add_position_embedding = bool(config["add_position_embedding"])
        self.ffn_placement = config["ffn_placement"]
        self.positional_pattern = config["positional_pattern"]
        self.pattern_decay = float(config["pattern_decay"])
        self.factor_k = int(config["factor_k"]) if self.factorized else None

        # define layers and loss
        self.item_embedding = nn.Embedding(
            self.n_items, self.hidden_size, padding_idx=0
        )
        self.position_embedding = None
        if self.add_position_embedding:
            self.position_embedding = nn.Embedding(
                self.max_seq_length, self.hidden_size
            )
        self.dropout = nn.Dropout(self.hidden_dropout_prob)
        self.trm_encoder = TransformerEncoder(
            TransformerLayer(
                MultiHeadSelfAttention(
                    PositionalScore(
                        self.n_heads,
                        self.max_seq_length,
                        self.hidden_size // self.n_heads,
                        factor_k=self.factor_k,
                        pattern=self.positional_pattern,
                        decay=self.pattern_decay,
                    ),
                    self.n_heads,
                    self.hidden_size,
                    self.hidden_dropout_prob,
                    self.attn_dropout_prob,
                    self.layer_norm_eps,
                    output_dense=False,
                    pre_ln=True,
                ),
                self._ffn() if self.ffn_placement == "block" else nn.Identity(),
            )
            for _ in range(self.n_layers)
        )
        self.feed_forward = self._ffn() if self.ffn_placement == "after" else None
        self.LayerNorm = nn.LayerNorm(self.hidden_size, eps=self.layer_norm_eps)

        # parameters initialization
        self.apply(self._init_weights)

    def _ffn(self):
        return FeedForward(
            self.hidden_size,
            self.inner_size,
            self.hidden_dropout_prob,
            self.hidden_act,
            self.layer_norm_eps,
            pre_ln=True,
        )

    def encode(self, context):
        hidden = self.item_embedding(context.item_seq)
        if self.position_embedding is not None:
            hidden = hidden + self.position_embedding(context.positions)
        hidden = self.trm_encoder(self.dropout(hidden), context)
        if self.feed_forward is not None:
            hidden = self.feed_forward(hidden)
        return self.LayerNorm(hidden)


class FPARec(PARec):
    r"""FPARec: PARec with the factorized positional attention of eq. 7,
    :math:`\mathrm{softmax}(R_{1,l} R_{2,l}^\top / \sqrt{d_h})` with
    :math:`R_{1,l}, R_{2,l} \in \mathbb{R}^{h \times n \times k}` (``factor_k``): 2kn
    parameters per head instead of :math:`n^2`.

    NOTE:
        PARec's notes apply. The factors are initialized with std
        :math:`\sqrt{0.01}/k^{1/4}` so that the product has std 0.01, as PARec's R (the
        official code's initialization).
    """

    factorized = True
    options = {"factor_k": Integer(1)}
    option_rules = (
        lambda c: (
            f"factor_k factorizes the learned R; positional_pattern "
            f"{c['positional_pattern']!r} is fixed: use PARec for fixed patterns"
            if c["positional_pattern"] != "learned"
            else None
        ),
    )
