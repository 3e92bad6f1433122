r"""
RKSA
################################################

Reference:
    Mingi Ji, Weonyoung Joo, Kyungwoo Song, Yoon-Yeong Kim and Il-Chul Moon. "Sequential
    Recommendation with Relation-Aware Kernelized Self-Attention." in AAAI 2020.

No public code exists; the paper is the spec (docs/models.md, "RKSA").

A SASRec backbone whose attention logits are a multivariate skew-normal latent variable
with a kernelized correlation over co-occurrence, item and user relations: the score
module :class:`~recbole_attn.model.layers.skew_normal.SkewNormalScore`.
"""

from torch import nn

from recbole_attn.config_check import Number, OneOf, Subset
from recbole_attn.data.cooccurrence import CooccurrenceTable
from recbole_attn.model.item_embedding import ItemEmbeddingRecommender
from recbole_attn.options import Default, Opt
from recbole_attn.model.layers.skew_normal import (
    COUNTS,
    ITEM_KERNELS,
    KERNELS,
    LOCATION_ACTIVATIONS,
    OCCURRENCES,
    USER_EMBEDDING,
    SkewNormalScore,
)


class RKSA(ItemEmbeddingRecommender):
    r"""RKSA: SASRec's embedding (item + position, LN, dropout), blocks and prediction
    layer, a user embedding, and attention :math:`\mathrm{softmax}(z) V` with
    :math:`z \sim \mathrm{MSN}(\xi, \omega, \psi, \alpha)` (eq. 5-13). Loss: BCE with one
    sampled negative per position (eq. 12, as SASRec) plus :math:`\lambda_r`
    (``rksa_rank_weight``) times the listwise co-occurrence loss, averaged over layers.

    NOTE:
        Decisions where the paper is silent or ambiguous:

        * ω and α are defined per query row t (the paper uses the last item :math:`x_n`
          only), so that every position trains and position t reads no later item; the
          shape ratio :math:`\hat\alpha` of row t sums over the prefix :math:`k \le t`.
        * One :math:`y_0` and one :math:`y \sim N(0, \psi)` per sequence and head, shared
          by the query rows; :math:`\psi` is shared by the heads of a layer.
        * Evaluation uses :math:`E[z] = \xi + \omega\delta\sqrt{2/\pi}` (deterministic).
        * :math:`\psi`: the user kernel is normalized to unit diagonal (the cosine of
          :math:`W_s u \odot \hat x_i` and :math:`W_s u \odot \hat x_j`; the paper's
          product has a diagonal :math:`\ne 1`), so every kernel and their mix is a
          correlation matrix. The Cholesky factor is taken of
          :math:`(\psi + \epsilon I)/(1 + \epsilon)` (``rksa_jitter``), positive
          definite for repeated items and rank-deficient kernels, with unit diagonal.
        * Co-occurrence counts come from the training histories only (validation and test
          interactions are never counted); the counting kernel of an item never seen in
          training is 0 off the diagonal.
        * The listwise (ListNet) loss compares, for every query row, the softmax of
          :math:`\psi` over its causal keys with the softmax of the counting kernel there.
        * The paper's protocol ranks 100 sampled negatives (``eval_args.mode: uni100``);
          RecBole's full ranking is the default here, the same for every model.
    """

    last_position_shortcut = True
    yaml_header = """RKSA (Ji et al., AAAI 2020): SASRec with skew-normal latent attention logits whose
correlation is a user-weighted mix of co-occurrence, item and user kernels. Paper
settings: 2 blocks, 1 head, d 64, dropout 0.5, batch 128, lr 1e-3, T 50, lambda_r 1e-3,
BCE with one negative per position; evaluation on 100 sampled negatives (uni100)."""
    options = {
        "kernels": Opt(
            ["count", "item", "user"],
            Subset(*KERNELS),
            "the kernels mixed into psi (Table 3 ablation: any non-empty subset)",
        ),
        "item_kernel": Opt(
            "linear", OneOf(*ITEM_KERNELS), "on unit-norm representations"
        ),
        "location_activation": Opt("none", OneOf(*LOCATION_ACTIVATIONS), "f of eq. 7"),
        "rksa_jitter": Opt(
            0.001,
            Number("positive"),
            "epsilon of the Cholesky of (psi + eps I) / (1 + eps)",
        ),
        "rksa_rank_weight": Opt(
            0.001, Number(), "lambda_r of the listwise co-occurrence loss"
        ),
    }
    defaults = {
        "n_heads": 1,
        "inner_size": Default(64, "SASRec paper: d"),
        "hidden_act": Default("relu", "point-wise FFN with ReLU (paper)"),
        "layer_norm_eps": 1e-8,
        "loss_type": Default("BCE", "eq. 12: one sampled negative per position"),
        "train_batch_size": 128,
        "MAX_ITEM_LIST_LENGTH": 50,
        "training_mode": "all_position",
        "valid_metric": "NDCG@10",
    }

    def __init__(self, config, dataset):
        super(RKSA, self).__init__(config, dataset)

        # define layers and loss
        self.n_users = dataset.num(self.USER_ID)
        self.item_embedding = nn.Embedding(
            self.n_items, self.hidden_size, padding_idx=0
        )
        self.position_embedding = nn.Embedding(self.max_seq_length, self.hidden_size)
        self.user_embedding = nn.Embedding(self.n_users, self.hidden_size)
        self.cooccurrence = CooccurrenceTable.from_dataset(dataset)
        self.trm_encoder = self.transformer_encoder(
            lambda: SkewNormalScore(
                self.hidden_size,
                self.n_heads,
                kernels=self.kernels,
                item_kernel=self.item_kernel,
                location_activation=self.location_activation,
                jitter=self.rksa_jitter,
                loss_weight=self.rksa_rank_weight / self.n_layers,
            )
        )
        self.LayerNorm = nn.LayerNorm(self.hidden_size, eps=self.layer_norm_eps)
        self.dropout = nn.Dropout(self.hidden_dropout_prob)

        # parameters initialization
        self.apply(self._init_weights)

    def encode(self, context):
        item_seq = context.item_seq  # [B, L]
        # [B, L, L]: training co-occurrence counts of every pair (the counting kernel)
        context.features[COUNTS] = self.cooccurrence.block(item_seq)
        # [B, L]: each item's number of training users (the counting kernel's normalizer)
        context.features[OCCURRENCES] = self.cooccurrence.occurrences(item_seq)
        # [B, d]: the user embedding, which weighs the kernels mixed into psi
        context.features[USER_EMBEDDING] = self.user_embedding(context.user)
        return self.trm_encoder(self.embed_sequence(context), context)
