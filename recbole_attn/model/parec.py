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
from recbole_attn.options import Default, Opt

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
    yaml_header = """PARec ("Positional Attention for Sequential Recommendation"): pre-LN blocks whose
attention is a learned matrix R_l over (query, key) positions, no query/key projection.
Paper settings: 2 blocks, full cross-entropy over all items at every position, T in
{50, 100, 200} for the Amazon data (official scripts: d 50, 1 head, dropout 0.5)."""
    options = {
        "positional_pattern": Opt(
            "learned",
            OneOf(*PATTERNS),
            "learned R; average, linear, exponential: the fixed patterns of the "
            "paper's ablation (Table 4)",
        ),
        "pattern_decay": Opt(
            0.5,
            Number("positive"),
            "gamma of the exponential pattern, w = gamma^(t - s)",
        ),
        "add_position_embedding": Opt(
            False,
            Flag(),
            "add a learned position embedding to the input (the paper has none)",
            research="the official code always adds one",
        ),
        "ffn_placement": Opt(
            "block",
            OneOf(*FFN_PLACEMENTS),
            "block: an FFN in every block (the paper); after: one FFN after all blocks",
            research="after is the official code's",
        ),
    }
    defaults = {
        "n_heads": 1,
        "inner_size": Default(64, "official code: d"),
        "hidden_act": Default("relu", "eq. 8: ReLU"),
        "layer_norm_eps": 1e-8,
        "loss_type": Default("CE", "eq. 11: cross-entropy over all items"),
        "MAX_ITEM_LIST_LENGTH": 50,
        "position_alignment": Default(
            "last", "R relative to the most recent item (official: right-aligned)"
        ),
        "training_mode": "all_position",
        "valid_metric": "NDCG@10",
    }
    #: the rank of a factorized R (FPARec's ``factor_k``); None: R is learned whole
    factor_k = None

    def __init__(self, config, dataset):
        super().__init__(config, dataset)

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
        hidden = self.item_embedding(context.item_seq)  # [B, L, d]: F_0 = M[s]
        if self.position_embedding is not None:
            hidden = hidden + self.position_embedding(context.positions)
        hidden = self.trm_encoder(self.dropout(hidden), context)  # [B, L, d]: F_L
        if self.feed_forward is not None:
            hidden = self.feed_forward(hidden)
        return self.LayerNorm(hidden)  # eq. 9


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
