r"""
AWRSR
################################################

Reference:
    Yuli Liu, Min Liu and Xiaojing Liu. "Pay Attention to Attention for Sequential
    Recommendation." in RecSys 2024.

AWRSR refines the attention matrix A of every attention layer of a backbone (SASRec or
STOSA): its rows, read as representations of the query items, are mixed with learnable
:math:`n \times n` matrices (n = ``MAX_ITEM_LIST_LENGTH``) into logits B, and the values
are aggregated with the masked :math:`\mathrm{softmax}(B)`. B is re-masked before its
softmax, so the output at position k reads no item after k.
"""

import math

import torch
from torch import nn

from recbole.model.abstract_recommender import SequentialRecommender
from recbole.model.layers import FeedForward, MultiHeadAttention
from recbole.model.loss import BPRLoss
from recbole_attn.model.stosa import (
    POSITION_ALIGNMENTS,
    STOSA,
    FeedForward as STOSAFeedForward,
    WassersteinAttention,
    elu_plus_one,
    merge_heads,
    pairwise_wasserstein2_squared,
    position_ids,
    split_heads,
)


class AttentionWeightRefiner(nn.Module):
    """Base of the refiners: the :math:`n \\times n` matrices (``names``), initialized as
    the identity plus N(0, ``init_std``) noise, so that the refinement starts from the
    correlations of the attention rows themselves (at W = 0 the bilinear forms would sit
    at a saddle point with vanishing gradients). ``alignment``: the backbone's
    ``position_alignment`` (``first``: every sequence has the same position ids)."""

    names = ()

    def __init__(self, max_length, head_size, init_std=0.02, alignment="first"):
        super().__init__()
        self.scale = math.sqrt(head_size)
        self.same_positions = alignment == "first"
        eye = torch.eye(max_length)
        for name in self.names:
            noise = torch.randn(max_length, max_length) * init_std
            setattr(self, name, nn.Parameter(eye + noise))

    def rows(self, weight, positions):
        """The rows of ``weight`` at the key positions: ``[L, n]`` or ``[B, 1, L, n]``."""
        if self.same_positions:
            return weight[positions[0]]
        return weight[positions].unsqueeze(1)

    def block(self, weight, positions):
        """``weight`` at the positions on both axes: ``[L, L]`` or ``[B, 1, L, L]``."""
        if self.same_positions:
            return weight[positions[0].unsqueeze(-1), positions[0]]
        return weight[positions.unsqueeze(-1), positions.unsqueeze(-2)].unsqueeze(1)

    def refine(self, probs, mask, positions):
        """The refined matrix B (logits), ``[B, h, L, L]``."""
        raise NotImplementedError

    def forward(self, probs, mask, positions):
        return torch.softmax(self.refine(probs, mask, positions) + mask, dim=-1)


class SimpleRefiner(AttentionWeightRefiner):
    r""":math:`M_{simp}` (eq. 2): :math:`B_{kt} = (A_{k:} W^{RQ}) \cdot (A_{t:} W^{RK})
    / \sqrt{d_h}`."""

    names = ("W_RQ", "W_RK")

    def refine(self, probs, mask, positions):
        query = probs @ self.rows(self.W_RQ, positions)
        key = probs @ self.rows(self.W_RK, positions)
        return query @ key.transpose(-1, -2) / self.scale


class AdditiveRefiner(AttentionWeightRefiner):
    r""":math:`M_{add}` (eq. 4): :math:`B_{kt} = ((A_{k:} W^{RK}) \cdot (A_{t:} W^{RQ})
    / \sqrt{d_h} + A_{kt}) / 2`."""

    names = ("W_RQ", "W_RK")

    def refine(self, probs, mask, positions):
        left = probs @ self.rows(self.W_RK, positions)
        right = probs @ self.rows(self.W_RQ, positions)
        return (left @ right.transpose(-1, -2) / self.scale + probs) / 2.0


class ValueRefiner(AttentionWeightRefiner):
    r""":math:`M_{value}` (eq. 3), in the row convention of eq. 2 and 4:
    :math:`B = \mathrm{softmax}_{causal}((A W^{RQ})(A W^{RK})^\top / \sqrt{d_h})
    \, (A W^{RV})`: the weights of :math:`M_{simp}` applied to the values
    :math:`A W^{RV}`, whose columns are key positions."""

    names = ("W_RQ", "W_RK", "W_RV")

    def refine(self, probs, mask, positions):
        query = probs @ self.rows(self.W_RQ, positions)
        key = probs @ self.rows(self.W_RK, positions)
        weights = torch.softmax(
            query @ key.transpose(-1, -2) / self.scale + mask, dim=-1
        )
        return weights @ (probs @ self.block(self.W_RV, positions))


