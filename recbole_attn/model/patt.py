r"""
PAtt, DPAtt
################################################

Reference:
    Yuli Liu, Christian Walder, Lexing Xie and Yiqun Liu. "Probabilistic Attention for
    Sequential Recommendation." in KDD 2024.

Reference code:
    https://github.com/l-lyl/PAtt (read for its behaviour only; docs/patt.md)

PAtt^k / DPAtt^k with ``dpp_k: 2`` (dual dependency, eq. 7) or ``dpp_k: 3`` (triple
dependency, eq. 12). The mechanism is the score module
:class:`~recbole_attn.model.layers.dpp_score.DPPScore` of the shared attention.
"""

from torch import nn

from recbole_attn.config_check import Flag, Integer, Number, OneOf

from recbole_attn.data.categories import check_category_field, item_category_table
from recbole_attn.data.histories import training_histories
from recbole_attn.model.item_embedding import ItemEmbeddingRecommender
from recbole_attn.options import Default, Opt
from recbole_attn.model.category_kernel import learn_category_kernel
from recbole_attn.model.layers import DPPScore
from recbole_attn.model.layers.dpp_diversity import sequence_category_kernel
from recbole_attn.model.layers.dpp_score import CATEGORY_KERNEL, DIAGONALS, SAMPLERS

#: why a single form is research-only: PAtt's product defaults are the official code's
_FORM = "the paper's form of one piece alone: an ablation against the official code's"


