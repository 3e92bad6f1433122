"""
recbole_attn.model.abstract_recommender
#######################################

Shared training infrastructure of our sequential models (docs/models.md, "Training"):

* both training modes (``all_position``: a loss at every valid position of one sequence per
  user; ``last_position``: RecBole's one prefix per sample) through one code path;
* batch trimming: every batch is cut to its longest sequence (RecBole right-pads to
  ``MAX_ITEM_LIST_LENGTH``; with causal attention this is exact under both position
  alignments);
* length grouping: a batch is split into a few groups of similar lengths, each trimmed to
  its own longest sequence, with the losses combined so that the loss and its gradients
  are the ungrouped batch's (training and evaluation);
* position ids counted from the first item or from the most recent one
  (``position_alignment``);
* one uniform negative per position, drawn in one tensor operation among the items the user
  has not interacted with in the training sequence (and, with the opt-in leak
  ``neg_exclude_heldout``, not among the user's validation and test items);
* sequence-level auxiliary loss terms that layers add while encoding;
* the last-position shortcut of prediction, where the model declares it exact;
* ``attention_weights``: the matrix every attention layer aggregated with.

A subclass implements :meth:`encode` (per-position outputs from a
:class:`~recbole_attn.model.layers.context.SequenceContext`), :meth:`position_loss`,
:meth:`score_items` and :meth:`score_all_items`; ``calculate_loss``, ``predict`` and
``full_sort_predict`` are provided here.
"""

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from recbole.model.abstract_recommender import SequentialRecommender
from recbole.utils import InputType

from recbole_attn.config_check import Flag, Integer, Number, OneOf
from recbole_attn.data.dataset import TRAINING_MODES, check_training_mode
from recbole_attn.data.histories import heldout_items
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
from recbole_attn.model.length_groups import (
    check_length_group_overhead,
    check_length_groups,
    plan_length_groups,
)
from recbole_attn.model.losses import check_ce_budget, chunked_cross_entropy

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


def combine_group_losses(parts):
    """The losses of a batch from those of its length groups.

    ``parts``: per group ``(position losses, N_g, aux terms)``: a tuple of means over the
    group's N_g loss positions, and the :class:`~recbole_attn.model.layers.context.
    AuxLoss` terms its layers added (a mean and the count it averages over). Position
    loss i is ``sum_g loss_gi N_g / sum_g N_g``, auxiliary loss i ``sum_g value_gi
    count_gi / sum_g count_gi`` (0 when every count is 0): the means over the whole
    batch. Returns one tuple, position losses first."""
    n_losses, n_aux = len(parts[0][0]), len(parts[0][2])
    if any(len(loss) != n_losses or len(aux) != n_aux for loss, _, aux in parts):
        raise RuntimeError(
            "the length groups of a batch returned different numbers of loss terms; "
            "a model whose losses depend on the batch composition must set "
            "length_grouping = False"
        )

    def mean(values, counts):
        dtype, device = values[0].dtype, values[0].device
        counts = [torch.as_tensor(c, device=device).to(dtype) for c in counts]
        total = sum(counts)
        weighted = sum(v * c for v, c in zip(values, counts))
        return weighted / torch.where(total > 0, total, torch.ones_like(total))

    positions = [n for _, n, _ in parts]
    losses = tuple(
        mean([loss[i] for loss, _, _ in parts], positions) for i in range(n_losses)
    )
    aux = tuple(
        mean([a[i].value for _, _, a in parts], [a[i].count for _, _, a in parts])
        for i in range(n_aux)
    )
    return losses + aux


