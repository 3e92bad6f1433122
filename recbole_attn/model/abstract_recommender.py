"""
recbole_attn.model.abstract_recommender
#######################################

Shared training infrastructure of our sequential models (docs/models.md, "Training"):

* both training modes (``all_position``: a loss at every valid position of one sequence per
  user; ``last_position``: RecBole's one prefix per sample) through one code path;
* batch trimming: every batch is cut to its longest sequence (RecBole right-pads to
  ``MAX_ITEM_LIST_LENGTH``; with causal attention this is exact under both position
  alignments);
* position ids counted from the first item or from the most recent one
  (``position_alignment``);
* one uniform negative per position, drawn in one tensor operation among the items the user
  has not interacted with in the training sequence;
* sequence-level auxiliary loss terms that layers add while encoding;
* the last-position shortcut of prediction, where the model declares it exact;
* ``attention_weights``: the matrix every attention layer aggregated with.

A subclass implements :meth:`encode` (per-position outputs from a
:class:`~recbole_attn.model.layers.context.SequenceContext`), :meth:`position_loss`,
:meth:`score_items` and :meth:`score_all_items`; ``calculate_loss``, ``predict`` and
``full_sort_predict`` are provided here.
"""

import torch
import torch.nn.functional as F
from torch import nn
from recbole.model.abstract_recommender import SequentialRecommender
from recbole.utils import InputType

from recbole_attn.data.dataset import check_training_mode
from recbole_attn.errors import ConfigError
from recbole_attn.model.layers.attention import MultiHeadSelfAttention
from recbole_attn.model.layers.context import (
    SequenceContext,
    check_position_alignment,
    position_ids,
)
from recbole_attn.model.layers.transformer import (
    FeedForward,
    TransformerEncoder,
    TransformerLayer,
)

#: losses of :meth:`AttnSequentialRecommender.sampled_loss` (one sampled negative per
#: position) and CE (softmax over all items), the loss types our models share
SAMPLED_LOSS_TYPES = ("BCE", "BPR")
LOSS_TYPES = SAMPLED_LOSS_TYPES + ("CE",)


def check_loss_type(model_name, loss_type):
    """Raise a :class:`ConfigError` unless ``loss_type`` is one of :data:`LOSS_TYPES`;
    return whether it needs one sampled negative per position."""
    if loss_type not in LOSS_TYPES:
        raise ConfigError(
            f"{model_name} supports loss_type {list(LOSS_TYPES)} (BCE = the SASRec and "
            f"PAtt papers' loss), got {loss_type!r}"
        )
    return loss_type in SAMPLED_LOSS_TYPES


def map_output(fn, output):
    """Apply ``fn`` to a tensor or to every tensor of a tuple of tensors."""
    if isinstance(output, tuple):
        return tuple(fn(o) for o in output)
    return fn(output)


