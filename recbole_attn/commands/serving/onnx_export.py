"""A trained model's scoring function as an ONNX graph and the JSON file beside it: an
item sequence ``item_seq [batch, length]`` (right-padded item ids, 0 = padding, length
<= T) and its lengths ``item_seq_len [batch]`` in (RKSA: also ``user [batch]``), the
scores ``scores [batch, n_items]`` of every item id out, as the model scores them in
evaluation (``full_sort_predict``). Batch size and length are dynamic. The export runs
the graph on ONNX Runtime against PyTorch before it writes anything."""

import contextlib
import json
import types

import numpy as np
import torch

from recbole_attn.errors import RecboleAttnError
from recbole_attn.commands.serving.scorers import (
    SIDECAR_FORMAT,
    graph_length,
    onnx_session,
    torch_scores,
)

#: the ONNX operator set written (ONNX Runtime >= 1.16 runs it)
OPSET = 17
#: float32 parity of the export's own check (the tests use the same)
RTOL, ATOL = 1e-4, 1e-5
#: the RecBole models exported besides ours (their full_sort_predict reads only the
#: sequence and its length)
RECBOLE_MODELS = ("SASRec",)

OUTPUTS_MEANING = (
    "scores[b, j]: the model's score of item id j after sequence b (higher is better); "
    "item id j is item_tokens[j], id 0 is padding and never recommended"
)


class ScoreFunction(torch.nn.Module):
    """``(item_seq, item_seq_len[, user]) -> scores [B, n_items]``: the model's
    evaluation scores without the batch's trimming and length groups (Python decisions
    on the values, which a traced graph would freeze)."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.reads_user = bool(getattr(model, "encode_reads_user", False))
        self.ours = hasattr(model, "_last")

    def forward(self, item_seq, item_seq_len, user=None):
        model = self.model
        if self.ours:
            return model.all_item_scores(model._last(item_seq, item_seq_len, user))
        return model.full_sort_predict(
            {model.ITEM_SEQ: item_seq, model.ITEM_SEQ_LEN: item_seq_len}
        )


def sorted_lookup(keys, queries):
    """``torch.searchsorted(keys, queries)`` (left) as a fixed number of vectorized
    bisection steps: gathers and comparisons that ONNX has (it has no searchsorted)."""
    lo = torch.zeros_like(queries)
    if keys.numel() == 0:
        return lo
    hi = torch.full_like(queries, keys.numel())
    for _ in range(max(1, int(keys.numel()).bit_length())):
        mid = torch.div(lo + hi, 2, rounding_mode="floor")
        right = (keys[mid.clamp(max=keys.numel() - 1)] < queries) & (lo < hi)
        left = ~right & (lo < hi)
        lo = torch.where(right, mid + 1, lo)
        hi = torch.where(left, mid, hi)
    return lo


@contextlib.contextmanager
def exportable_lookups(model):
    """Inside the block, RKSA's co-occurrence table finds its counts by
    :func:`sorted_lookup` (the same counts; ONNX has no searchsorted)."""
    tables = [m for m in model.modules() if hasattr(m, "lookup") and hasattr(m, "keys")]

    def lookup(table, rows, cols):
        keys = rows.long() * table.n_items + cols.long()
        if table.keys.numel() == 0:
            return torch.zeros(keys.shape, device=keys.device)
        index = sorted_lookup(table.keys, keys).clamp(max=table.keys.numel() - 1)
        return torch.where(table.keys[index] == keys, table.values[index], 0.0)

    for table in tables:
        table.lookup = types.MethodType(lookup, table)
    try:
        yield
    finally:
        for table in tables:
            del table.lookup


def exportable(model_name):
    """A one-line error unless ``model_name`` is one of ours or RecBole's SASRec."""
    from recbole_attn.plugin import MODELS

    if model_name not in MODELS and model_name not in RECBOLE_MODELS:
        names = ", ".join([*MODELS, *RECBOLE_MODELS])
        raise RecboleAttnError(
            f"export-onnx exports {names}; {model_name} is not among them (its "
            "scoring function has no tested export)"
        )


