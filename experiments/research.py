"""The research wing's models: the product models with the switches that only reproduce an
official code's numbers or measure an ablation, LEAKS of held-out or future data included.
No command of the package can build them; ``experiments/runner.py`` builds one where a
study's variant sets one of their options (:func:`model_for`), e.g.
``experiments/studies.py``'s ``STOSA_OFFICIAL`` and ``PATT_OFFICIAL``.

* ``neg_exclude_heldout`` (every model): the negatives also avoid the user's validation and
  test items, as the official STOSA and PAtt codes do (they exclude all of the user's
  items, so the held-out items are never pushed away in training). The training split of
  :class:`HeldoutDataset` records every user's held-out items for it.
* ``trim_batch: False`` (every model): batches keep their full length (measures what
  trimming saves; the results are the same).
* STOSA's forms one by one (``stosa_layer_means``, ``stosa_input``, ``stosa_ffn``,
  ``stosa_init``; ``~`` = the preset's): the ablation between the paper's model and the
  official code's, which the product offers only as the two presets.
* PAtt's paper forms (``dpp_diagonal: one``, ``dpp_sampler: linear``,
  ``dpp_row_normalize: False``) and ``dpp_ground_set: sequence``, a leak: the k-DPP of
  every query lives on the whole padded sequence, padding and future items included, as
  the official normalizer sums (row t then reads the items after t); batches keep their
  full length.
* PARec's official forms (``add_position_embedding``, ``ffn_placement: after``).
* AWRSR on STOSA: STOSA's forms one by one on its backbone (``awrsr_office``).

Stored runs name the product model (``"model": "STOSA"``) and these options among their
overrides.
"""

import torch
from torch import nn

from recbole_attn.data.dataset import AttnSequentialDataset
from recbole_attn.errors import ConfigError
from recbole_attn.plugin.dpatt import causal_product_numerators, triple_minor_sums
from recbole_attn.plugin.stosa import PRESETS
from recbole_attn.model import dpatt, patt, stosa
from recbole_attn.plugin import MODELS
from recbole_attn.options.declared import Flag, OneOf, Opt, declared_options


class ResearchOpt(Opt):
    """An option only the research runner sets (``python -m experiments.runner``; the
    product commands refuse it): an :class:`~recbole_attn.options.declared.Opt` and ``research``,
    what another value than the product's reproduces or measures."""

    def __init__(self, default, check, meaning, research):
        super().__init__(default, check, meaning)
        self.research = research


def research_options(model_class):
    """key -> :class:`ResearchOpt` of the research-only options of the class."""
    return {
        k: o
        for k, o in declared_options(model_class).items()
        if isinstance(o, ResearchOpt)
    }


#: attribute of a training split that holds its :func:`heldout_table`
HELDOUT_ATTR = "_heldout_items"


def heldout_table(n_users, uid, items):
    """``[n_users, W]`` LongTensor: row u holds the items of user u's held-out
    (validation and test) rows, in row order, 0-padded; W = the most rows of one user
    (at least 1)."""
    uid, items = uid.long(), items.long()
    counts = torch.bincount(uid, minlength=n_users)
    width = max(int(counts.max()) if counts.numel() else 0, 1)
    table = torch.zeros(n_users, width, dtype=torch.long)
    if uid.numel() == 0:
        return table
    order = torch.argsort(uid, stable=True)
    uid, items = uid[order], items[order]
    starts = torch.zeros(n_users + 1, dtype=torch.long)
    starts[1:] = counts.cumsum(0)
    rank = torch.arange(uid.numel()) - starts[uid]
    table[uid, rank] = items
    return table


class HeldoutDataset(AttnSequentialDataset):
    """The product dataset whose training split also records every user's validation and
    test items (:func:`heldout_items`), for ``neg_exclude_heldout`` alone."""

    def build(self):
        datasets = super().build()
        held = [d.inter_feat for d in datasets[1:]]
        empty = [torch.zeros(0, dtype=torch.long)]
        table = heldout_table(
            self.user_num,
            torch.cat([f[self.uid_field] for f in held] + empty),
            torch.cat([f[self.iid_field] for f in held] + empty),
        )
        setattr(datasets[0], HELDOUT_ATTR, table)
        return datasets


