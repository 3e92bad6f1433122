"""The mixin :class:`AttnSequentialRecommender`, placed before a model file's class
(``class STOSA(AttnSequentialRecommender, stosa.STOSA)``): the plugin's training modes,
every loss with in-model negatives, trimmed and length-grouped batches, and prediction
(docs/models.md, "Training"). A model file gives it ``encode``, ``item_scores`` and
``all_item_scores``."""

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
from recbole_attn.sequential import prediction
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
        True, Flag(), "negatives avoid the items of the user's training sequence"
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
        "(exact: loss and gradients are the ungrouped batch's, but for the random "
        "draws: dropout, RKSA's sample); 1 = off",
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
    """The plugin's training and prediction and the options they read."""

    #: this class's options live in overall.yaml (read by every model), not in a model's
    options_in_overall = True
    #: the comment lines on top of the model's generated yaml
    yaml_header = None
    options = TRAINING_OPTIONS
    #: False for a model whose losses mix a batch's sequences (no length groups)
    length_grouping = True
    #: whether the model reads item categories (``category_field``) itself
    needs_item_categories = False
    #: the dataset class the model trains on
    dataset_class = AttnSequentialDataset
    #: whether the model's ``encode`` also takes the users (RKSA)
    encode_reads_user = False
    #: names of the position loss terms :meth:`position_terms` adds (STOSA: pvn)
    extra_loss_names = ()

    #: the loss types the model file accepts (:class:`ModelFileConfig`)
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

    def use_loss_type(self, loss_type):
        self.loss_type = loss_type

    def item_scores(self, output, items):
        """The model file's scores of ``items`` ``[N]`` or ``[N, M]``."""
        if items.dim() == 1:
            return super().item_scores(output, items)
        rows, many = items.shape
        repeated = map_output(
            lambda o: o.unsqueeze(1).expand(rows, many, *o.shape[1:]).flatten(0, 1),
            output,
        )
        return super().item_scores(repeated, items.flatten()).view(rows, many)

    def position_terms(self, output, pos_items, neg_items):
        """The model's own loss terms, each a MEAN over the N positions (STOSA's pvn)."""
        return ()

    def aux_terms(self):
        """``AuxLoss`` terms of the last encoding (RKSA's listwise loss)."""
        return ()

    def item_weights(self):
        """``[n_items, d]`` where item j scores ``output . w_j`` (fused CE), else None."""
        return None

    @property
    def needs_negatives(self):
        return self.loss_type in SAMPLED_LOSS_TYPES

    def loss_names(self, count):
        names = (self.loss_type, *self.extra_loss_names)[:count]
        aux = count - len(names)
        return names + (
            ("aux",) if aux == 1 else tuple(f"aux{i + 1}" for i in range(aux))
        )

    @classmethod
    def trims_batches(cls, config):
        """Whether batches are trimmed (the memory estimate reads it): always."""
        return True

    def trim(self, item_seq, item_seq_len):
        return batching.trim(item_seq, item_seq_len)

    def _users(self, interaction):
        return interaction[self.USER_ID] if self.USER_ID in interaction else None

    def _encode(self, item_seq, item_seq_len, user):
        if self.encode_reads_user:
            return self.encode(item_seq, item_seq_len, user)
        return self.encode(item_seq, item_seq_len)

    def _groups(self, interaction, grouping=True):
        """``(item_seq, item_seq_len, user, groups)``: trimmed, and its length groups."""
        item_seq_len = interaction[self.ITEM_SEQ_LEN]
        item_seq = self.trim(interaction[self.ITEM_SEQ], item_seq_len)
        groups = self.split_by_length(item_seq_len) if grouping else None
        return item_seq, item_seq_len, self._users(interaction), groups

    def split_by_length(self, item_seq_len):
        if not self.length_grouping:
            return None
        return group_rows(
            item_seq_len, self.length_groups or 1, self.length_group_overhead or 0.0
        )

    def excluded_items(self, item_seq, targets, users=None):
        if not self.neg_exclude_seen:
            return None
        return negatives.excluded_items(item_seq, targets)

    def sample_negatives(self, item_seq, targets, users=None):
        return negatives.sample_negatives(
            targets,
            self.n_items,
            num=self.neg_sample_num,
            excluded=self.excluded_items(item_seq, targets, users),
            q=self.neg_distribution,
        )

    def negatives_log_q(self, neg_items, item_seq, targets, users=None):
        """``[B, L, M]`` log probability of each draw (SSM's log-Q)."""
        return negatives.log_sampling_probability(
            neg_items,
            self.excluded_items(item_seq, targets, users),
            self.neg_distribution,
            self.n_items,
        )

    def calculate_loss(self, interaction):
        """The model file's loss where RecBole's sampler drew the negatives; otherwise
        ``loss_type``'s at the positions of ``training_mode``, then the model's terms
        (docs/models.md, "Training")."""
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
        output = batching.at_positions(
            self._encode(item_seq, item_seq_len, users), mask
        )
        neg_items, neg_log_q = _select(negs, lambda n: n[mask]) or (None, None)
        losses = self.position_losses(output, targets[mask], neg_items, neg_log_q)
        return losses, mask.sum(), list(self.aux_terms())

    def position_losses(self, output, pos_items, neg_items=None, neg_log_q=None):
        """``loss_type``'s loss of N positions, then :meth:`position_terms`, MEANs."""
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
        """``loss_type``'s sampled loss; SSM drops accidental hits."""
        neg_mask = None
        if self.loss_type == "SSM" and not self.neg_exclude_seen:
            neg_mask = neg_items != pos_items.unsqueeze(-1)
        return sampled_loss(pos_score, neg_score, self.loss_type, neg_log_q, neg_mask)

    # prediction: functions of sequential/prediction.py (this class's own methods, so
    # that super(AttnSequentialRecommender, model) is the model file's)
    last_output = prediction.last_output
    _last = prediction.forward_last
    predict = prediction.predict
    full_sort_predict = prediction.full_sort_predict
    attention_weights = prediction.attention_weights


class ModelFileConfig:
    """The configuration as a model file reads it: a ``loss_type`` the file accepts."""

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
    if negs is None:
        return None
    return tuple(None if n is None else index(n) for n in negs)


class DotProductScores:
    """Mixin of a model that scores item j as ``output . E[j]`` (fused CE)."""

    def item_weights(self):
        return self.item_embedding.weight

    def item_scores(self, output, items):
        items_emb = self.item_embedding(items)
        if items_emb.dim() > output.dim():
            output = output.unsqueeze(-2)
        return (output * items_emb).sum(-1)