def input_names(model):
    return ["item_seq", "item_seq_len"] + (["user"] if _reads_user(model) else [])


def _reads_user(model):
    return bool(getattr(model, "encode_reads_user", False))


def example_inputs(model, batch=3):
    """Inputs of ``batch`` sequences, lengths 1..T (the tracer's example)."""
    length = model.max_seq_length
    generator = torch.Generator().manual_seed(0)
    item_seq = torch.randint(1, model.n_items, (batch, length), generator=generator)
    lengths = torch.linspace(1, length, batch).round().long()
    item_seq[torch.arange(length).unsqueeze(0) >= lengths.unsqueeze(1)] = 0
    inputs = [item_seq, lengths]
    if _reads_user(model):
        inputs.append(torch.ones(batch, dtype=torch.long))
    return tuple(inputs)


def onnx_bytes(model):
    """The ONNX graph of ``model``'s scoring function (eval mode, CPU), through
    ``torch.export`` (the tracer of ``dynamo=False`` freezes shapes these models
    compute with), batch and length dynamic (length <= T)."""
    import io
    import logging
    import warnings

    try:
        import onnxscript  # noqa: F401  (torch's exporter writes through it)
    except ImportError:
        raise RecboleAttnError(
            "export-onnx needs onnx and onnxscript; pip install 'recbole-attn[onnx]'"
        ) from None
    model = model.cpu().eval()
    names = input_names(model)
    batch = torch.export.Dim("batch")
    length = torch.export.Dim("length", max=model.max_seq_length)
    shapes = [{0: batch, 1: length}, {0: batch}, {0: batch}][: len(names)]
    quiet = logging.getLogger("torch.onnx")
    level = quiet.level
    try:
        quiet.setLevel(logging.ERROR)  # the exporter's notes (torchvision, passes)
        with (
            torch.no_grad(),
            exportable_lookups(model),
            warnings.catch_warnings(),
            contextlib.redirect_stdout(io.StringIO()),
        ):
            warnings.simplefilter("ignore")
            program = torch.onnx.export(
                ScoreFunction(model),
                example_inputs(model),
                input_names=names,
                output_names=["scores"],
                dynamic_shapes=tuple(shapes),
                opset_version=OPSET,
                dynamo=True,
                verbose=False,
            )
    except Exception as err:  # the exporter's errors name an operator or a construct
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise RecboleAttnError(
            f"{type(model).__name__}'s scoring function cannot be exported to ONNX "
            f"({type(err).__name__}: {first[:300]})"
        ) from None
    finally:
        quiet.setLevel(level)
    return program.model_proto.SerializeToString()


def check_parity(model, graph, sequences):
    """ONNX Runtime's scores of ``sequences`` (``(item_seq, item_seq_len[, user])``
    tensors) against the model's own; an error naming the largest difference."""
    session = onnx_session(graph)
    names = input_names(model)
    width = graph_length(session)
    for inputs in sequences:
        if width is not None:  # a graph of static length: right-padded to it
            item_seq = inputs[0].new_zeros(len(inputs[0]), width)
            item_seq[:, : inputs[0].size(1)] = inputs[0]
            inputs = (item_seq, *inputs[1:])
        want = torch_scores(model, *inputs)
        got = session.run(["scores"], dict(zip(names, (t.numpy() for t in inputs))))[0]
        if got.shape != want.shape or not np.allclose(got, want, RTOL, ATOL):
            diff = float(np.abs(got - want).max()) if got.shape == want.shape else None
            raise RecboleAttnError(
                f"{type(model).__name__}'s ONNX graph does not compute the model's "
                f"scores (largest difference {diff}, shapes {got.shape} and "
                f"{want.shape}); the export was not written"
            )