def heldout_items(dataset):
    """The held-out items per user recorded on a training split by
    :class:`HeldoutDataset`, or None."""
    return getattr(dataset, HELDOUT_ATTR, None)


class HeldoutNegatives:
    """Mixin of a product model: ``neg_exclude_heldout``."""

    dataset_class = HeldoutDataset
    options = {
        "neg_exclude_heldout": ResearchOpt(
            False,
            Flag(),
            "negatives also avoid the user's validation and test items",
            research="a LEAK of held-out data, as the official STOSA and PAtt codes",
        )
    }

    def __init__(self, config, dataset):
        super().__init__(config, dataset)
        self.neg_exclude_heldout = _option(self, config, "neg_exclude_heldout")
        if self.neg_exclude_heldout:
            table = heldout_items(dataset)
            if table is None:
                raise ConfigError(
                    "neg_exclude_heldout needs the users' held-out items, which "
                    "HeldoutDataset records on the training split; this dataset has none"
                )
            self.register_buffer("heldout_items", table, persistent=False)

    def excluded_items(self, item_seq, targets, users=None):
        excluded = super().excluded_items(item_seq, targets, users)
        if not self.neg_exclude_heldout:
            return excluded
        if users is None:
            raise ConfigError(
                "neg_exclude_heldout needs the user id of every training sequence "
                "(the interaction has no user field)"
            )
        held = self.heldout_items[users]
        return held if excluded is None else torch.cat([excluded, held], dim=1)


class FullLengthBatches:
    """Mixin of a product model: ``trim_batch: False`` keeps every batch at its full
    length (and unsplit)."""

    options = {
        "trim_batch": ResearchOpt(
            True,
            Flag(),
            "cut every batch to its longest sequence (exact)",
            research="False measures what trimming saves",
        )
    }

    trim_batch = True

    @classmethod
    def trims_batches(cls, config):
        return _option(cls, config, "trim_batch") and super().trims_batches(config)

    def __init__(self, config, dataset):
        super().__init__(config, dataset)
        if not _option(self, config, "trim_batch"):
            self.trim_batch = False
        if not self.trim_batch:  # here or by a research form (PAtt's ground set)
            self.length_grouping = False

    def trim(self, item_seq, item_seq_len):
        return super().trim(item_seq, item_seq_len) if self.trim_batch else item_seq


def _option(model, config, key):
    """``config[key]``, or the declared default of ``model`` (a model or its class)
    where the configuration lacks it."""
    opt = declared_options(model if isinstance(model, type) else type(model))[key]
    return opt.convert(config[key] if key in config else opt.default)


# ---------------------------------------------------------------------- STOSA
class STOSAForms:
    """Mixin of STOSA: each of the four forms of ``stosa_preset`` on its own."""

    options = {
        f"stosa_{form}": ResearchOpt(
            None,
            OneOf(*values),
            f"~: the preset's; {' or '.join(values)}",
            research="one form of a preset alone: an ablation between the paper and "
            "the official code",
        )
        for form, values in {
            "layer_means": ("paper", "official"),
            "input": ("paper", "official"),
            "ffn": ("paper", "official"),
            "init": ("recbole", "official"),
        }.items()
    }

    @classmethod
    def preset_forms(cls, config):
        forms = super().preset_forms(config)
        for form in PRESETS[config["stosa_preset"]]:
            key = f"stosa_{form}"
            if key in config and config[key] is not None:
                forms[form] = config[key]
        return forms


