"""
recbole_attn.sequential.recommender
###################################

What the plugin adds to a model file (docs/models.md, "Training"): the mixin
:class:`AttnSequentialRecommender`, placed before a model class of
:mod:`recbole_attn.model` (``class STOSA(AttnSequentialRecommender, stosa.STOSA)``), gives
it the plugin's training and prediction on top of the model's own RecBole methods:

* ``training_mode``: ``all_position`` (one sequence per user, a loss at every valid
  position) or ``last_position`` (RecBole's one sample per prefix);
* every ``loss_type`` for every model: CE over all items under a memory budget, BPR, BCE
  and the log-Q corrected sampled softmax SSM on ``neg_sample_num`` negatives per
  position, uniform or by popularity, drawn inside the model
  (:mod:`~recbole_attn.sequential.negatives`, :mod:`~recbole_attn.sequential.losses`);
* every batch cut to its longest sequence, and split into groups of similar lengths
  (:mod:`~recbole_attn.sequential.length_groups`; exact: the loss and its gradients are
  the ungrouped batch's);
* :meth:`~AttnSequentialRecommender.attention_weights`, the matrices every attention
  layer aggregated with (read by forward hooks: the model files carry no recording code).

A model file gives the plugin ``encode(item_seq, item_seq_len)`` (outputs at every
position: a tensor or a tuple of tensors; RKSA's also takes the users),
``item_scores(output, items)`` and ``all_item_scores(output)`` (larger is better). In
``last_position`` mode, where RecBole's negative sampler has drawn a batch's negatives
(``train_neg_sample_args``), the model's own ``calculate_loss`` trains on them, exactly
as RecBole trains the model file.
"""

import torch

from recbole_attn.options.declared import (
    Flag,
    Integer,
    Number,
    OneOf,
    Opt,
    load_options,
)
from recbole_attn.data.dataset import TRAINING_MODES, AttnSequentialDataset
from recbole_attn.data.histories import item_counts
from recbole_attn.sequential import batching, fast, negatives
from recbole_attn.sequential.batching import map_output
from recbole_attn.sequential.length_groups import combine_group_losses, group_rows
from recbole_attn.sequential.losses import (
    SAMPLED_LOSS_TYPES,
    cross_entropy,
    linear_cross_entropy,
    sampled_loss,
)

#: the options of the plugin's training and prediction, read by every model of ours
TRAINING_OPTIONS = {
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
        "many MB (chunks: same loss and gradients; dot-product models compute each "
        "chunk's gradients with its loss, the others recompute it in the backward)",
    ),
}