def sidecar(config, model, dataset, histories=None):
    """The JSON file a server reads beside the graph: the model, T, the inputs and
    outputs, the item tokens by id and (optionally) the known users' histories."""
    from recbole_attn.commands.recommend import _tokens

    out = {
        "format": SIDECAR_FORMAT,
        "model": config["model"],
        "dataset": config["dataset"],
        "max_seq_length": int(model.max_seq_length),
        "inputs": {
            "item_seq": "int64 [batch, length]: item ids, oldest first, right-padded "
            "with 0; 1 <= length <= max_seq_length (keep the last max_seq_length)",
            "item_seq_len": "int64 [batch]: the number of items of each row, >= 1",
            **(
                {"user": "int64 [batch]: the user id (user_tokens; 0: a new visitor)"}
                if _reads_user(model)
                else {}
            ),
        },
        "outputs": {"scores": OUTPUTS_MEANING},
        "item_field": dataset.iid_field,
        "item_tokens": _tokens(dataset, dataset.iid_field, range(dataset.item_num)),
    }
    if histories is not None:
        users = sorted(u for u, items in histories.items() if items)
        tokens = _tokens(dataset, dataset.uid_field, users)
        out["user_field"] = dataset.uid_field
        out["histories"] = {t: histories[u] for t, u in zip(tokens, users)}
        if _reads_user(model):
            out["user_ids"] = dict(zip(tokens, users))
    return out


def sidecar_path(onnx_path):
    """``model.onnx`` -> ``model.onnx.json``."""
    return f"{onnx_path}.json"


def parity_inputs(model, histories):
    """Real sequences for the export's check: short ones, full-length ones and a batch
    that pads both, from the users' histories (``histories``: id -> item ids)."""
    length = model.max_seq_length
    users = sorted(histories)[:64]
    seqs = [(u, histories[u][-length:]) for u in users if histories[u]]
    short = [(u, s[:1]) for u, s in seqs[:4]]
    full = [(u, s) for u, s in seqs if len(s) == length][:4]
    batches = [b for b in (short, full, seqs) if b]
    out = []
    for batch in batches:
        width = max(len(s) for _, s in batch)
        item_seq = torch.zeros(len(batch), width, dtype=torch.long)
        for row, (_, s) in enumerate(batch):
            item_seq[row, : len(s)] = torch.as_tensor(s)
        inputs = [item_seq, torch.as_tensor([len(s) for _, s in batch])]
        if _reads_user(model):
            inputs.append(torch.as_tensor([u for u, _ in batch]))
        out.append(tuple(inputs))
    return out


def export(model_file, output, histories=True, overwrite=False, config_dict=None):
    """Export the checkpoint ``model_file`` to ``output`` and its sidecar; returns
    ``(output, sidecar path, model name, dataset name)``."""
    from recbole_attn.commands.recommend import user_histories
    from recbole_attn.engine.checkpoint import load_checkpoint
    from recbole_attn.engine.quick_start import load_data_and_model
    from recbole_attn.files import refuse_existing, write_files

    paths = [output, sidecar_path(output)]
    if not overwrite:
        refuse_existing(paths, "the ONNX export")
    exportable(load_checkpoint(model_file)["model"])
    overrides = {"state": "ERROR", "show_progress": False, "device": "cpu"}
    config, model, _, splits = load_data_and_model(
        model_file, {**overrides, **(config_dict or {})}
    )
    model = model.cpu().eval()
    dataset = splits[0]._dataset
    known = user_histories(splits, "all")
    graph = onnx_bytes(model)
    check_parity(model, graph, parity_inputs(model, known))
    side = sidecar(config, model, dataset, known if histories else None)
    write_files(
        {output: graph, paths[1]: json.dumps(side, separators=(",", ":")) + "\n"},
        "the ONNX export",
        overwrite,
    )
    return output, paths[1], config["model"], config["dataset"]