# ---------------------------------------------------------------------- PAtt
def dpp_pair_probabilities(kernel, mask, k):
    r"""k-DPP pair marginals over the valid positions ``mask [B, T]`` of a ``[B, (H,) T,
    T]`` kernel: for r != t both valid, :math:`\det L_{rt}/e_2` (k = 2) or
    :math:`\sum_x \det L_{rtx}/e_3` (k = 3); 0 on the diagonal, wherever r or t is
    invalid, and for rows with fewer than k valid items."""
    mask = mask.bool()
    m = mask.to(kernel.dtype)
    lm = kernel * m.unsqueeze(-1) * m.unsqueeze(-2)
    minors = dpatt.pair_minors(lm) if k == 2 else triple_minor_sums(lm)
    n = kernel.size(-1)
    upper = torch.ones(n, n, dtype=torch.bool, device=kernel.device).triu(1)
    norm = (minors * upper).sum((-1, -2)) / (1.0 if k == 2 else 3.0)
    trace = torch.diagonal(lm, dim1=-2, dim2=-1).sum(-1)
    eps = torch.finfo(trace.dtype).eps
    floor = 100.0 * eps * trace.clamp_min(0.0) ** k + patt.tiny_value(trace.dtype)
    norm = torch.maximum(norm, floor)
    enough = mask.sum(-1) >= k
    valid = mask.unsqueeze(-1) & mask.unsqueeze(-2) & enough[..., None, None]
    probs = minors / norm[..., None, None]
    eye = torch.eye(n, dtype=torch.bool, device=kernel.device)
    return torch.where(valid, probs, torch.zeros_like(probs)).masked_fill(eye, 0.0)


def elementary_symmetric(kernel, mask, k):
    r""":math:`e_k` of the eigenvalues of the valid block of ``kernel`` ``[B, T, T]``."""
    m = mask.to(kernel.dtype)
    lm = kernel * m.unsqueeze(-1) * m.unsqueeze(-2)
    n = kernel.size(-1)
    upper = torch.ones(n, n, dtype=torch.bool, device=kernel.device).triu(1)
    minors = dpatt.pair_minors(lm) if k == 2 else triple_minor_sums(lm)
    total = (minors * upper).sum((-1, -2))
    return total if k == 2 else total / 3.0


class ResearchDPPAttention(dpatt.DiversityDPPAttention):
    """PAtt's attention with the paper's forms (``diagonal: one``, ``sampler: linear``,
    ``row_normalize: False``) and the leaky ``ground_set: sequence``."""

    def __init__(
        self,
        n_heads,
        hidden_size,
        hidden_dropout_prob,
        attn_dropout_prob,
        layer_norm_eps,
        k,
        lam,
        triple_samples,
        jitter,
        diagonal,
        sampler,
        row_normalize,
        ground_set,
        diversity_form="ratio",
    ):
        # the product attention's layers, built in its order (the same random draws),
        # the Sampler's bias only with the official squared Sampler (eq. 8 has none)
        nn.Module.__init__(self)
        self.n_heads, self.k, self.lam = n_heads, k, lam
        self.triple_samples, self.jitter = int(triple_samples), jitter
        self.diagonal, self.sampler_form = diagonal, sampler
        self.row_normalize, self.ground_set = row_normalize, ground_set
        self.diversity_form = diversity_form
        self.query = nn.Linear(hidden_size, hidden_size, bias=sampler == "squared")
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.attn_dropout = nn.Dropout(attn_dropout_prob)
        self.out_dropout = nn.Dropout(hidden_dropout_prob)

    def sampler(self, hidden):
        sampler = patt.split_heads(self.query(hidden), self.n_heads)
        return sampler * sampler if self.sampler_form == "squared" else sampler

    def pair_weights(self, kernel, valid, masks):
        """PAtt's (no category kernel in ``masks``), DPAtt's ratio or product form."""
        if not isinstance(masks, dpatt.DiversityMasks):
            return patt.DPPAttention.pair_weights(self, kernel, valid, masks)
        if self.diversity_form == "product":
            category = masks.category.to(kernel.dtype)
            return causal_product_numerators(kernel, category, valid, self.k, masks)
        return super().pair_weights(kernel, valid, masks)

    def logits(self, sampler, valid, masks):
        if self.ground_set == "sequence":
            if isinstance(masks, dpatt.DiversityMasks):
                raise ValueError(
                    "ground_set='sequence' takes no category kernel (DPAtt)"
                )
            kernel = sampler @ sampler.transpose(-1, -2)
            everywhere = torch.ones_like(valid).unsqueeze(1)
            logits = dpp_pair_probabilities(kernel, everywhere, self.k) * -self.lam
            if self.diagonal == "kernel":
                diag = self.lam * (sampler * sampler).sum(-1)
                logits = logits - torch.diag_embed(diag)
            return logits
        logits = super().logits(sampler, valid, masks)
        if self.diagonal == "one":  # D_tt = 1: no self logit
            logits = logits + torch.diag_embed(self.lam * (sampler * sampler).sum(-1))
        return logits

    def forward(self, hidden, attention_mask, valid, masks):
        if self.row_normalize:
            return super().forward(hidden, attention_mask, valid, masks)
        logits = self.logits(self.sampler(hidden), valid, masks)
        allowed = attention_mask == 0  # the additive mask's allowed keys
        weights = torch.exp(torch.where(allowed, logits, 0.0)) * allowed
        probs = self.attn_dropout(weights)
        output = patt.merge_heads(probs @ patt.split_heads(hidden, self.n_heads))
        output = hidden + self.out_dropout(self.dense(output))
        return self.LayerNorm(output)


