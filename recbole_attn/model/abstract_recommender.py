"""
recbole_attn.model.abstract_recommender
#######################################

The contract of our sequential models (docs/models.md, "Training"). A subclass implements
:meth:`~AttnSequentialRecommender.encode` (per-position outputs from a
:class:`~recbole_attn.model.layers.context.SequenceContext`) and its item score as a dot
product (:meth:`~AttnSequentialRecommender.score_factors`,
:meth:`~AttnSequentialRecommender.item_factors`), and may override
:meth:`~AttnSequentialRecommender.score_items`,
:meth:`~AttnSequentialRecommender.score_all_items` (a more exact form of the same score)
and :meth:`~AttnSequentialRecommender.position_loss` (terms of its own); RecBole's
``calculate_loss``, ``predict`` and ``full_sort_predict`` are provided here, on the small
modules that do the work:

* :mod:`~recbole_attn.model.batching`: trimming every batch to its longest sequence, and
  the targets of both training modes (``all_position``: a loss at every valid position of
  one sequence per user; ``last_position``: RecBole's one prefix per sample);
* :mod:`~recbole_attn.model.length_groups`: exact length grouping (a batch split into a
  few groups of similar lengths, losses combined so that the loss and its gradients are
  the ungrouped batch's);
* :mod:`~recbole_attn.model.negatives`: ``neg_sample_num`` negatives per position, uniform
  or by popularity, drawn for the whole batch at once;
* :mod:`~recbole_attn.model.losses`: the losses every model takes (``loss_type``): CE over
  all items (memory-bounded), BPR, BCE and the log-Q corrected sampled softmax SSM on the
  sampled negatives;

and position ids counted from the first item or from the most recent one
(``position_alignment``), sequence-level auxiliary loss terms that layers add while
encoding, the last-position shortcut of prediction where the model declares it exact, and
``attention_weights`` (the matrix every attention layer aggregated with).
"""

import torch
from recbole.model.abstract_recommender import SequentialRecommender
from torch import nn
from recbole.utils import InputType

from recbole_attn.config_check import VALUE_RULES, Flag, Integer, Number, OneOf
from recbole_attn.data.dataset import TRAINING_MODES, AttnSequentialDataset
from recbole_attn.data.histories import item_counts
from recbole_attn.model import batching, negatives
from recbole_attn.model.batching import map_output
from recbole_attn.model.layers.context import SequenceContext, position_ids
from recbole_attn.model.length_groups import combine_group_losses, group_rows
from recbole_attn.options import Opt, load_options
from recbole_attn.model.losses import (
    LOSS_TYPE_HINT,
    LOSS_TYPES,
    SAMPLED_LOSS_TYPES,
    chunked_cross_entropy,
    sampled_loss,
)

#: the options of the layers every model of ours shares (SASRec's, with RecBole's SASRec
#: defaults): a model class that builds them spreads these into its ``options`` and states
#: its paper's values in ``defaults``
SHARED_OPTIONS = {
    "loss_type": Opt(
        "CE",
        OneOf(*LOSS_TYPES, hint=LOSS_TYPE_HINT),
        "CE (softmax over all items), BPR, BCE or SSM (sampled softmax, log-Q corrected)",
    ),
    "n_layers": Opt(2, VALUE_RULES["n_layers"], "attention blocks"),
    "n_heads": Opt(2, VALUE_RULES["n_heads"], "attention heads"),
    "hidden_size": Opt(64, VALUE_RULES["hidden_size"], "d, the embedding size"),
    "inner_size": Opt(256, VALUE_RULES["inner_size"], "FFN width"),
    "hidden_dropout_prob": Opt(
        0.5,
        VALUE_RULES["hidden_dropout_prob"],
        "dropout of the input embeddings and of every sublayer's output",
    ),
    "attn_dropout_prob": Opt(
        0.5, VALUE_RULES["attn_dropout_prob"], "dropout of the attention weights"
    ),
    "layer_norm_eps": Opt(1e-12, VALUE_RULES["layer_norm_eps"], "LayerNorm epsilon"),
    "initializer_range": Opt(
        0.02, VALUE_RULES["initializer_range"], "std of the normal initialization"
    ),
}