class AttnSequentialRecommender(SequentialRecommender):
    r"""Base class of recbole_attn's sequential recommenders.

    Config keys read here: ``training_mode`` (``all_position`` | ``last_position``),
    ``neg_exclude_seen`` (negatives avoid the items of the user's training sequence, as in
    the official code of STOSA and PAtt; False = plain uniform sampling), ``trim_batch``,
    ``position_alignment`` (``first`` | ``last``).
    """

    input_type = InputType.POINTWISE
    #: whether :meth:`position_loss` needs one sampled negative per position
    needs_negatives = False
    #: whether prediction may compute only the last position in the last layer: set it
    #: where that is exact (no step of the model mixes the query rows of a layer)
    last_position_shortcut = False

    def __init__(self, config, dataset):
        super().__init__(config, dataset)

        # load parameters info
        self.training_mode = check_training_mode(config)
        self.trim_batch = bool(config["trim_batch"])
        self.neg_exclude_seen = bool(config["neg_exclude_seen"])
        self.position_alignment = check_position_alignment(config["position_alignment"])

    # ------------------------------------------------------------------ to implement
    def encode(self, context):
        """Outputs ``[B, L, ...]`` (a tensor or a tuple of tensors) of the sequences of
        ``context``, or ``[B, 1, ...]`` at ``context.query_index`` when it is set."""
        raise NotImplementedError

    def position_loss(self, output, pos_items, neg_items):
        """Loss from outputs gathered at N training positions ``[N, ...]`` and their
        targets ``pos_items [N]`` (and ``neg_items [N]`` when :attr:`needs_negatives`).
        Returns a scalar or a tuple of scalars (RecBole sums and logs them)."""
        raise NotImplementedError

    def score_items(self, output, items):
        """Scores ``[B]`` of ``items [B]`` from last-position outputs ``[B, ...]``."""
        raise NotImplementedError

    def score_all_items(self, output):
        """Scores ``[B, n_items]`` of every item; larger is better."""
        raise NotImplementedError

    # ------------------------------------------------------------------ shared
    def _init_weights(self, module):
        """RecBole's SASRec initialization: N(0, initializer_range) for linear and
        embedding weights, zero biases, unit LayerNorm."""
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(mean=0.0, std=self.initializer_range)
        elif isinstance(module, nn.LayerNorm):
            module.bias.data.zero_()
            module.weight.data.fill_(1.0)
        if isinstance(module, nn.Linear) and module.bias is not None:
            module.bias.data.zero_()

    @staticmethod
    def sampled_loss(pos_score, neg_score, loss_type):
        """Loss of one positive and one sampled negative score per position: ``BCE``
        (:math:`-\log\sigma(s^+) - \log(1-\sigma(s^-))`, the SASRec and PAtt papers') or
        ``BPR`` (:math:`-\log\sigma(s^+ - s^-)`), averaged over positions."""
        if loss_type == "BPR":
            return F.softplus(neg_score - pos_score).mean()
        if loss_type == "BCE":
            return (F.softplus(-pos_score) + F.softplus(neg_score)).mean()
        raise ConfigError(
            f"sampled_loss: loss_type must be BCE or BPR, got {loss_type!r}"
        )

    def trim(self, item_seq, item_seq_len):
        """Cut a right-padded batch to its longest sequence (unless ``trim_batch: False``,
        which exists to measure what trimming saves; results are identical)."""
        if not self.trim_batch:
            return item_seq
        max_len = int(item_seq_len.max()) if item_seq_len.numel() else 1
        return item_seq[:, : max(max_len, 1)]

    def training_targets(self, item_seq, item_seq_len, pos_items):
        """Targets ``[B, L]`` and the mask of positions that carry a loss.

        all_position: the target of position t is the item at t+1 and, at the last valid
        position, the sample's target item. last_position: only the last valid position.
        """
        batch, length = item_seq.shape
        last = (item_seq_len - 1).clamp(min=0)
        rows = torch.arange(batch, device=item_seq.device)
        if self.training_mode == "all_position":
            targets = torch.zeros_like(item_seq)
            targets[:, :-1] = item_seq[:, 1:]
            targets[rows, last] = pos_items
            positions = torch.arange(length, device=item_seq.device)
            mask = positions.unsqueeze(0) < item_seq_len.unsqueeze(1)
            targets = targets * mask
        else:
            targets = torch.zeros_like(item_seq)
            targets[rows, last] = pos_items
            mask = torch.zeros_like(item_seq, dtype=torch.bool)
            mask[rows, last] = True
        return targets, mask

    def sample_negatives(self, item_seq, targets):
        """One negative item per position ``[B, L]``, uniform over ``[1, n_items)``.

        With ``neg_exclude_seen`` (default) the draw is uniform over the items that are NOT
        in the user's training sequence (inputs and targets), exactly, in one multinomial
        draw per batch (a ``[B, n_items]`` weight matrix); a user who has seen every item
        falls back to all items.
        """
        batch, length = targets.shape
        if not self.neg_exclude_seen:
            return torch.randint(
                1, self.n_items, (batch, length), device=targets.device
            )
        weights = torch.ones(batch, self.n_items, device=targets.device)
        weights.scatter_(1, item_seq, 0.0)
        weights.scatter_(1, targets, 0.0)
        weights[:, 0] = 0.0
        exhausted = weights.sum(1) == 0
        if bool(exhausted.any()):
            weights[exhausted, 1:] = 1.0
        return torch.multinomial(weights, length, replacement=True)

    def sequence_context(self, interaction, last_position=False, record=False):
        """The :class:`SequenceContext` of a batch: trimmed sequences, position ids, user
        ids; with ``last_position`` (and :attr:`last_position_shortcut`), the last layer
        computes only the last valid position; ``record`` keeps the attention matrices.
        """
        item_seq_len = interaction[self.ITEM_SEQ_LEN]
        item_seq = self.trim(interaction[self.ITEM_SEQ], item_seq_len)
        shortcut = last_position and self.last_position_shortcut
        return SequenceContext(
            item_seq=item_seq,
            item_seq_len=item_seq_len,
            positions=position_ids(
                item_seq_len,
                item_seq.size(1),
                self.max_seq_length,
                self.position_alignment,
            ),
            max_length=self.max_seq_length,
            alignment=self.position_alignment,
            user=interaction[self.USER_ID] if self.USER_ID in interaction else None,
            query_index=item_seq_len - 1 if shortcut else None,
            record=record,
        )

    def calculate_loss(self, interaction):
        context = self.sequence_context(interaction)
        targets, mask = self.training_targets(
            context.item_seq, context.item_seq_len, interaction[self.POS_ITEM_ID]
        )
        output = map_output(lambda o: o[mask], self.encode(context))
        neg_items = None
        if self.needs_negatives:
            neg_items = self.sample_negatives(context.item_seq, targets)[mask]
        loss = self.position_loss(output, targets[mask], neg_items)
        if not context.aux_losses:
            return loss
        return (loss if isinstance(loss, tuple) else (loss,)) + tuple(
            context.aux_losses
        )

    def last_output(self, interaction):
        """Outputs ``[B, ...]`` at the last valid position of every sequence."""
        context = self.sequence_context(interaction, last_position=True)
        output = self.encode(context)
        if context.query_index is not None:
            return map_output(lambda o: o.squeeze(1), output)
        return map_output(
            lambda o: self.gather_indexes(o, context.item_seq_len - 1), output
        )

    def predict(self, interaction):
        """Scores of ``interaction[ITEM_ID]``. RecBole's sampled evaluation (``uni100``,
        ``pop100``) repeats every sequence once per candidate item: each distinct (user,
        sequence) is encoded once and its output reused for all its candidates."""
        fields = [self.ITEM_SEQ, self.ITEM_SEQ_LEN]
        if self.USER_ID in interaction:
            fields.append(self.USER_ID)
        key = torch.cat(
            [interaction[self.ITEM_SEQ]]
            + [interaction[f].unsqueeze(1) for f in fields[1:]],
            dim=1,
        )
        unique, inverse = torch.unique(key, dim=0, return_inverse=True)
        if len(unique) == len(key):
            output = self.last_output(interaction)
        else:
            rows = torch.arange(len(key), device=key.device)
            first = torch.full((len(unique),), len(key), device=key.device)
            first = first.scatter_reduce(0, inverse, rows, reduce="amin")
            output = self.last_output({f: interaction[f][first] for f in fields})
            output = map_output(lambda o: o[inverse], output)
        return self.score_items(output, interaction[self.ITEM_ID])

    def full_sort_predict(self, interaction):
        return self.score_all_items(self.last_output(interaction))

    @torch.no_grad()
    def attention_weights(self, interaction, refined=True):
        """Per attention layer, the ``[B, h, L, L]`` matrix its aggregation used (after
        any refinement, before dropout), for the sequences of ``interaction`` (trimmed
        to the longest). ``refined=False``: the normalized matrices before refinement
        (models with a refiner only). Runs in the model's current mode (call ``eval()``
        for the evaluation-time matrices of stochastic models)."""
        context = self.sequence_context(interaction, record=True)
        self.encode(context)
        if refined:
            return context.attention
        if not context.unrefined:
            raise ValueError(f"{type(self).__name__} has no attention refiner")
        return context.unrefined