class AttnSequentialRecommender(SequentialRecommender):
    r"""Base class of recbole_attn's sequential recommenders.

    Config keys read here: ``training_mode`` (``all_position`` | ``last_position``),
    ``neg_exclude_seen`` (negatives avoid the items of the user's training sequence, as in
    the official code of STOSA and PAtt; False = plain uniform sampling),
    ``neg_exclude_heldout`` (negatives also avoid the user's validation and test items: a
    LEAK of held-out data into training that exists only to reproduce the official STOSA
    and PAtt numbers; default False), ``trim_batch``,
    ``position_alignment`` (``first`` | ``last``), ``length_groups`` and
    ``length_group_overhead`` (exact length grouping of every batch,
    :mod:`recbole_attn.model.length_groups`), ``ce_logits_budget_mb`` (the largest
    ``[positions, n_items]`` logits tensor a CE loss materializes,
    :func:`~recbole_attn.model.losses.chunked_cross_entropy`).
    """

    input_type = InputType.POINTWISE
    #: the options read here (checked with the configuration, before any data is loaded;
    #: a model adds its own in ``options`` and cross-option ``option_rules``)
    options = {
        "training_mode": OneOf(*TRAINING_MODES),
        "trim_batch": Flag(),
        "neg_exclude_seen": Flag(),
        "neg_exclude_heldout": Flag(),
        "position_alignment": OneOf("first", "last"),
        "length_groups": Integer(1),
        "length_group_overhead": Number(),
        "ce_logits_budget_mb": Number("positive"),
    }
    #: whether :meth:`position_loss` needs one sampled negative per position
    needs_negatives = False
    #: whether prediction may compute only the last position in the last layer: set it
    #: where that is exact (no step of the model mixes the query rows of a layer)
    last_position_shortcut = False
    #: whether a batch may be split into length groups (``length_groups``): set it to
    #: False for a model whose encoder or losses mix the sequences of a batch (batch
    #: statistics, in-batch negatives, a loss that is no mean over positions or over
    #: counted terms); none of ours does
    length_grouping = True
    #: whether the model reads item categories (``category_field``) itself, so that it
    #: cannot run on a dataset without them (planners skip it there:
    #: :func:`recbole_attn.quick_start.has_categories`)
    needs_item_categories = False

    def __init__(self, config, dataset):
        super().__init__(config, dataset)

        # load parameters info
        self.training_mode = check_training_mode(config)
        self.trim_batch = bool(config["trim_batch"])
        self.neg_exclude_seen = bool(config["neg_exclude_seen"])
        self.neg_exclude_heldout = bool(config["neg_exclude_heldout"])
        if self.neg_exclude_heldout:
            table = heldout_items(dataset)
            if table is None:
                raise ConfigError(
                    "neg_exclude_heldout needs the users' held-out items, which "
                    "recbole_attn's dataset (AttnSequentialDataset) records on the "
                    "training split; this dataset has none"
                )
            # every user's validation and test items [n_users, W] (0 = none): read only
            # by sample_negatives, and only under this opt-in leak
            self.register_buffer("heldout_items", table, persistent=False)
        self.position_alignment = check_position_alignment(config["position_alignment"])
        self.max_length_groups = check_length_groups(config["length_groups"])
        self.length_group_overhead = check_length_group_overhead(
            config["length_group_overhead"]
        )
        self.ce_logits_budget_mb = check_ce_budget(config["ce_logits_budget_mb"])

    # ------------------------------------------------------------------ to implement
    def encode(self, context):
        """Outputs ``[B, L, ...]`` (a tensor or a tuple of tensors) of the sequences of
        ``context``, or ``[B, 1, ...]`` at ``context.query_index`` when it is set."""
        raise NotImplementedError

    def position_loss(self, output, pos_items, neg_items):
        """Loss from outputs gathered at N training positions ``[N, ...]`` and their
        targets ``pos_items [N]`` (and ``neg_items [N]`` when :attr:`needs_negatives`).
        Returns a scalar or a tuple of scalars (RecBole sums and logs them), each a MEAN
        over the N positions: length grouping weights the groups' losses by their N
        (tested for every model; a loss that is not a per-position mean needs
        ``length_grouping = False``)."""
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
        r"""Loss of one positive and one sampled negative score per position: ``BCE``
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

    def sample_negatives(self, item_seq, targets, users=None):
        """One negative item per position ``[B, L]``, uniform over ``[1, n_items)``.

        With ``neg_exclude_seen`` (default) the draw is uniform over the items that are NOT
        in the user's training sequence (inputs and targets), exactly, in one multinomial
        draw per batch (a ``[B, n_items]`` weight matrix); a user who has seen every item
        falls back to all items. With ``neg_exclude_heldout`` (a leak, off by default) the
        items of the user's validation and test rows (``users [B]``) are excluded too, as
        the official STOSA and PAtt code does.
        """
        batch, length = targets.shape
        if not (self.neg_exclude_seen or self.neg_exclude_heldout):
            return torch.randint(
                1, self.n_items, (batch, length), device=targets.device
            )
        weights = torch.ones(batch, self.n_items, device=targets.device)
        if self.neg_exclude_seen:
            weights.scatter_(1, item_seq, 0.0)
            weights.scatter_(1, targets, 0.0)
        if self.neg_exclude_heldout:
            if users is None:
                raise ConfigError(
                    "neg_exclude_heldout needs the user id of every training sequence "
                    "(the interaction has no user field)"
                )
            weights.scatter_(1, self.heldout_items[users], 0.0)
        weights[:, 0] = 0.0
        exhausted = weights.sum(1) == 0
        if bool(exhausted.any()):
            weights[exhausted, 1:] = 1.0
        return torch.multinomial(weights, length, replacement=True)

    def sequence_context(self, interaction, last_position=False, record=False):
        """The :class:`SequenceContext` of a batch: trimmed sequences, position ids, user
        ids; with ``last_position`` (and :attr:`last_position_shortcut`), the last layer
        computes only the last valid position; ``record`` keeps the attention matrices.
        The whole batch in one context (no length grouping)."""
        item_seq_len = interaction[self.ITEM_SEQ_LEN]
        item_seq = self.trim(interaction[self.ITEM_SEQ], item_seq_len)
        return self.make_context(
            item_seq, item_seq_len, self._users(interaction), last_position, record
        )

    def _users(self, interaction):
        return interaction[self.USER_ID] if self.USER_ID in interaction else None

    def make_context(
        self, item_seq, item_seq_len, user=None, last_position=False, record=False
    ):
        """The :class:`SequenceContext` of already trimmed sequences ``item_seq``."""
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
            user=user,
            query_index=item_seq_len - 1 if shortcut else None,
            record=record,
        )

    # ------------------------------------------------------------------ length groups
    def length_groups(self, item_seq_len):
        """The length groups of a batch: None (the batch is not split), or a list of
        ``(rows, length)``, ``rows`` a ``[n_g]`` index tensor (original order within the
        group), ``length`` the group's longest sequence, shortest group first.

        Split only with ``trim_batch``, :attr:`length_grouping`, ``length_groups > 1``
        and when :func:`~recbole_attn.model.length_groups.plan_length_groups` finds
        more than one group worth it for these lengths."""
        batch = item_seq_len.numel()
        if (
            not (self.trim_batch and self.length_grouping)
            or self.max_length_groups < 2
            or batch < 2
        ):
            return None
        lengths = item_seq_len.detach().cpu().numpy()
        longest = max(int(lengths.max()), 1)
        bounds = plan_length_groups(
            lengths,
            self.max_length_groups,
            self.length_group_overhead * batch * longest**2,
        )
        if len(bounds) < 2:
            return None
        groups, low = [], -1
        for high in bounds:
            rows = np.flatnonzero((lengths > low) & (lengths <= high))
            rows = torch.as_tensor(rows, device=item_seq_len.device)
            groups.append((rows, max(int(high), 1)))
            low = high
        return groups

    def _grouped_contexts(self, interaction, last_position=False):
        """``(item_seq, item_seq_len, groups, contexts)`` of a batch: the batch trimmed to
        its longest sequence, its :meth:`length_groups` and one context per group (one
        context of the whole batch when it is not split)."""
        item_seq_len = interaction[self.ITEM_SEQ_LEN]
        item_seq = self.trim(interaction[self.ITEM_SEQ], item_seq_len)
        user = self._users(interaction)
        groups = self.length_groups(item_seq_len)
        if groups is None:
            contexts = [self.make_context(item_seq, item_seq_len, user, last_position)]
        else:
            contexts = [
                self.make_context(
                    item_seq[rows, :length],
                    item_seq_len[rows],
                    None if user is None else user[rows],
                    last_position,
                )
                for rows, length in groups
            ]
        return item_seq, item_seq_len, groups, contexts

    # ------------------------------------------------------------------ training
    def calculate_loss(self, interaction):
        """Position losses (``position_loss``) then auxiliary losses (those the layers
        added with ``context.add_aux_loss``), as one scalar or a tuple.

        The negatives are drawn once for the whole (trimmed) batch before any encoding,
        so length grouping neither changes them nor the RNG draws after them. With
        length groups, every group is encoded and its losses computed on its own; a
        position loss (a mean over the group's N_g loss positions) is weighted by
        N_g / N, an auxiliary loss by its count over the groups' total count: the loss
        and its gradients are the ungrouped batch's (up to rounding; tested). Only the
        random draws inside the encoder (dropout, RKSA's noise, PAtt's sampled triples)
        differ, since they are drawn per group."""
        item_seq, item_seq_len, groups, contexts = self._grouped_contexts(interaction)
        targets, mask = self.training_targets(
            item_seq, item_seq_len, interaction[self.POS_ITEM_ID]
        )
        neg_items = None
        if self.needs_negatives:
            neg_items = self.sample_negatives(
                item_seq, targets, self._users(interaction)
            )
        if groups is None:
            losses, _, aux = self._context_losses(contexts[0], targets, mask, neg_items)
            losses += tuple(term.value for term in aux)
            return losses if len(losses) > 1 else losses[0]
        parts = []
        for (rows, length), context in zip(groups, contexts):
            parts.append(
                self._context_losses(
                    context,
                    targets[rows, :length],
                    mask[rows, :length],
                    None if neg_items is None else neg_items[rows, :length],
                )
            )
        losses = combine_group_losses(parts)
        return losses if len(losses) > 1 else losses[0]

    def _context_losses(self, context, targets, mask, neg_items):
        """``(position losses tuple, number of loss positions, aux loss terms)`` of one
        context and its ``[B, L]`` targets, loss mask and negatives."""
        output = map_output(lambda o: o[mask], self.encode(context))
        loss = self.position_loss(
            output, targets[mask], None if neg_items is None else neg_items[mask]
        )
        loss = loss if isinstance(loss, tuple) else (loss,)
        return loss, mask.sum(), list(context.aux_loss_terms)

    # ------------------------------------------------------------------ prediction
    def last_output(self, interaction):
        """Outputs ``[B, ...]`` at the last valid position of every sequence (encoded by
        length group, in the rows' original order)."""
        _, _, groups, contexts = self._grouped_contexts(interaction, last_position=True)
        outputs = [self._last_output(context) for context in contexts]
        if groups is None:
            return outputs[0]
        order = torch.cat([rows for rows, _ in groups])
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(len(order), device=order.device)
        if isinstance(outputs[0], tuple):
            return tuple(torch.cat(parts)[inverse] for parts in zip(*outputs))
        return torch.cat(outputs)[inverse]

    def _last_output(self, context):
        output = self.encode(context)
        if context.query_index is not None:
            return map_output(lambda o: o.squeeze(1), output)
        return map_output(
            lambda o: self.gather_indexes(o, context.item_seq_len - 1), output
        )

    def predict(self, interaction):
        """Scores of ``interaction[ITEM_ID]``. RecBole's sampled evaluation (``uni100``,
        ``pop100``) repeats every sequence once per candidate item, in consecutive rows:
        each run of equal (user, sequence) rows is encoded once and its output reused
        for all its candidates (runs, not a sort of all rows: O(rows); rows in any other
        order still get their own scores, only encoded more than once)."""
        fields = [self.ITEM_SEQ, self.ITEM_SEQ_LEN]
        if self.USER_ID in interaction:
            fields.append(self.USER_ID)
        key = torch.cat(
            [interaction[self.ITEM_SEQ]]
            + [interaction[f].unsqueeze(1) for f in fields[1:]],
            dim=1,
        )
        unique, inverse = torch.unique_consecutive(key, dim=0, return_inverse=True)
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

    options = {
        "loss_type": OneOf(
            *LOSS_TYPES,
            hint="CE: softmax over all items; BCE (the SASRec and PAtt papers') and "
            "BPR: one sampled negative per position",
        )
    }

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
            return chunked_cross_entropy(
                output, self.item_embedding.weight, pos_items, self.ce_logits_budget_mb
            )
        pos_score = self.score_items(output, pos_items)
        neg_score = self.score_items(output, neg_items)
        return self.sampled_loss(pos_score, neg_score, self.loss_type)

    def score_items(self, output, items):
        return (output * self.item_embedding(items)).sum(-1)

    def score_all_items(self, output):
        return output @ self.item_embedding.weight.transpose(0, 1)