class PAttForms:
    """Mixin of PAtt and DPAtt: the paper's forms of the probabilistic attention (and,
    with :class:`SequenceGroundSet`, PAtt's leaky sequence ground set)."""

    options = {
        "dpp_row_normalize": ResearchOpt(
            True,
            Flag(),
            "divide every row of D by its sum (official; False: the paper's raw weights)",
            research="the paper's form alone: an ablation against the official code's",
        ),
        "dpp_diagonal": ResearchOpt(
            "kernel",
            OneOf("one", "kernel"),
            "kernel: D_tt = exp(-lambda L_tt) (official); one: D_tt = 1 (eq. 7)",
            research="the paper's form alone: an ablation against the official code's",
        ),
        "dpp_sampler": ResearchOpt(
            "squared",
            OneOf("linear", "squared"),
            "squared: S = (M W + b)^2 elementwise (official); linear: S = M W (eq. 8)",
            research="the paper's form alone: an ablation against the official code's",
        ),
    }

    def __init__(self, config, dataset):
        declared = declared_options(type(self))
        self._forms = {"dpp_ground_set": "prefix"}
        self._forms.update(
            {k: _option(self, config, k) for k in declared if k in FORM_KEYS}
        )
        super().__init__(config, dataset)
        if self._forms["dpp_ground_set"] == "sequence":
            # the k-DPP of a sequence reads every position of its padded row: batches
            # keep their full length MAX_ITEM_LIST_LENGTH (no trimming, no length groups)
            self.trim_batch = False
            self.length_grouping = False

    def attention_layer(self):
        forms = self._forms
        return ResearchDPPAttention(
            self.n_heads,
            self.hidden_size,
            self.hidden_dropout_prob,
            self.attn_dropout_prob,
            self.layer_norm_eps,
            k=self.dpp_k,
            lam=self.dpp_lambda,
            triple_samples=self.dpp_triple_samples,
            jitter=getattr(self, "dpp_cat_jitter", 0.1),  # DPAtt's
            diagonal=forms["dpp_diagonal"],
            sampler=forms["dpp_sampler"],
            row_normalize=forms["dpp_row_normalize"],
            ground_set=forms["dpp_ground_set"],
            diversity_form=getattr(self, "diversity_form", "ratio"),  # DPAtt's
        )

    def position_ids(self, item_seq_len, length):
        """With the sequence ground set, the padding of every row numbered ``0 ..
        T-n-1``, as the left-padded official code numbers it (the items keep theirs)."""
        positions = super().position_ids(item_seq_len, length)
        if self._forms["dpp_ground_set"] != "sequence":
            return positions
        steps = torch.arange(length, device=item_seq_len.device).unsqueeze(0)
        padding = steps - item_seq_len.unsqueeze(1)
        return torch.where(steps < item_seq_len.unsqueeze(1), positions, padding)


