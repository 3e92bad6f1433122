"""The prediction methods of :class:`~recbole_attn.sequential.recommender.
AttnSequentialRecommender` (bound in its class): the last outputs by length group,
``predict``, ``full_sort_predict`` and the attention matrices (docs/models.md,
"Training")."""

import torch

from recbole_attn.sequential import batching
from recbole_attn.sequential.batching import map_output


def last_output(self, interaction):
    """Outputs ``[B, ...]`` at every sequence's last position, rows in their order."""
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


def forward_last(self, item_seq, item_seq_len, users):
    """The model file's ``forward`` (STOSA computes only the last rows)."""
    if self.encode_reads_user:
        return self.forward(item_seq, item_seq_len, users)
    return self.forward(item_seq, item_seq_len)


def predict(self, interaction):
    """Scores of ``interaction[ITEM_ID]``, each run of equal rows encoded once."""
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
    """Per attention layer, the ``[B, h, L, L]`` matrix it aggregated with (read by a
    hook on its ``attn_dropout``); ``refined=False``: the matrices a ``refiner``
    received. Runs in the model's current mode."""
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