class AttnSequentialRecommender(SequentialRecommender):
    r"""Base class of recbole_attn's sequential recommenders: the training and prediction
    contract (module docstring) and the options every model reads, declared in
    :attr:`options` (their defaults are ``properties/overall.yaml``'s generated block).
    A subclass declares its own options in ``options`` (:class:`~recbole_attn.options.Opt`,
    set as attributes named as their keys before its layers are built), its values of
    keys declared elsewhere in ``defaults``, and the checks that tie options together.
    """

    input_type = InputType.POINTWISE
    #: this class's options live in overall.yaml (read by every model), not in a model's
    options_in_overall = True
    #: the comment lines on top of the model's generated yaml
    yaml_header = None
    options = {
        "neg_sample_num": Opt(
            1, Integer(1), "negatives per training position of BPR, BCE, SSM"
        ),
        "neg_sample_distribution": Opt(
            "uniform",
            OneOf("uniform", "popularity"),
            "the negatives' distribution: uniform, or popularity (training "
            "interactions + 1; SSM corrects for it with log Q)",
        ),
        "training_mode": Opt(
            "last_position",
            OneOf(*TRAINING_MODES),
            "all_position: one sequence per user, a loss at every position (our "
            "models'); last_position: RecBole's one sample per prefix (its own models "
            "need it)",
        ),
        "neg_exclude_seen": Opt(
            True,
            Flag(),
            "negatives avoid the items of the user's training sequence",
        ),
        "trim_batch": Opt(
            True,
            Flag(),
            "cut every batch to its longest sequence (exact)",
            research="False measures what trimming saves",
        ),
        "position_alignment": Opt(
            "first",
            OneOf("first", "last"),
            "position ids counted from the first item (first), or back from the most "
            "recent item, which gets T-1 (last: the left-padded official codes)",
        ),
        "length_groups": Opt(
            4,
            Integer(1),
            "split every batch into at most this many groups of similar lengths "
            "(exact: loss and gradients are the ungrouped batch's); 1 = off",
        ),
        "length_group_overhead": Opt(
            0.02,
            Number(),
            "the cost of one more length group, as a fraction of the ungrouped "
            "batch's work B * L_max^2",
        ),
        "ce_logits_budget_mb": Opt(
            512,
            Number("positive"),
            "CE never materializes a [positions, n_items] logits tensor above this "
            "many MB (chunks, recomputed in the backward: same loss and gradients)",
        ),
    }
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
    #: the dataset class the model trains on
    dataset_class = AttnSequentialDataset

    def __init__(self, config, dataset):
        super().__init__(config, dataset)
        load_options(self, config)  # every declared option, as self.<key>
        if self.neg_sample_distribution == "popularity":
            # q of the sampled negatives: training interactions + 1 (not a parameter)
            q = negatives.popularity_distribution(item_counts(dataset, self.n_items))
            self.register_buffer("neg_distribution", q, persistent=False)
        else:
            self.neg_distribution = None  # uniform

    # ------------------------------------------------------------------ to implement
    def encode(self, context):
        """Outputs ``[B, L, ...]`` (a tensor or a tuple of tensors) of the sequences of
        ``context``, or ``[B, 1, ...]`` at ``context.query_index`` when it is set."""
        raise NotImplementedError

    def score_factors(self, output):
        """``[..., D]``: the model's score of item j from outputs ``[..., ...]`` as a dot
        product ``score_factors(output) . item_factors(j)``, which CE over all items
        computes by chunks (:func:`~recbole_attn.model.losses.chunked_cross_entropy`)
        and the default :meth:`score_items` and :meth:`score_all_items` use."""
        raise NotImplementedError

    def item_factors(self, items=None):
        """``[..., D]`` of ``items`` (``[n_items, D]`` of every item when None): see
        :meth:`score_factors`."""
        raise NotImplementedError

    # ------------------------------------------------------------------ scores
    def score_items(self, output, items):
        """Scores of ``items`` ``[B]`` (or ``[B, M]``: M items per row) from outputs
        ``[B, ...]``; larger is better."""
        query = self.score_factors(output)
        keys = self.item_factors(items)
        if keys.dim() > query.dim():
            query = query.unsqueeze(-2)
        return (query * keys).sum(-1)

    def score_all_items(self, output):
        """Scores ``[B, n_items]`` of every item; larger is better."""
        return self.score_factors(output) @ self.item_factors().transpose(0, 1)

    #: names of the terms :meth:`position_loss` returns after ``loss_type``'s (STOSA: pvn)
    extra_loss_names = ()

    def loss_names(self, count):
        """Names of the ``count`` terms of :meth:`calculate_loss` (the trainer's line per
        epoch): ``loss_type``, the model's extra terms, then its layers' auxiliary
        terms."""
        names = (self.loss_type, *self.extra_loss_names)[:count]
        aux = count - len(names)
        return names + (
            ("aux",) if aux == 1 else tuple(f"aux{i + 1}" for i in range(aux))
        )

    def position_loss(self, output, pos_items, neg_items, neg_log_q=None):
        """Loss from outputs gathered at N training positions ``[N, ...]``, their targets
        ``pos_items [N]`` and, for the sampled losses, ``neg_items [N, M]`` (with
        ``neg_log_q [N, M]`` for SSM): ``loss_type``'s loss
        (:mod:`~recbole_attn.model.losses`). A model adds its own terms by overriding
        this and returning a tuple of scalars (RecBole sums and logs them), each a MEAN
        over the N positions: length grouping weights the groups' losses by their N
        (tested for every model; a loss that is not a per-position mean needs
        ``length_grouping = False``)."""
        if self.loss_type == "CE":
            return chunked_cross_entropy(
                self.score_factors(output),
                self.item_factors(),
                pos_items,
                self.ce_logits_budget_mb,
            )
        neg_mask = None
        if self.loss_type == "SSM" and not self.neg_exclude_seen:
            neg_mask = neg_items != pos_items.unsqueeze(-1)  # accidental hits
        return sampled_loss(
            self.score_items(output, pos_items),
            self.score_items(output, neg_items),
            self.loss_type,
            neg_log_q,
            neg_mask,
        )

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

    def trim(self, item_seq, item_seq_len):
        """Cut a right-padded batch to its longest sequence (unless ``trim_batch: False``,
        a research option that measures what trimming saves; results are identical)."""
        return batching.trim(item_seq, item_seq_len) if self.trim_batch else item_seq

    def training_targets(self, item_seq, item_seq_len, pos_items):
        """Targets ``[B, L]`` and loss mask under ``training_mode``
        (:func:`~recbole_attn.model.batching.training_targets`)."""
        return batching.training_targets(
            item_seq, item_seq_len, pos_items, self.training_mode
        )

    @property
    def needs_negatives(self):
        """Whether :meth:`position_loss` needs sampled negatives (a sampled
        ``loss_type``; a model with a term of its own on negatives extends this)."""
        return self.loss_type in SAMPLED_LOSS_TYPES

    def excluded_heldout(self):
        """``[n_users, W]`` items each user's negatives must also avoid, or None (the
        research wing's leak of held-out items overrides this; nothing here does)."""
        return None

    def sample_negatives(self, item_seq, targets, users=None):
        """``neg_sample_num`` negative items per position ``[B, L, M]``
        (:func:`~recbole_attn.model.negatives.sample_negatives`), from
        ``neg_sample_distribution``: avoiding the user's training items with
        ``neg_exclude_seen`` (and :meth:`excluded_heldout`)."""
        return negatives.sample_negatives(
            item_seq,
            targets,
            self.n_items,
            num=self.neg_sample_num,
            exclude_seen=self.neg_exclude_seen,
            heldout_items=self.excluded_heldout(),
            users=users,
            q=self.neg_distribution,
        )

    def negatives_log_q(self, neg_items, item_seq, targets, users=None):
        """``[B, L, M]``: the log probability with which :meth:`sample_negatives` drew
        each of ``neg_items`` (SSM's log-Q correction)."""
        excluded = None
        heldout = self.excluded_heldout()
        if self.neg_exclude_seen or heldout is not None:
            excluded = negatives.excluded_items(
                item_seq if self.neg_exclude_seen else item_seq[:, :0],
                targets if self.neg_exclude_seen else targets[:, :0],
                heldout,
                users,
            )
        return negatives.log_sampling_probability(
            neg_items, excluded, self.neg_distribution, self.n_items
        )

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
    def split_by_length(self, item_seq_len):
        """The length groups of a batch (:func:`~recbole_attn.model.length_groups.
        group_rows`): None when the batch is not split (no ``trim_batch``, a model
        without :attr:`length_grouping`, ``length_groups: 1``, or one group worth it).
        """
        if not (self.trim_batch and self.length_grouping):
            return None
        return group_rows(
            item_seq_len, self.length_groups or 1, self.length_group_overhead or 0.0
        )

    def _grouped_contexts(self, interaction, last_position=False):
        """``(item_seq, item_seq_len, groups, contexts)`` of a batch: the batch trimmed to
        its longest sequence, its :meth:`split_by_length` and one context per group (one
        context of the whole batch when it is not split)."""
        item_seq_len = interaction[self.ITEM_SEQ_LEN]
        item_seq = self.trim(interaction[self.ITEM_SEQ], item_seq_len)
        user = self._users(interaction)
        groups = self.split_by_length(item_seq_len)
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
        negs = None
        if self.needs_negatives:
            users = self._users(interaction)
            neg_items = self.sample_negatives(item_seq, targets, users)
            neg_log_q = None
            if self.loss_type == "SSM":
                neg_log_q = self.negatives_log_q(neg_items, item_seq, targets, users)
            negs = (neg_items, neg_log_q)
        if groups is None:
            losses, _, aux = self._context_losses(contexts[0], targets, mask, negs)
            losses += tuple(term.value for term in aux)
            return losses if len(losses) > 1 else losses[0]
        parts = []
        for (rows, length), context in zip(groups, contexts):
            parts.append(
                self._context_losses(
                    context,
                    targets[rows, :length],
                    mask[rows, :length],
                    _select(negs, lambda n: n[rows, :length]),
                )
            )
        losses = combine_group_losses(parts)
        return losses if len(losses) > 1 else losses[0]

    def _context_losses(self, context, targets, mask, negs):
        """``(position losses tuple, number of loss positions, aux loss terms)`` of one
        context and its ``[B, L]`` targets, loss mask and negatives ``(items, log_q)``
        (``[B, L, M]`` each; None when not needed)."""
        output = map_output(lambda o: o[mask], self.encode(context))
        neg_items, neg_log_q = _select(negs, lambda n: n[mask]) or (None, None)
        loss = self.position_loss(output, targets[mask], neg_items, neg_log_q)
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


def _select(negs, index):
    """``negs`` ``(items, log_q or None)`` with ``index`` applied to each, or None."""
    if negs is None:
        return None
    return tuple(None if n is None else index(n) for n in negs)