class SequenceGroundSet:
    """Mixin of PAtt (before :class:`PAttForms`): ``dpp_ground_set``."""

    options = {
        "dpp_ground_set": ResearchOpt(
            "prefix",
            OneOf("prefix", "sequence"),
            "prefix: query t's k-DPP on the valid prefix; sequence: on every position "
            "of the padded sequence (full-length batches)",
            research="sequence is a LEAK (row t reads the items after t), as the "
            "official PAtt normalizer",
        ),
    }

    @classmethod
    def trims_batches(cls, config):
        # the k-DPP of a sequence reads every position of its padded row
        sequence = _option(cls, config, "dpp_ground_set") == "sequence"
        return not sequence and super().trims_batches(config)

    option_rules = (
        lambda c: (
            "dpp_ground_set: sequence computes the exact marginals only: set "
            "dpp_triple_samples: 0 with it"
            if c["dpp_ground_set"] == "sequence" and c["dpp_triple_samples"]
            else None
        ),
    )


#: the options of the forms of PAtt's attention
FORM_KEYS = ("dpp_row_normalize", "dpp_diagonal", "dpp_sampler", "dpp_ground_set")


# ---------------------------------------------------------------------- PARec
class PARecForms:
    """Mixin of PARec and FPARec: the official code's input position embedding and its
    one FFN after all attention sublayers."""

    options = {
        "add_position_embedding": ResearchOpt(
            False,
            Flag(),
            "add a learned position embedding to the input (the paper has none)",
            research="the official code always adds one",
        ),
        "ffn_placement": ResearchOpt(
            "block",
            OneOf("block", "after"),
            "block: an FFN in every block (the paper); after: one FFN after all blocks",
            research="after is the official code's",
        ),
    }

    def __init__(self, config, dataset):
        super().__init__(config, dataset)
        self.add_position_embedding = _option(self, config, "add_position_embedding")
        self.ffn_placement = _option(self, config, "ffn_placement")
        self.position_embedding = self.feed_forward = None
        if self.add_position_embedding:
            self.position_embedding = nn.Embedding(
                self.max_seq_length, self.hidden_size
            )
            self.position_embedding.apply(self._init_weights)
        if self.ffn_placement == "after":
            self.feed_forward = self.trm_encoder.layer[0].feed_forward
            for layer in self.trm_encoder.layer:
                layer.feed_forward = nn.Identity()

    def encode(self, item_seq, item_seq_len):
        positions = self.position_ids(item_seq_len, item_seq.size(1))
        attention_mask = self.get_attention_mask(item_seq)
        hidden = self.item_embedding(item_seq)
        if self.position_embedding is not None:
            hidden = hidden + self.position_embedding(positions)
        hidden = self.trm_encoder(
            self.dropout(hidden), attention_mask, positions, self.position_alignment
        )
        if self.feed_forward is not None:
            hidden = self.feed_forward(hidden)
        return self.LayerNorm(hidden)


class AWRSRForms:
    """Mixin of AWRSR: STOSA's forms one by one on its STOSA backbone."""

    options = STOSAForms.options
    backbones = {
        **MODELS["AWRSR"].backbones,
        "STOSA": type(
            "RefinedSTOSAResearch",
            (STOSAForms, MODELS["AWRSR"].backbones["STOSA"]),
            {"__module__": __name__},
        ),
    }


#: the forms each model's research class adds, besides every model's
MODEL_FORMS = {
    "STOSA": (STOSAForms,),
    "AWRSR": (AWRSRForms,),
    "PAtt": (SequenceGroundSet, PAttForms),
    "DPAtt": (PAttForms,),
    "PARec": (PARecForms,),
    "FPARec": (PARecForms,),
}


def _research_class(name):
    mixins = (HeldoutNegatives, FullLengthBatches, *MODEL_FORMS.get(name, ()))
    return type(f"{name}Research", (*mixins, MODELS[name]), {"__module__": __name__})


#: product model name -> its research class
RESEARCH_MODELS = {name: _research_class(name) for name in MODELS}


def research_keys(name):
    """The options the research class of model ``name`` adds to the product's."""
    product = declared_options(MODELS[name])
    return set(declared_options(RESEARCH_MODELS[name])) - set(product)


def model_for(name, overrides):
    """What the runner builds for a variant: the research class of model ``name`` where
    ``overrides`` set one of its research-wing options, else the product model's name.
    """
    if name in RESEARCH_MODELS and research_keys(name) & set(overrides):
        return RESEARCH_MODELS[name]
    return name