class PAtt(ItemEmbeddingRecommender):
    r"""PAtt replaces the Query-Key-Value attention of SASRec by a Sampler
    :math:`S = M W^S` (per head) and a sequence-specific k-DPP with kernel
    :math:`L^{(S)} = S S^\top` (eq. 8). The attention weight of key r for query t is
    :math:`D_{tr} = \exp(-\lambda P^k(r, t))` (eq. 7), where :math:`P^2(r,t)` is the
    2-DPP probability of :math:`\{r, t\}` and :math:`P^3(r,t) = \sum_x P^3(\{r,t,x\})`
    (eq. 12); the output is :math:`Z = D M` (eq. 9: the value is the input M itself).
    Embedding, FFN, residuals, layer norms and dropout are SASRec's.

    NOTE:
        Deviations from the paper, each a documented choice. The defaults follow the
        official code (github.com/l-lyl/PAtt) wherever it departs from the paper, but
        for its two leaks: on Beauty under the official README's settings this was the
        best leak-free variant on validation (docs/patt.md, "Against the official code").

        * Ground set: for query t the k-DPP lives on the valid prefix :math:`\{x \le t\}`
          (padding and future items are in no normalizer). The paper builds one k-DPP per
          sequence and keeps only the lower triangle of D; the official normalizer also
          sums over padding and future positions, a train-time leak that only the
          research wing reproduces (``experiments/research.py``).
        * Diagonal: :math:`D_{tt} = \exp(-\lambda L_{tt})`, the official self logit
          (``dpp_diagonal: kernel``; the paper's eq. 7 has :math:`D_{tt} = 1`:
          ``one``).
        * Sampler: :math:`S = (M W^S + b)^2` elementwise, as the official code
          (``dpp_sampler: squared``; eq. 8's linear :math:`S = M W^S`: ``linear``).
        * ``dpp_row_normalize: True`` (default) divides every row of D by its sum. With
          the default :math:`\lambda = 1/\sqrt{d_h}` (``dpp_lambda: 0.125`` at d 64, one
          head) this is the official softmax of :math:`-P/\sqrt{d_h}` over the prefix;
          the paper writes Z = D M with raw weights (False). The paper's
          :math:`\lambda \in [0.5, 16]` and our earlier 64 are options. Since
          :math:`0 \le P \le 1`, at 0.125 the weights of a row's earlier keys differ by
          at most :math:`e^{0.125}` = 1.13x: the attention is close to a mean over the
          prefix with its own self weight (docs/patt.md, "Why DPAtt now equals
          PAtt").
        * k = 3 is exact by default (``dpp_triple_samples: 0``): the sum over every third
          item in closed form (a few batched matmuls, no determinants). The paper's
          sampled variant (4 random third items per pair) is ``dpp_triple_samples: 4``; we
          scale the sampled sum by (number of candidates)/(samples) so that it is an
          unbiased estimate of the exact marginal, sample only while training and use the
          exact marginal in evaluation (deterministic scores).
        * Multi-head: each head has its own Sampler slice and attends to its slice of M.
          After the attention: dense, dropout, residual, post-LN (the paper keeps
          SASRec's block; its parameter count "2 d^2 fewer than SASRec" implies the
          output dense).
        * Loss: BCE with one uniform negative per position, as the official code
          (``loss_type: BCE``, default); the official sampler also avoids the user's
          held-out items, a leak only the research wing reproduces.
          ``CE`` (softmax over all items), ``BPR`` and ``SSM`` are options. All-position
          training (``training_mode: all_position``) by default.
        * Position ids count back from the most recent item, as the left-padded official
          code (``position_alignment: last``; ``first``: from the first item).
        * Settings: the paper's T 30 with the official README's dropout 0.4 (the paper
          searches {0.3, 0.5, 0.7} and sets 0.5); 0.4 scored higher on validation on
          Beauty and ml-100k and level on Office (docs/patt.md, "The default").
    """

    yaml_header = """PAtt (Liu et al., KDD 2024): probabilistic k-DPP attention, Sampler only, value = input.
PAtt^2: dpp_k: 2 (default); PAtt^3: --dpp_k=3 (exact marginal over all third items;
--dpp_triple_samples=4 for the paper's sampled variant). Paper settings: d 64, T 30,
dropout {0.3, 0.5, 0.7}, lr 1e-3, early stopping on NDCG@20 (patience 10). The mechanism
follows the official code but its two leaks (docs/patt.md)."""
    options = {
        "dpp_k": Opt(
            2,
            OneOf(2, 3, hint="2: PAtt^2, pairs; 3: PAtt^3, triples"),
            "subset size: 2 (dual) or 3 (triple dependency)",
        ),
        "dpp_lambda": Opt(
            0.125,
            Number("positive"),
            "lambda of D = exp(-lambda P): 1/sqrt(d_h), the official softmax scale",
        ),
        "dpp_triple_samples": Opt(
            0,
            Integer(0),
            "k=3 only: 0 = exact sum over all third items; s > 0 = s sampled (training)",
        ),
        "dpp_cat_jitter": Opt(
            0.1,
            Number("probability"),
            "DPAtt only: beta of C = (1-beta) V V^T + beta I",
        ),
        "dpp_row_normalize": Opt(
            True,
            Flag(),
            "divide every row of D by its sum (official; False: the paper's raw weights)",
            research=_FORM,
        ),
        "dpp_diagonal": Opt(
            "kernel",
            OneOf(*DIAGONALS, hint="one: D_tt = 1 (eq. 7); kernel: exp(-lambda L_tt)"),
            "kernel: D_tt = exp(-lambda L_tt) (official); one: D_tt = 1 (eq. 7)",
            research=_FORM,
        ),
        "dpp_sampler": Opt(
            "squared",
            OneOf(*SAMPLERS, hint="linear: S = M W (eq. 8); squared: (M W + b)^2"),
            "squared: S = (M W + b)^2 elementwise (official); linear: S = M W (eq. 8)",
            research=_FORM,
        ),
    }
    defaults = {
        "n_layers": 1,
        "n_heads": 1,
        "inner_size": Default(256, "official code: 4d"),
        "hidden_dropout_prob": Default(
            0.4,
            "the official README's: higher on validation than the paper's 0.5 on "
            "Beauty and ml-100k, level on Office (docs/patt.md)",
        ),
        "attn_dropout_prob": 0.0,
        "hidden_act": Default("gelu", "official code"),
        "loss_type": Default("BCE", "one negative per position (paper, official)"),
        "MAX_ITEM_LIST_LENGTH": Default(
            30, "T, the paper's; long histories want more (ml-100k: 50, docs/patt.md)"
        ),
        "training_mode": "all_position",
        "valid_metric": Default("NDCG@20", "the paper's early stopping"),
        "position_alignment": Default("last", "official left padding"),
    }
    option_rules = (
        lambda c: (
            f"dpp_triple_samples ({c['dpp_triple_samples']}) samples third items, which "
            f"only dpp_k: 3 has; set dpp_triple_samples: 0 with dpp_k: {c['dpp_k']}"
            if c["dpp_triple_samples"] and c["dpp_k"] != 3
            else None
        ),
        lambda c: (
            f"a {c['dpp_k']}-DPP needs a ground set of at least {c['dpp_k']} items but "
            f"MAX_ITEM_LIST_LENGTH is {c['MAX_ITEM_LIST_LENGTH']}; raise "
            "MAX_ITEM_LIST_LENGTH or lower dpp_k"
            if c["MAX_ITEM_LIST_LENGTH"] < c["dpp_k"]
            else None
        ),
    )
    #: the k-DPP's ground set of query t: its valid prefix (the research wing's leak
    #: reproduces the official code's whole padded sequence)
    dpp_ground_set = "prefix"

    def __init__(self, config, dataset):
        super(PAtt, self).__init__(config, dataset)

        # define layers and loss
        self.item_embedding = nn.Embedding(
            self.n_items, self.hidden_size, padding_idx=0
        )
        self.position_embedding = nn.Embedding(self.max_seq_length, self.hidden_size)
        self.LayerNorm = nn.LayerNorm(self.hidden_size, eps=self.layer_norm_eps)
        self.dropout = nn.Dropout(self.hidden_dropout_prob)
        self.trm_encoder = self.transformer_encoder(
            lambda: DPPScore(
                k=self.dpp_k,
                lam=self.dpp_lambda,
                triple_samples=self.dpp_triple_samples,
                row_normalize=self.dpp_row_normalize,
                jitter=self.dpp_cat_jitter,
                diversity_form=self.diversity_form(),
                diagonal=self.dpp_diagonal,
                sampler=self.dpp_sampler,
                ground_set=self.dpp_ground_set,
            ),
            value=False,  # eq. 9: Z = D M, the value is the input itself
        )

        # parameters initialization
        self.apply(self._init_weights)

    def diversity_form(self):
        """PAtt has no category kernel: the option does not apply."""
        return "ratio"

    def encode(self, context):
        return self.trm_encoder(self.embed_sequence(context), context)


