"""What a server scores with: :class:`OnnxScorer` (an exported graph and its sidecar, on
ONNX Runtime and numpy alone: no torch, no RecBole) or :class:`TorchScorer` (the
checkpoint, through the package's weights-only loader). Both answer
``scores(item_seq, item_seq_len, user) -> float32 [batch, n_items]`` and carry the
:class:`Catalog` of item tokens, T and the known users' histories."""

import json
import os
from dataclasses import dataclass, field

import numpy as np

from recbole_attn.errors import RecboleAttnError

#: the sidecar's format tag (a server refuses another)
SIDECAR_FORMAT = "recbole_attn-onnx-1"


@dataclass
class Catalog:
    """The tokens a request names, by id, and the model's input rules."""

    model: str
    dataset: str
    max_seq_length: int
    item_tokens: list  # id -> token (id 0: padding)
    histories: dict = field(default_factory=dict)  # user token -> item ids
    user_ids: dict | None = None  # user token -> id, for a model that reads users

    def __post_init__(self):
        self.item_ids = {t: i for i, t in enumerate(self.item_tokens) if i > 0}

    @property
    def n_items(self):
        return len(self.item_tokens) - 1


def onnx_session(graph, threads=None):
    """An ONNX Runtime CPU session of ``graph`` (a path or the bytes)."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise RecboleAttnError(
            "ONNX Runtime is not installed; pip install 'recbole-attn[onnx]'"
        ) from None
    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors only
    return ort.InferenceSession(
        graph, sess_options=options, providers=["CPUExecutionProvider"]
    )


def graph_length(session):
    """The sequence length a graph takes when it is fixed (a model whose export
    specialized it to T), else None (any length up to T)."""
    width = session.get_inputs()[0].shape[1]
    return width if isinstance(width, int) else None


class OnnxScorer:
    """An exported model: ``<name>.onnx`` and ``<name>.onnx.json``."""

    kind = "onnx"

    def __init__(self, path, threads=None):
        side = f"{path}.json"
        for p, what in ((path, "ONNX file"), (side, "its sidecar (export-onnx)")):
            if not os.path.isfile(p):
                raise RecboleAttnError(f"{what} not found: {p}")
        try:
            with open(side, encoding="utf-8") as f:
                meta = json.load(f)
        except (OSError, ValueError) as err:
            raise RecboleAttnError(
                f"{side} is not a readable JSON file: {err}"
            ) from None
        if not isinstance(meta, dict) or meta.get("format") != SIDECAR_FORMAT:
            raise RecboleAttnError(
                f"{side} is not a recbole-attn export sidecar (format "
                f"{SIDECAR_FORMAT}); export the model again with recbole-attn "
                "export-onnx"
            )
        self.catalog = Catalog(
            meta["model"],
            meta["dataset"],
            int(meta["max_seq_length"]),
            meta["item_tokens"],
            meta.get("histories") or {},
            meta.get("user_ids"),
        )
        try:
            self.session = onnx_session(path, threads)
        except RecboleAttnError:
            raise
        except Exception as err:  # onnxruntime's InvalidGraph, Fail, ...
            raise RecboleAttnError(
                f"{path} is not a loadable ONNX model: {err}"
            ) from None
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.width = graph_length(self.session)
        self.source = path

    def scores(self, item_seq, item_seq_len, user=None):
        if self.width is not None and item_seq.shape[1] != self.width:
            padded = np.zeros((len(item_seq), self.width), dtype=np.int64)
            padded[:, : item_seq.shape[1]] = item_seq
            item_seq = padded
        feeds = {"item_seq": item_seq, "item_seq_len": item_seq_len}
        if "user" in self.input_names:
            feeds["user"] = user
        return self.session.run(["scores"], feeds)[0]


class TorchScorer:
    """A checkpoint (or a folder's newest), on PyTorch in evaluation mode."""

    kind = "torch"

    def __init__(self, model_file, threads=None, config_dict=None):
        import torch

        from recbole_attn.commands.evaluate import newest_model_file
        from recbole_attn.commands.recommend import _tokens, user_histories
        from recbole_attn.engine.quick_start import load_data_and_model

        model_file = newest_model_file(str(model_file))
        overrides = {"state": "ERROR", "show_progress": False, "device": "cpu"}
        config, model, _, splits = load_data_and_model(
            model_file, {**overrides, **(config_dict or {})}
        )
        if threads:
            torch.set_num_threads(threads)
        self.model = model.cpu().eval()
        dataset = splits[0]._dataset
        known = user_histories(splits, "all")
        users = sorted(u for u, items in known.items() if items)
        tokens = _tokens(dataset, dataset.uid_field, users)
        reads_user = bool(getattr(model, "encode_reads_user", False))
        self.catalog = Catalog(
            config["model"],
            config["dataset"],
            int(model.max_seq_length),
            _tokens(dataset, dataset.iid_field, range(dataset.item_num)),
            {t: known[u] for t, u in zip(tokens, users)},
            dict(zip(tokens, users)) if reads_user else None,
        )
        self.reads_user = reads_user
        self.source = model_file

    def scores(self, item_seq, item_seq_len, user=None):
        import torch

        return torch_scores(
            self.model,
            torch.from_numpy(item_seq),
            torch.from_numpy(item_seq_len),
            torch.from_numpy(user) if self.reads_user else None,
        )


def torch_scores(model, item_seq, item_seq_len, user=None):
    """The model's own evaluation scores (``full_sort_predict``) as float32 numpy."""
    import torch

    batch = {model.ITEM_SEQ: item_seq, model.ITEM_SEQ_LEN: item_seq_len}
    if user is not None:
        batch[model.USER_ID] = user
    with torch.no_grad():
        scores = model.full_sort_predict(batch)
    return scores.view(len(item_seq), -1).float().numpy()


def open_scorer(model_file, threads=None, config_dict=None):
    """:class:`OnnxScorer` for a ``.onnx`` file, else :class:`TorchScorer`."""
    if str(model_file).lower().endswith(".onnx"):
        return OnnxScorer(model_file, threads)
    return TorchScorer(model_file, threads, config_dict)