class StochasticRefiner(AttentionWeightRefiner):
    r""":math:`M_{stoc}` (STOSA backbones): row k of A becomes a Gaussian
    :math:`\mathcal{N}(A_{k:} W_\mu^{R}, \mathrm{diag}(\mathrm{ELU}(A_{k:} W_\Sigma^{R})
    + 1))` and :math:`B_{kt} = -W_2^2(\mathcal{N}_k, \mathcal{N}_t) / \sqrt{d_h}`, STOSA's
    own score between the rows."""

    names = ("W_mu", "W_sigma")

    def refine(self, probs, mask, positions):
        mean = probs @ self.rows(self.W_mu, positions)
        cov = elu_plus_one(probs @ self.rows(self.W_sigma, positions))
        return -pairwise_wasserstein2_squared(mean, cov, mean, cov) / self.scale


REFINERS = {
    "simp": SimpleRefiner,
    "value": ValueRefiner,
    "add": AdditiveRefiner,
    "stoc": StochasticRefiner,
}


class RefinedMultiHeadAttention(MultiHeadAttention):
    """RecBole's multi-head attention with a refiner between the normalized (causal,
    padding-masked) weights and the aggregation."""

    def __init__(self, refiner, *args):
        super().__init__(*args)
        self.refiner = refiner

    def forward(self, input_tensor, attention_mask, positions):
        query = self.transpose_for_scores(self.query(input_tensor)).permute(0, 2, 1, 3)
        key = self.transpose_for_scores(self.key(input_tensor)).permute(0, 2, 3, 1)
        value = self.transpose_for_scores(self.value(input_tensor)).permute(0, 2, 1, 3)
        scores = torch.matmul(query, key) / self.sqrt_attention_head_size
        probs = self.refiner(
            torch.softmax(scores + attention_mask, dim=-1), attention_mask, positions
        )
        context = torch.matmul(self.attn_dropout(probs), value)
        context = context.permute(0, 2, 1, 3).reshape(input_tensor.shape)
        hidden = input_tensor + self.out_dropout(self.dense(context))
        return self.LayerNorm(hidden)


class RefinedLayer(nn.Module):
    def __init__(self, attention, feed_forward):
        super().__init__()
        self.multi_head_attention = attention
        self.feed_forward = feed_forward

    def forward(self, hidden, attention_mask, positions):
        hidden = self.multi_head_attention(hidden, attention_mask, positions)
        return self.feed_forward(hidden)