class DPAtt(PAtt):
    r"""DPAtt: PAtt with the diversity-aware kernel (section 3.2.4). A k-subset Y of the
    prefix gets the unnormalized weight :math:`\det L_Y / \det C_Y` (the quantity of the
    paper's Appendix A.1, eq. 13-14), where C is a category-scope kernel over all items:
    subsets spanning more categories (larger :math:`\det C_Y`) get lower probability,
    hence higher attention :math:`\exp(-\lambda P)`.

    C is a low-rank kernel :math:`C = (1-\beta) \hat V \hat V^\top + \beta I` with
    unit-norm item vectors :math:`\hat v_i \in R^{r}` (``dpp_cat_rank``), so
    :math:`C_{ii} = 1` and :math:`\beta^{|Y|} \le \det C_Y \le 1` (``dpp_cat_jitter`` =
    :math:`\beta`). **C is trained in a pre-stage** when the model is built, with the
    paper's eq. 10, :math:`\max \sum \log\det C_{A^+} - \log\det C_{A^-}`, on pairs of
    (more diverse, less diverse) item sets of size ``dpp_cat_set_size`` drawn from the
    TRAINING sequences (``dpp_cat_draws`` random subsets per sequence; the one with the
    most distinct categories is A+, the one with the fewest A-), ``dpp_cat_steps`` Adam
    steps at ``dpp_cat_lr``. It is then frozen (a buffer: saved with the model, no
    gradient from the recommendation loss). Categories are the item feature
    ``category_field`` (token_seq, default ``categories``).

    The category kernel acts through P only, so at the default :math:`\lambda` = 0.125
    it reweights a row's earlier keys by at most :math:`e^{0.125}`: trained DPAtt and
    PAtt rank alike (docs/patt.md, "Why DPAtt now equals PAtt"); a larger
    ``dpp_lambda`` gives it room.

    NOTE:
        Deviations, besides PAtt's:

        * The paper's composite kernel :math:`T = L C_S^{-1}` (eq. 11) is not symmetric and
          its principal minors are in general not :math:`\det L_Y/\det C_Y` (they can be
          negative); by default (``dpp_diversity_form: ratio``) we use
          :math:`\det L_Y / \det C_Y`, the measure the appendix proves the diversity
          property for. ``dpp_diversity_form: product`` uses the paper's kernel on the
          ground set of query t, :math:`T^{(t)} = L_{\le t} C_{\le t}^{-1}` (inverse of
          the prefix block, not a restriction of :math:`L C^{-1}`: no future item), with
          pair quantities clamped at 0 and normalized by the sum of the clamped ones
          (proper, bounded probabilities; exact where no minor is negative). Cost: one
          LU solve per prefix (O(B T^4)) and O(B H T^3) memory, so meant for T <= 50;
          not combinable with ``dpp_triple_samples``.
        * C's item vectors are learned from set pairs chosen by their category counts;
          the official pipeline learns a logistic-DPP kernel offline and does not use it
          in attention.
        * DPAtt^3 exact needs all 3x3 minors of C and L (O(T^3) memory per head); the
          sampled variant (``dpp_triple_samples > 0``) is O(T^2 s) and its per-prefix
          normalizer is built from the sampled weights.
    """

    needs_item_categories = True
    yaml_header = """DPAtt (Liu et al., KDD 2024): PAtt with the diversity-aware kernel, subset weight
det(L_Y) / det(C_Y) (or the paper's product kernel: dpp_diversity_form). C is learned
in a pre-stage with eq. 10 from training histories and item categories (category_field),
then frozen. DPAtt^3: --dpp_k=3. Every other key comes from PAtt.yaml (loaded first)."""
    options = {
        "dpp_cat_rank": Opt(32, Integer(1), "rank r of C"),
        "dpp_cat_set_size": Opt(
            4, Integer(2), "size of the (diverse, less diverse) training sets"
        ),
        "dpp_cat_draws": Opt(
            8, Integer(1), "random subsets per training history and step"
        ),
        "dpp_cat_steps": Opt(200, Integer(0), "Adam steps of the pre-stage"),
        "dpp_cat_lr": Opt(0.05, Number("positive"), "learning rate of the pre-stage"),
        "dpp_diversity_form": Opt(
            "ratio",
            OneOf("ratio", "product"),
            "ratio: subset weight det(L_Y)/det(C_Y); product: k-DPP of the paper's "
            "T = L_{<=t} C_{<=t}^-1 per prefix, minors clamped at 0, O(B T^4) time",
        ),
    }
    defaults = {
        "category_field": Default(
            "categories", "token_seq item feature with the categories (ml-100k: class)"
        )
    }
    option_rules = (
        lambda c: (
            "dpp_diversity_form: product is exact only: set dpp_triple_samples: 0 with "
            "it, or use dpp_diversity_form: ratio"
            if c["dpp_diversity_form"] == "product" and c["dpp_triple_samples"]
            else None
        ),
    )

    def __init__(self, config, dataset):
        super(DPAtt, self).__init__(config, dataset)

        field = check_category_field(
            config, dataset, "DPAtt needs", "use PAtt, which needs no categories"
        )
        item_categories = item_category_table(dataset, field)
        histories, lengths = training_histories(dataset).padded(self.max_seq_length)
        vectors = learn_category_kernel(
            item_categories,
            histories,
            lengths,
            rank=self.dpp_cat_rank,
            set_size=self.dpp_cat_set_size,
            draws=self.dpp_cat_draws,
            steps=self.dpp_cat_steps,
            lr=self.dpp_cat_lr,
            jitter=self.dpp_cat_jitter,
            seed=config["seed"],
        )
        self.register_buffer("category_vectors", vectors)

    def diversity_form(self):
        return self.dpp_diversity_form

    def encode(self, context):
        context.features[CATEGORY_KERNEL] = sequence_category_kernel(
            self.category_vectors, context.item_seq, self.dpp_cat_jitter
        )
        return super().encode(context)