class AttnSequentialRecommender:
    r"""The plugin's training and prediction, mixed in before a model class (module
    docstring), and the options they read, declared in :attr:`options` (their defaults
    are ``properties/overall.yaml``'s generated block). A model's plugin class declares
    its own options in ``options``, its values of keys declared elsewhere in
    ``defaults``, and the checks that tie options together.
    """

    #: this class's options live in overall.yaml (read by every model), not in a model's
    options_in_overall = True
    #: the comment lines on top of the model's generated yaml
    yaml_header = None
    options = TRAINING_OPTIONS
    #: whether a batch may be split into length groups (``length_groups``): False for a
    #: model whose losses mix the sequences of a batch (batch statistics, in-batch
    #: negatives, a loss that is no mean over positions or counted terms)
    length_grouping = True
    #: whether the model reads item categories (``category_field``) itself, so that it
    #: cannot run on a dataset without them (planners skip it there)
    needs_item_categories = False
    #: the dataset class the model trains on
    dataset_class = AttnSequentialDataset
    #: whether the model's ``encode`` also takes the users (RKSA)
    encode_reads_user = False
    #: names of the position loss terms :meth:`position_terms` adds (STOSA: pvn)
    extra_loss_names = ()

    #: the loss types the model file accepts (its ``calculate_loss``); the file is built
    #: with the first of them where the plugin trains another (:class:`ModelFileConfig`)
    recbole_loss_types = ()

    def __init__(self, config, dataset):
        super().__init__(ModelFileConfig(config, self.recbole_loss_types), dataset)
        if config["loss_type"] != self.loss_type:
            self.use_loss_type(config["loss_type"])
        fast.speed_up(self)  # faster dropout and GELU, the same functions
        load_options(self, config, AttnSequentialRecommender)
        if self.neg_sample_distribution == "popularity":
            # q of the sampled negatives: training interactions + 1 (not a parameter)
            q = negatives.popularity_distribution(item_counts(dataset, self.n_items))
            self.register_buffer("neg_distribution", q, persistent=False)
        else:
            self.neg_distribution = None  # uniform

    # ------------------------------------------------------------------ what a model adds
    def use_loss_type(self, loss_type):
        """Train with ``loss_type``, one the model file does not accept (the plugin's own
        losses: SSM, or BCE and BPR where the file has the other)."""
        self.loss_type = loss_type

    def item_scores(self, output, items):
        """The model file's scores of ``items`` ``[N]``, or of ``[N, M]`` (M per row of
        ``output``: the plugin's negatives), larger is better."""
        if items.dim() == 1:
            return super().item_scores(output, items)
        rows, many = items.shape
        repeated = map_output(
            lambda o: o.unsqueeze(1).expand(rows, many, *o.shape[1:]).flatten(0, 1),
            output,
        )
        return super().item_scores(repeated, items.flatten()).view(rows, many)

    def position_terms(self, output, pos_items, neg_items):
        """Loss terms of the model's own besides ``loss_type``'s, each a MEAN over the N
        training positions (STOSA's pvn hinge); ``neg_items`` ``[N, M]`` or None."""
        return ()

    def aux_terms(self):
        """:class:`~recbole_attn.sequential.length_groups.AuxLoss` terms of the last
        encoding (RKSA's listwise loss)."""
        return ()

    def item_weights(self):
        """``[n_items, d]`` where the model's score of item j is ``output . w_j`` (its
        ``all_item_scores`` is ``output @ item_weights().T``: CE then runs as
        :func:`~recbole_attn.sequential.losses.linear_cross_entropy`), else None."""
        return None

    @property
    def needs_negatives(self):
        """Whether the losses need sampled negatives (a sampled ``loss_type``; a model
        with a term of its own on negatives extends this)."""
        return self.loss_type in SAMPLED_LOSS_TYPES

    def loss_names(self, count):
        """Names of the ``count`` terms of :meth:`calculate_loss` (the trainer's line per
        epoch): ``loss_type``, the model's extra terms, then auxiliary terms."""
        names = (self.loss_type, *self.extra_loss_names)[:count]
        aux = count - len(names)
        return names + (
            ("aux",) if aux == 1 else tuple(f"aux{i + 1}" for i in range(aux))
        )

    # ------------------------------------------------------------------ batches
    @classmethod
    def trims_batches(cls, config):
        """Whether the batches of a run with ``config`` are cut to their longest
        sequence (:meth:`trim`; the memory estimate reads it): always, here."""
        return True

    def trim(self, item_seq, item_seq_len):
        """Cut a right-padded batch to its longest sequence (exact: attention is causal
        and position ids do not depend on the padding)."""
        return batching.trim(item_seq, item_seq_len)

    def _users(self, interaction):
        return interaction[self.USER_ID] if self.USER_ID in interaction else None

    def _encode(self, item_seq, item_seq_len, user):
        if self.encode_reads_user:
            return self.encode(item_seq, item_seq_len, user)
        return self.encode(item_seq, item_seq_len)

    def _groups(self, interaction, grouping=True):
        """``(item_seq, item_seq_len, user, groups)`` of a batch: trimmed, and its length
        groups (None: the batch is not split)."""
        item_seq_len = interaction[self.ITEM_SEQ_LEN]
        item_seq = self.trim(interaction[self.ITEM_SEQ], item_seq_len)
        groups = self.split_by_length(item_seq_len) if grouping else None
        return item_seq, item_seq_len, self._users(interaction), groups

    def split_by_length(self, item_seq_len):
        """The length groups of a batch (:func:`~recbole_attn.sequential.length_groups.
        group_rows`): None when it is not split (a model without
        :attr:`length_grouping`, ``length_groups: 1``, or one group worth it)."""
        if not self.length_grouping:
            return None
        return group_rows(
            item_seq_len, self.length_groups or 1, self.length_group_overhead or 0.0
        )

    # ------------------------------------------------------------------ negatives
    def excluded_items(self, item_seq, targets, users=None):
        """``[B, K]`` the items the negatives of every row avoid (``neg_exclude_seen``:
        the user's training items), or None."""
        if not self.neg_exclude_seen:
            return None
        return negatives.excluded_items(item_seq, targets)

    def sample_negatives(self, item_seq, targets, users=None):
        """``neg_sample_num`` negative items per position ``[B, L, M]``
        (:func:`~recbole_attn.sequential.negatives.sample_negatives`), from
        ``neg_sample_distribution``, avoiding :meth:`excluded_items`."""
        return negatives.sample_negatives(
            targets,
            self.n_items,
            num=self.neg_sample_num,
            excluded=self.excluded_items(item_seq, targets, users),
            q=self.neg_distribution,
        )

    def negatives_log_q(self, neg_items, item_seq, targets, users=None):
        """``[B, L, M]``: the log probability with which :meth:`sample_negatives` drew
        each of ``neg_items`` (SSM's log-Q correction)."""
        return negatives.log_sampling_probability(
            neg_items,
            self.excluded_items(item_seq, targets, users),
            self.neg_distribution,
            self.n_items,
        )

    # ------------------------------------------------------------------ training
    def calculate_loss(self, interaction):
        """The model's own loss where RecBole's sampler has drawn the negatives;
        otherwise ``loss_type``'s loss at the positions of ``training_mode``, the
        model's position terms, then its auxiliary terms, as one scalar or a tuple.

        The negatives are drawn once for the whole (trimmed) batch before any encoding,
        so length grouping neither changes them nor the random draws after them. With
        length groups every group is encoded on its own; a position loss (a mean over
        the group's N_g positions) is weighted by N_g / N, an auxiliary term by its
        count over the groups' total: the loss and its gradients are the ungrouped
        batch's (up to rounding). Only the random draws inside the encoder (dropout,
        RKSA's noise, PAtt's sampled triples) differ, since they are drawn per group."""
        if self.training_mode == "last_position" and self.NEG_ITEM_ID in interaction:
            return super().calculate_loss(interaction)
        item_seq, item_seq_len, users, groups = self._groups(interaction)
        targets, mask = batching.training_targets(
            item_seq, item_seq_len, interaction[self.POS_ITEM_ID], self.training_mode
        )
        negs = None
        if self.needs_negatives:
            neg_items = self.sample_negatives(item_seq, targets, users)
            neg_log_q = None
            if self.loss_type == "SSM":
                neg_log_q = self.negatives_log_q(neg_items, item_seq, targets, users)
            negs = (neg_items, neg_log_q)
        if groups is None:
            losses, _, aux = self._losses(
                item_seq, item_seq_len, users, targets, mask, negs
            )
            losses += tuple(term.value for term in aux)
        else:
            parts = [
                self._losses(
                    item_seq[rows, :length],
                    item_seq_len[rows],
                    None if users is None else users[rows],
                    targets[rows, :length],
                    mask[rows, :length],
                    _select(negs, lambda n: n[rows, :length]),
                )
                for rows, length in groups
            ]
            losses = combine_group_losses(parts)
        return losses if len(losses) > 1 else losses[0]

    def _losses(self, item_seq, item_seq_len, users, targets, mask, negs):
        """``(position losses, number of loss positions, aux terms)`` of one batch."""
        output = batching.at_positions(
            self._encode(item_seq, item_seq_len, users), mask
        )
        neg_items, neg_log_q = _select(negs, lambda n: n[mask]) or (None, None)
        losses = self.position_losses(output, targets[mask], neg_items, neg_log_q)
        return losses, mask.sum(), list(self.aux_terms())

    def position_losses(self, output, pos_items, neg_items=None, neg_log_q=None):
        """The losses of N training positions, each a MEAN over them: ``loss_type``'s on
        the outputs ``[N, ...]``, targets ``pos_items [N]`` and, for the sampled losses,
        ``neg_items [N, M]`` (with ``neg_log_q`` for SSM), then :meth:`position_terms`.
        """
        weights = self.item_weights() if self.loss_type == "CE" else None
        if weights is not None:
            loss = linear_cross_entropy(
                output, weights, pos_items, self.ce_logits_budget_mb
            )
        elif self.loss_type == "CE":
            loss = cross_entropy(
                self.all_item_scores,
                output,
                pos_items,
                self.n_items,
                self.ce_logits_budget_mb,
            )
        else:
            loss = self.sampled_position_loss(
                self.item_scores(output, pos_items),
                self.item_scores(output, neg_items),
                pos_items,
                neg_items,
                neg_log_q,
            )
        return (loss, *self.position_terms(output, pos_items, neg_items))

    def sampled_position_loss(
        self, pos_score, neg_score, pos_items, neg_items, neg_log_q=None
    ):
        """``loss_type``'s sampled loss of the scores ``[N]`` and ``[N, M]``; SSM leaves
        out a negative that is the positive itself (an accidental hit) unless the user's
        items are excluded."""
        neg_mask = None
        if self.loss_type == "SSM" and not self.neg_exclude_seen:
            neg_mask = neg_items != pos_items.unsqueeze(-1)
        return sampled_loss(pos_score, neg_score, self.loss_type, neg_log_q, neg_mask)

    # ------------------------------------------------------------------ prediction
    def last_output(self, interaction):
        """Outputs ``[B, ...]`` at the last valid position of every sequence (encoded by
        length group, in the rows' original order)."""
        item_seq, item_seq_len, users, groups = self._groups(interaction)
        if groups is None:
            return self._last(item_seq, item_seq_len, users)
        outputs = [
            self._last(
                item_seq[rows, :length],
                item_seq_len[rows],
                None if users is None else users[rows],
            )
            for rows, length in groups
        ]
        order = torch.cat([rows for rows, _ in groups])
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(len(order), device=order.device)
        if isinstance(outputs[0], tuple):
            return tuple(torch.cat(parts)[inverse] for parts in zip(*outputs))
        return torch.cat(outputs)[inverse]

    def _last(self, item_seq, item_seq_len, users):
        """The model file's own ``forward``: the outputs at the last items (STOSA's
        computes only them in its last layer)."""
        if self.encode_reads_user:
            return self.forward(item_seq, item_seq_len, users)
        return self.forward(item_seq, item_seq_len)

    def predict(self, interaction):
        """Scores of ``interaction[ITEM_ID]``. RecBole's sampled evaluation (``uni100``,
        ``pop100``) repeats every sequence once per candidate item, in consecutive rows:
        each run of equal (user, sequence) rows is encoded once and its output reused
        for all its candidates (runs, not a sort of all rows: O(rows); rows in any other
        order still get their own scores, only encoded more than once)."""
        fields = [self.ITEM_SEQ, self.ITEM_SEQ_LEN]
        if self.USER_ID in interaction:
            fields.append(self.USER_ID)
        runs = batching.runs_of_equal_rows([interaction[f] for f in fields])
        if runs is None:
            output = self.last_output(interaction)
        else:
            first, inverse = runs
            output = self.last_output({f: interaction[f][first] for f in fields})
            output = map_output(lambda o: o[inverse], output)
        return self.item_scores(output, interaction[self.ITEM_ID])

    def full_sort_predict(self, interaction):
        return self.all_item_scores(self.last_output(interaction))

    @torch.no_grad()
    def attention_weights(self, interaction, refined=True):
        """Per attention layer, the ``[B, h, L, L]`` matrix its aggregation used (after
        any refinement, before dropout), for the sequences of ``interaction`` (trimmed
        to the longest). ``refined=False``: the normalized matrices before refinement
        (models with a refiner only). Runs in the model's current mode (call ``eval()``
        for the evaluation-time matrices of stochastic models).

        Read by forward hooks: every attention layer of our models (and RecBole's)
        applies its ``attn_dropout`` to the matrix it aggregates with, and a refiner
        (AWRSR's, a module named ``refiner``) receives the normalized matrix first."""
        suffix = ".attn_dropout" if refined else ".refiner"
        found = [m for n, m in self.named_modules() if n.endswith(suffix)]
        if not found:
            kind = "attention layer" if refined else "attention refiner"
            raise ValueError(f"{type(self).__name__} has no {kind}")
        matrices = []
        handles = [
            m.register_forward_pre_hook(lambda _, args: matrices.append(args[0]))
            for m in found
        ]
        try:
            item_seq, item_seq_len, users, _ = self._groups(interaction, grouping=False)
            self._encode(item_seq, item_seq_len, users)
        finally:
            for handle in handles:
                handle.remove()
        return matrices


