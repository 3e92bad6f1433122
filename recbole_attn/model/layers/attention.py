r"""THE multi-head self-attention of recbole_attn.

Every model of the package attends through :class:`MultiHeadSelfAttention`, whose steps are
explicit and replaceable:

1. projections: ``query`` / ``key`` (those the score module asks for), ``value`` (or the
   input itself);
2. a **score module** (:class:`AttentionScore`) turns them into logits ``[B, h, Q, L]``:
   scaled dot product (SASRec), :math:`-W_2^2` (STOSA), k-DPP dependencies (PAtt), ...;
3. masked normalization under ONE boolean mask (query t reads key k iff ``k <= t`` and k is
   a real item), with exact zeros where masked: a softmax, or for mechanisms whose weights
   are not normalized (``AttentionScore.normalize = False``) :math:`\exp(\text{logits})`;
4. an optional **refiner** (:class:`AttentionRefiner`) of the normalized matrix;
5. aggregation: :math:`A V` per stream, or :math:`(A \circ A) V` for a stream aggregated
   with the squared weights (STOSA's covariances);
6. the output sublayer: post-LN :math:`\mathrm{LN}(x + \mathrm{Dropout}(z W_O))` (SASRec),
   or pre-LN :math:`x + \mathrm{Dropout}(z W_O)` with the projections reading
   :math:`\mathrm{LN}(x)`; the output projection :math:`W_O` is optional.

A new mechanism is a score or refiner module (a file under ``layers/``), not a new
attention class. Parameter names follow RecBole's ``MultiHeadAttention`` (``query``,
``key``, ``value``, ``dense``, ``LayerNorm``), so a RecBole SASRec checkpoint loads into
:class:`~recbole_attn.model.SASRecAP`. Multi-stream attention (STOSA's mean and covariance
streams) keeps one module per stream under the same names (``query.mean``, ``query.cov``).
"""

import torch
from torch import nn

from recbole_attn.model.layers.context import select_rows
from recbole_attn.model.layers.masks import masked_softmax


def split_heads(x, n_heads):
    """``[B, L, d]`` -> ``[B, h, L, d/h]``."""
    batch, length, dim = x.shape
    return x.view(batch, length, n_heads, dim // n_heads).transpose(1, 2)


def merge_heads(x):
    """``[B, h, L, d_h]`` -> ``[B, L, h d_h]``."""
    batch, heads, length, dim = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * dim)


class AttentionScore(nn.Module):
    """A score module: the logits of query rows over keys, ``[B, h, Q, L]``.

    ``forward(query, key, context, rows, inputs)`` receives the per-head projections the
    module asked for in :attr:`projections` (``[B, h, Q, d_h]`` and ``[B, h, L, d_h]``,
    tuples of them for multi-stream attention, None for a projection not asked for), the
    :class:`~recbole_attn.model.layers.context.SequenceContext`, ``rows`` (None: every
    position is a query; ``[B]``: one query position per sequence) and ``inputs``, what the
    projections read (``[B, L, d]``, for mechanisms with projections of their own).
    Entries outside the attention mask may hold anything: the normalization zeroes them.
    """

    #: which of the attention's input projections the score reads
    projections = ("query", "key")
    #: whether those projections have a bias
    projection_bias = True
    #: True: masked softmax of the logits; False: exp(logits) on the mask, unnormalized
    normalize = True

    def forward(self, query, key, context, rows=None, inputs=None):
        raise NotImplementedError


class AttentionRefiner(nn.Module):
    """A refiner of the normalized attention matrix: ``forward(probs, mask, context)``
    returns the matrix the values are aggregated with (masked entries exactly 0)."""

    #: row t of the result reads other rows of ``probs``: then the last-position
    #: shortcut (computing only the last query row) is not exact
    mixes_rows = True

    def forward(self, probs, mask, context):
        raise NotImplementedError


def masked_weights(logits, mask, normalize):
    """Step 3: softmax over the allowed keys, or ``exp(logits)`` there; 0 elsewhere."""
    if normalize:
        return masked_softmax(logits, mask)
    return torch.exp(torch.where(mask, logits, 0.0)) * mask