class RefinedEncoder(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.layer = nn.ModuleList(layers)

    def forward(self, hidden, attention_mask, positions):
        for layer in self.layer:
            hidden = layer(hidden, attention_mask, positions)
        return hidden


class RefinedSASRec(SequentialRecommender):
    """SASRec (RecBole's layers, sizes, initialization and losses) with a refiner in every
    attention layer: AWRSR's SASRec backbone."""

    def __init__(self, config, dataset, make_refiner):
        super(RefinedSASRec, self).__init__(config, dataset)

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
        self.position_alignment = config["position_alignment"]
        self.loss_type = config["loss_type"]
        if self.position_alignment not in POSITION_ALIGNMENTS:
            raise ValueError("Make sure 'position_alignment' in ['first', 'last']!")

        # define layers and loss
        self.item_embedding = nn.Embedding(
            self.n_items, self.hidden_size, padding_idx=0
        )
        self.position_embedding = nn.Embedding(self.max_seq_length, self.hidden_size)
        self.trm_encoder = RefinedEncoder(
            RefinedLayer(
                RefinedMultiHeadAttention(
                    make_refiner(),
                    self.n_heads,
                    self.hidden_size,
                    self.hidden_dropout_prob,
                    self.attn_dropout_prob,
                    self.layer_norm_eps,
                ),
                FeedForward(
                    self.hidden_size,
                    self.inner_size,
                    self.hidden_dropout_prob,
                    self.hidden_act,
                    self.layer_norm_eps,
                ),
            )
            for _ in range(self.n_layers)
        )
        self.LayerNorm = nn.LayerNorm(self.hidden_size, eps=self.layer_norm_eps)
        self.dropout = nn.Dropout(self.hidden_dropout_prob)
        if self.loss_type == "BPR":
            self.loss_fct = BPRLoss()
        elif self.loss_type == "CE":
            self.loss_fct = nn.CrossEntropyLoss()
        else:
            raise NotImplementedError("Make sure 'loss_type' in ['BPR', 'CE']!")

        # parameters initialization
        self.apply(self._init_weights)

    def _init_weights(self, module):
        """RecBole's SASRec initialization."""
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(mean=0.0, std=self.initializer_range)
        elif isinstance(module, nn.LayerNorm):
            module.bias.data.zero_()
            module.weight.data.fill_(1.0)
        if isinstance(module, nn.Linear) and module.bias is not None:
            module.bias.data.zero_()

    def position_ids(self, item_seq_len, length):
        return position_ids(
            item_seq_len, length, self.max_seq_length, self.position_alignment
        )

    def encode(self, item_seq, item_seq_len):
        """Outputs ``[B, L, d]`` at every position."""
        positions = self.position_ids(item_seq_len, item_seq.size(1))
        hidden = self.item_embedding(item_seq) + self.position_embedding(positions)
        hidden = self.dropout(self.LayerNorm(hidden))
        attention_mask = self.get_attention_mask(item_seq)  # [B, 1, L, L]
        return self.trm_encoder(hidden, attention_mask, positions)

    def forward(self, item_seq, item_seq_len):
        output = self.encode(item_seq, item_seq_len)
        return self.gather_indexes(output, item_seq_len - 1)  # [B, d]

    def item_scores(self, output, items):
        """Dot products of ``output`` ``[N, d]`` with ``items`` ``[N]``."""
        return (output * self.item_embedding(items)).sum(-1)

    def all_item_scores(self, output):
        return output @ self.item_embedding.weight.transpose(0, 1)

    def calculate_loss(self, interaction):
        output = self.forward(
            interaction[self.ITEM_SEQ], interaction[self.ITEM_SEQ_LEN]
        )
        pos_items = interaction[self.POS_ITEM_ID]
        if self.loss_type == "CE":
            return self.loss_fct(self.all_item_scores(output), pos_items)
        neg_items = interaction[self.NEG_ITEM_ID]
        return self.loss_fct(
            self.item_scores(output, pos_items), self.item_scores(output, neg_items)
        )


class RefinedWassersteinAttention(WassersteinAttention):
    """STOSA's Wasserstein attention with a refiner between the normalized weights and
    the aggregation of the covariances."""

    def __init__(self, refiner, *args):
        super().__init__(*args)
        self.refiner = refiner

    def forward(self, mean, cov, attention_mask, positions):
        probs = self.attention_probs(mean, cov, mean, cov, attention_mask)
        probs = self.attn_dropout(self.refiner(probs, attention_mask, positions))
        value = elu_plus_one(split_heads(self.value(cov), self.n_heads))
        hidden = self.dense(merge_heads((probs * probs) @ value))
        return self.LayerNorm(cov + self.out_dropout(hidden))


class RefinedSTOSALayer(nn.Module):
    """STOSA's layer with :class:`RefinedWassersteinAttention`."""

    def __init__(self, refiner, n_heads, hidden_size, inner_size, *rates):
        super().__init__()
        hidden_dropout_prob, attn_dropout_prob, layer_norm_eps = rates
        self.multi_head_attention = RefinedWassersteinAttention(
            refiner,
            n_heads,
            hidden_size,
            hidden_dropout_prob,
            attn_dropout_prob,
            layer_norm_eps,
        )
        self.feed_forward = STOSAFeedForward(
            hidden_size, inner_size, hidden_dropout_prob, layer_norm_eps
        )

    def forward(self, mean, cov, attention_mask, positions):
        cov = self.multi_head_attention(mean, cov, attention_mask, positions)
        return mean, elu_plus_one(self.feed_forward(cov))


class RefinedSTOSA(STOSA):
    """STOSA with a refiner in every attention layer: AWRSR's STOSA backbone. The
    refiner reads every query row, so the last layer computes them all."""

    def __init__(self, config, dataset, make_refiner):
        self.make_refiner = make_refiner
        super(RefinedSTOSA, self).__init__(config, dataset)

    def make_layer(self):
        return RefinedSTOSALayer(
            self.make_refiner(),
            self.n_heads,
            self.hidden_size,
            self.inner_size,
            self.hidden_dropout_prob,
            self.attn_dropout_prob,
            self.layer_norm_eps,
        )

    def encode(self, item_seq, item_seq_len):
        """Sequence Gaussians ``(mean, cov)`` ``[B, L, d]`` at every position."""
        positions = self.position_ids(item_seq_len, item_seq.size(1))
        mean, cov = self.input_gaussians(item_seq, positions)
        attention_mask = self.get_attention_mask(item_seq)  # [B, 1, L, L]
        for layer in self.trm_encoder.layer:
            mean, cov = layer(mean, cov, attention_mask, positions=positions)
        return mean, cov

    def forward(self, item_seq, item_seq_len):
        mean, cov = self.encode(item_seq, item_seq_len)
        last = item_seq_len - 1
        return self.gather_indexes(mean, last), self.gather_indexes(cov, last)


#: backbone name -> model class (each takes a refiner factory)
BACKBONES = {"SASRec": RefinedSASRec, "STOSA": RefinedSTOSA}


class AWRSR(SequentialRecommender):
    r"""Attention-weight refinement on a SASRec or STOSA backbone (``backbone``), with
    ``refinement`` ``simp`` (eq. 2), ``value`` (eq. 3), ``add`` (eq. 4) or ``stoc``
    (STOSA only). :attr:`backbone` is the backbone model itself, built with a refiner in
    every attention layer: embedding, loss and prediction are the backbone's.

    NOTE:
        Decisions where the paper is ambiguous:

        * The refiners read the post-softmax, causally masked A; B is re-masked
          (causal and padding) before its softmax; STOSA aggregates its covariances
          with :math:`\mathrm{softmax}(B) \circ \mathrm{softmax}(B)`.
        * :math:`M_{simp}`, :math:`M_{add}`: the inner product of the two rows (the
          paper prints an outer product; :math:`B_{kt}` is a scalar), scaled by
          :math:`\sqrt{d_h}`.
        * :math:`M_{value}`: in the row convention of eq. 2 and 4 with a causally masked
          inner softmax (multiplied from the left, it would mix future rows).
        * :math:`M_{stoc}`: :math:`B = -W_2^2/\sqrt{d_h}` between the row Gaussians.
        * One set of matrices per layer, shared by its heads, initialized as the
          identity plus N(0, ``initializer_range``) noise (at zero the bilinear forms
          start at a saddle point).
    """

    #: backbone name -> model class
    backbones = BACKBONES

    def __init__(self, config, dataset):
        super(AWRSR, self).__init__(config, dataset)

        # load parameters info: the backbone's sizes (a refiner works on one head)
        self.refinement = config["refinement"]
        head_size = config["hidden_size"] // config["n_heads"]
        if config["backbone"] not in self.backbones:
            raise ValueError("Make sure 'backbone' in ['SASRec', 'STOSA']!")
        if self.refinement not in REFINERS:
            raise ValueError(
                "Make sure 'refinement' in ['simp', 'value', 'add', 'stoc']!"
            )
        if self.refinement == "stoc" and config["backbone"] != "STOSA":
            raise ValueError("refinement 'stoc' needs backbone: STOSA")

        def make_refiner():
            return REFINERS[self.refinement](
                self.max_seq_length,
                head_size,
                config["initializer_range"],
                config["position_alignment"],
            )

        # define layers and loss: the backbone, with a refiner in every attention layer
        self.backbone = self.backbones[config["backbone"]](
            config, dataset, make_refiner
        )

    def encode(self, item_seq, item_seq_len):
        return self.backbone.encode(item_seq, item_seq_len)

    def forward(self, item_seq, item_seq_len):
        return self.backbone.forward(item_seq, item_seq_len)

    def item_scores(self, output, items):
        return self.backbone.item_scores(output, items)

    def all_item_scores(self, output):
        return self.backbone.all_item_scores(output)

    def calculate_loss(self, interaction):
        return self.backbone.calculate_loss(interaction)

    def predict(self, interaction):
        output = self.forward(
            interaction[self.ITEM_SEQ], interaction[self.ITEM_SEQ_LEN]
        )
        return self.item_scores(output, interaction[self.ITEM_ID])

    def full_sort_predict(self, interaction):
        output = self.forward(
            interaction[self.ITEM_SEQ], interaction[self.ITEM_SEQ_LEN]
        )
        return self.all_item_scores(output)