class ItemEmbeddingRecommender(AttnSequentialRecommender):
    r"""A sequential recommender whose prediction layer is SASRec's: the score of item j
    is the dot product of the sequence representation with row j of ``item_embedding``.

    Trained with ``loss_type`` ``CE`` (softmax over all items), ``BPR`` or ``BCE`` (one
    sampled negative per position; BCE is the SASRec paper's loss). A subclass creates
    ``item_embedding`` (and, for :meth:`embed_sequence`, ``position_embedding``,
    ``LayerNorm`` and ``dropout``) and sets ``loss_type``, then calls
    :meth:`check_loss_type`.
    """

    def check_loss_type(self):
        self.needs_negatives = check_loss_type(type(self).__name__, self.loss_type)

    def transformer_encoder(self, make_score, make_refiner=None, **attention_options):
        """SASRec's stack of ``n_layers`` blocks: the shared attention with the score module
        ``make_score()`` (and the refiner ``make_refiner()``) of every layer, then RecBole's
        post-LN feed-forward sublayer; sizes from the model's ``n_heads``,
        ``hidden_size``, ``inner_size``, dropouts, ``hidden_act`` and ``layer_norm_eps``.
        """
        return TransformerEncoder(
            TransformerLayer(
                MultiHeadSelfAttention(
                    make_score(),
                    self.n_heads,
                    self.hidden_size,
                    self.hidden_dropout_prob,
                    self.attn_dropout_prob,
                    self.layer_norm_eps,
                    refiner=make_refiner() if make_refiner else None,
                    **attention_options,
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

    def embed_sequence(self, context):
        """SASRec's input layer: ``Dropout(LN(E[s] + P[pos]))``."""
        hidden = self.item_embedding(context.item_seq) + self.position_embedding(
            context.positions
        )
        return self.dropout(self.LayerNorm(hidden))

    def position_loss(self, output, pos_items, neg_items):
        if not self.needs_negatives:
            logits = output @ self.item_embedding.weight.transpose(0, 1)
            return F.cross_entropy(logits, pos_items)
        pos_score = self.score_items(output, pos_items)
        neg_score = self.score_items(output, neg_items)
        return self.sampled_loss(pos_score, neg_score, self.loss_type)

    def score_items(self, output, items):
        return (output * self.item_embedding(items)).sum(-1)

    def score_all_items(self, output):
        return output @ self.item_embedding.weight.transpose(0, 1)