class MultiHeadSelfAttention(nn.Module):
    """Multi-head self-attention with a replaceable score module and refiner.

    Args:
        score (AttentionScore): the mechanism's score module.
        n_heads, hidden_size, hidden_dropout_prob, attn_dropout_prob, layer_norm_eps:
            RecBole's meanings.
        streams (tuple): ``None`` for one input stream (a tensor), or ``((name, power),
            ...)`` for several (a tuple of tensors in that order), each aggregated with
            :math:`A^{\\circ power}` (STOSA: ``(("mean", 1), ("cov", 2))``).
        outputs (tuple): the names of the streams whose outputs are computed (default:
            every stream); the others only feed the score (their query and key
            projections), and no value, output projection or LayerNorm is built for
            them. The forward then returns the output streams only (post-LN only).
        value (bool): a value projection; False aggregates the input itself (PAtt).
        output_dense (bool): the output projection :math:`W_O` (``dense``).
        pre_ln (bool): pre-LN sublayer (projections read ``LN(x)``, output
            ``x + Dropout(.)``); default post-LN ``LN(x + Dropout(.))``.
        refiner (AttentionRefiner): optional refiner of the normalized matrix.
    """

    def __init__(
        self,
        score,
        n_heads,
        hidden_size,
        hidden_dropout_prob,
        attn_dropout_prob,
        layer_norm_eps,
        streams=None,
        value=True,
        output_dense=True,
        pre_ln=False,
        refiner=None,
        outputs=None,
    ):
        super().__init__()
        self.n_heads = n_heads
        self.stream_names = tuple(name for name, _ in streams) if streams else None
        powers = dict(streams) if streams else {None: 1}
        self.output_names = tuple(outputs) if outputs else self.stream_names
        if self.output_names != self.stream_names and pre_ln:
            raise ValueError("a pre-LN attention normalizes every stream it reads")
        self.outputs = (
            tuple(self.stream_names.index(n) for n in self.output_names)
            if self.stream_names
            else (0,)
        )
        self.powers = tuple(powers[n] for n in (self.output_names or [None]))
        self.pre_ln = pre_ln
        self.score = score
        self.refiner = refiner

        def per_stream(make, names):
            if self.stream_names is None:
                return make()
            return nn.ModuleDict({name: make() for name in names})

        def linear(names, bias=True):
            return per_stream(
                lambda: nn.Linear(hidden_size, hidden_size, bias=bias), names
            )

        for name in ("query", "key"):
            setattr(
                self,
                name,
                (
                    linear(self.stream_names, score.projection_bias)
                    if name in score.projections
                    else None
                ),
            )
        self.value = linear(self.output_names) if value else None
        self.dense = linear(self.output_names) if output_dense else None
        self.LayerNorm = per_stream(
            lambda: nn.LayerNorm(hidden_size, eps=layer_norm_eps), self.output_names
        )
        self.attn_dropout = nn.Dropout(attn_dropout_prob)
        self.out_dropout = nn.Dropout(hidden_dropout_prob)

    @property
    def mixes_rows(self):
        """Whether a query row's output reads other query rows (no last-row shortcut)."""
        return self.refiner is not None and self.refiner.mixes_rows

    def _map(self, module, xs):
        """Apply a (per-stream) module to the tuple of streams ``xs``."""
        if module is None:
            return xs
        if isinstance(module, nn.ModuleDict):
            return tuple(m(x) for m, x in zip(module.values(), xs))
        return (module(xs[0]),)

    def _heads(self, module, xs):
        """Per-head projections ``[B, h, L, d_h]`` (a tensor, or a tuple per stream)."""
        if module is None:
            return None
        heads = tuple(split_heads(x, self.n_heads) for x in self._map(module, xs))
        return heads if self.stream_names else heads[0]

    def forward(self, hidden, context, rows=None):
        """Outputs ``[B, L, d]`` at every position, or ``[B, 1, d]`` at ``rows`` ``[B]``
        (one query position per sequence; exact unless the refiner mixes rows)."""
        if rows is not None and self.mixes_rows:
            raise ValueError(
                "this attention's refiner mixes query rows: it cannot compute one row"
            )
        xs = hidden if self.stream_names else (hidden,)
        normed = self._map(self.LayerNorm, xs) if self.pre_ln else xs
        queries = select_rows(normed, rows)
        logits = self.score(
            self._heads(self.query, queries),
            self._heads(self.key, normed),
            context,
            rows,
            inputs=normed if self.stream_names else normed[0],
        )
        mask = context.attention_mask
        if rows is not None:
            mask = mask[torch.arange(mask.size(0), device=mask.device), :, rows]
            mask = mask.unsqueeze(2)  # [B, 1, 1, L]
        probs = masked_weights(logits, mask, self.score.normalize)
        if self.refiner is not None:
            if context.record:
                context.unrefined.append(probs)
            probs = self.refiner(probs, mask, context)
        if context.record:
            context.attention.append(probs)
        probs = self.attn_dropout(probs)
        values = self._map(self.value, tuple(normed[i] for i in self.outputs))
        outputs = []
        for value, power in zip(values, self.powers):
            weights = probs if power == 1 else probs**power
            outputs.append(merge_heads(weights @ split_heads(value, self.n_heads)))
        outputs = self._map(self.dense, tuple(outputs))
        residuals = select_rows(tuple(xs[i] for i in self.outputs), rows)
        outputs = tuple(x + self.out_dropout(z) for x, z in zip(residuals, outputs))
        if not self.pre_ln:
            outputs = self._map(self.LayerNorm, outputs)
        return outputs if self.stream_names else outputs[0]