class ModelFileConfig:
    """The configuration as a model file reads it in ``__init__``: ``loss_type`` one the
    file accepts (the first of ``loss_types`` where the plugin trains another: the
    file's own loss is then unused), every other key as ``config`` has it."""

    def __init__(self, config, loss_types):
        self.config = config
        self.loss_types = loss_types

    def __getitem__(self, key):
        value = self.config[key]
        if key == "loss_type" and self.loss_types and value not in self.loss_types:
            return self.loss_types[0]
        return value

    def __contains__(self, key):
        return key in self.config

    def __getattr__(self, name):
        return getattr(self.__dict__["config"], name)


def _select(negs, index):
    """``negs`` ``(items, log_q or None)`` with ``index`` applied to each, or None."""
    if negs is None:
        return None
    return tuple(None if n is None else index(n) for n in negs)


class DotProductScores:
    """Mixed in before :class:`AttnSequentialRecommender` for a model that scores item j
    as ``output . E[j]`` (its ``item_embedding``): CE then runs fused
    (:meth:`~AttnSequentialRecommender.item_weights`), and several items per row
    broadcast."""

    def item_weights(self):
        return self.item_embedding.weight

    def item_scores(self, output, items):
        items_emb = self.item_embedding(items)
        if items_emb.dim() > output.dim():
            output = output.unsqueeze(-2)
        return (output * items_emb).sum(-1)
