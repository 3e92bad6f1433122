"""A trained model outside the training stack (recbole_attn.commands.serving,
``recbole-attn export-onnx`` and ``serve``): ONNX Runtime's scores against PyTorch's in
evaluation mode for every model (short, full-length and padded real sequences, the same
top-K), the sidecar, the numpy ranking against a brute force, and the service over real
HTTP on loopback: its answers against the model's own ranking, every bad request a 4xx
JSON error with the service still answering, a bounded concurrent load without errors,
and a clean stop on SIGTERM."""

import json
import logging
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request

import numpy as np
import pytest
import torch

from recbole_attn.cli import main as cli_main
from recbole_attn.commands.recommend import recommend, top_k as torch_top_k
from recbole_attn.commands.recommend import user_histories
from recbole_attn.commands.serving.onnx_export import sorted_lookup
from recbole_attn.commands.serving.ranking import top_k
from recbole_attn.commands.serving.scorers import OnnxScorer
from recbole_attn.engine.quick_start import load_data_and_model, run
from recbole_attn.plugin import MODELS

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOAD = {
    "inter": ["user_id", "item_id", "timestamp"],
    "item": ["item_id", "categories"],
}
FAST = {"dpp_cat_steps": 5, "dpp_cat_rank": 4}
#: float32 parity (the export's own check uses the same)
RTOL, ATOL = 1e-4, 1e-5
#: the models whose parity runs in the quick suite: SASRec's layers (the served
#: model, test_served_parity), and RKSA's co-occurrence lookup (bisection in the
#: graph); the others are slow (an export each)
QUICK = ("RKSA",)
CASES = [(name, {}) for name in MODELS] + [
    ("AWRSR", {"backbone": "STOSA", "refinement": "stoc"}),
    ("SASRec", {"training_mode": "last_position"}),
]


@pytest.fixture(autouse=True)
def in_tmp_path(tmp_path, monkeypatch):
    """RecBole's log/ of a loaded model goes to tmp_path."""
    monkeypatch.chdir(tmp_path)


def main(argv):
    try:
        return cli_main(argv)
    except SystemExit as exit:
        return exit.code


def _train(tiny_config, model, **extra):
    config = {**tiny_config, "epochs": 1, "load_col": LOAD, **FAST, **extra}
    result = run(model, "tiny", config_dict=config)
    logging.getLogger().handlers.clear()
    return result["saved_model_file"]


def _export(model_file, output, *flags):
    assert main(["export-onnx", f"--model_file={model_file}", f"--output={output}"
                 , *flags]) == 0  # fmt: skip
    return str(output)


def _batches(histories, length):
    """Real sequences: the first item only, full-length ones (the last T items), and a
    padded batch of every length (width T and width of its longest)."""
    seqs = [items[-length:] for _, items in sorted(histories.items()) if items]
    full = [s for s in seqs if len(s) == length][:5]
    assert full, "the fixture has histories of T items"
    mixed = seqs[:20]
    out = []
    for batch, width in (
        ([s[:1] for s in seqs[:5]], 1),
        (full, length),
        (mixed, length),
        (mixed, max(map(len, mixed))),
    ):
        item_seq = np.zeros((len(batch), width), dtype=np.int64)
        for row, s in enumerate(batch):
            item_seq[row, : len(s)] = s
        out.append((item_seq, np.array([len(s) for s in batch], dtype=np.int64)))
    return out


def _parity(model_file, onnx_file):
    config, model, _, splits = load_data_and_model(model_file, {"state": "ERROR"})
    logging.getLogger().handlers.clear()
    model.eval()
    histories = user_histories(splits, "all")
    users = {tuple(items[-model.max_seq_length :]): u for u, items in histories.items()}
    scorer = OnnxScorer(onnx_file)
    assert scorer.catalog.model == config["model"]
    for item_seq, lengths in _batches(histories, model.max_seq_length):
        rows = [tuple(r[:n]) for r, n in zip(item_seq.tolist(), lengths.tolist())]
        user = np.array([users.get(r, 0) for r in rows], dtype=np.int64)
        batch = {
            model.ITEM_SEQ: torch.from_numpy(item_seq),
            model.ITEM_SEQ_LEN: torch.from_numpy(lengths),
            model.USER_ID: torch.from_numpy(user),
        }
        with torch.no_grad():
            want = model.full_sort_predict(batch).view(len(rows), -1).numpy()
        got = scorer.scores(item_seq, lengths, user)
        assert got.dtype == np.float32 and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
        for row in range(len(rows)):
            seen = list(rows[row])
            assert top_k(got[row], 10, seen)[0].tolist() == (
                top_k(want[row], 10, seen)[0].tolist()
            )


@pytest.mark.parametrize(
    "model,extra",
    [
        pytest.param(
            name,
            extra,
            marks=() if name in QUICK and not extra else pytest.mark.slow,
            id=name + ("-" + "-".join(map(str, extra.values())) if extra else ""),
        )
        for name, extra in CASES
        if name != "SASRecAP"
    ],
)
def test_onnx_runtime_scores_are_pytorchs(model, extra, tiny_config, tmp_path):
    model_file = _train(tiny_config, model, **extra)
    onnx_file = _export(model_file, tmp_path / f"{model}.onnx")
    _parity(model_file, onnx_file)


def test_served_parity(served):
    """SASRecAP's (the served model's) parity."""
    _parity(*served[:2])


def test_the_sidecar_holds_the_tokens_t_and_the_histories(served, tmp_path):
    model_file, onnx_file, _ = served
    config, model, _, splits = load_data_and_model(model_file, {"state": "ERROR"})
    logging.getLogger().handlers.clear()
    dataset = splits[0]._dataset
    with open(f"{onnx_file}.json") as f:
        side = json.load(f)
    assert side["model"] == "SASRecAP" and side["dataset"] == "tiny"
    assert side["max_seq_length"] == model.max_seq_length == 12
    assert side["item_tokens"] == list(dataset.field2id_token[dataset.iid_field])
    assert "scores" in side["outputs"] and set(side["inputs"]) == {
        "item_seq",
        "item_seq_len",
    }
    known = user_histories(splits, "all")
    users = list(dataset.field2id_token[dataset.uid_field])
    assert side["histories"] == {users[u]: items for u, items in known.items()}
    # without histories: the tokens only
    bare = _export(model_file, tmp_path / "bare.onnx", "--no-histories")
    with open(f"{bare}.json") as f:
        assert "histories" not in json.load(f)


def test_a_model_without_an_export_says_so_and_nothing_is_written(
    tiny_config, tmp_path, capsys
):
    model_file = _train(tiny_config, "GRU4Rec", training_mode="last_position")
    out = tmp_path / "g.onnx"
    assert main(["export-onnx", f"--model_file={model_file}", f"--output={out}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "GRU4Rec is not among them" in err[0]
    assert not [f for f in os.listdir(tmp_path) if ".onnx" in f]
    assert main(["export-onnx", f"--model_file={model_file}", "--output=x.txt"]) == 2
    assert "name it .onnx" in capsys.readouterr().err


def test_an_existing_output_is_kept(tmp_path, capsys):
    out = tmp_path / "m.onnx"
    out.write_bytes(b"mine")
    args = ["export-onnx", "--model_file=nothing.pth", f"--output={out}"]
    assert main(args) == 2
    assert "--overwrite" in capsys.readouterr().err and out.read_bytes() == b"mine"


@pytest.mark.parametrize("n", [0, 1, 2, 7, 100])
def test_the_bisection_is_searchsorted(n):
    generator = torch.Generator().manual_seed(n)
    keys = torch.randint(0, 50, (n,), generator=generator).sort().values
    queries = torch.randint(-5, 60, (40, 3), generator=generator)
    if n:
        queries[0, :] = keys[: min(3, n)].repeat(3)[:3]  # present keys, duplicates
    want = torch.searchsorted(keys, queries) if n else torch.zeros_like(queries)
    assert torch.equal(sorted_lookup(keys, queries), want)


def test_the_numpy_ranking_is_the_brute_force_and_recommends():
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(2, 30))
        scores = rng.integers(-3, 3, n).astype(np.float32)  # many ties
        exclude = rng.choice(np.arange(1, n), int(rng.integers(0, n - 1)), False)
        k = int(rng.integers(1, n + 2))
        items, values = top_k(scores, k, exclude)
        order = sorted(
            (-float(scores[j]), j) for j in range(1, n) if j not in set(exclude)
        )[:k]
        assert items.tolist() == [j for _, j in order]
        assert values.tolist() == [-s for s, _ in order]
        seen = torch.zeros(1, n, dtype=torch.bool)
        seen[0, torch.as_tensor(exclude, dtype=torch.long)] = True
        left = n - 1 - len(exclude)
        if 1 <= k <= left:
            want = torch_top_k(torch.from_numpy(scores)[None], k, seen)[0]
            assert items.tolist() == want[0].tolist()


def test_the_onnx_scorer_and_the_app_import_neither_torch_nor_recbole(served):
    onnx_file = served[1]
    code = (
        "import sys, numpy as np\n"
        "from recbole_attn.commands.serving.scorers import OnnxScorer\n"
        "from recbole_attn.commands.serving.app import create_app\n"
        f"s = OnnxScorer({onnx_file!r})\n"
        "create_app(s)\n"
        "x = s.scores(np.array([[1, 2, 0]]), np.array([2]))\n"
        "assert x.shape == (1, s.catalog.n_items + 1), x.shape\n"
        "bad = [m for m in ('torch', 'recbole') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


# --- the service over real HTTP on loopback ----------------------------------------


def _post(url, body, raw=False):
    data = body if raw else json.dumps(body).encode()
    request = urllib.request.Request(
        f"{url}/recommend", data, {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def _get(url, path):
    try:
        with urllib.request.urlopen(f"{url}{path}", timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


class Service:
    """``recbole-attn serve`` as a process on a free loopback port."""

    def __init__(self, model_file, *flags, cwd=None):
        command = [sys.executable, "-m", "recbole_attn", "serve"]
        command += [f"--model_file={model_file}", "--port=0", *flags]
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
            env={**os.environ, "PYTHONPATH": REPO},
        )
        self.banner = self.process.stdout.readline()
        if "at http://" not in self.banner:
            self.process.kill()
            raise AssertionError(self.banner + self.process.stderr.read())
        self.url = self.banner.split(" at ")[1].split()[0]

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        out, err = self.process.communicate(timeout=60)
        return self.process.returncode, out, err

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()


@pytest.fixture(scope="module")
def served(tmp_path_factory, tiny_data_path):
    """A trained SASRecAP, its ONNX export and ``recommend``'s top-5 of every user."""
    tmp = tmp_path_factory.mktemp("served")
    from conftest import TINY_MODEL

    config = {
        "data_path": tiny_data_path,
        "checkpoint_dir": str(tmp / "saved"),
        "state": "ERROR",
        "seed": 2020,
        "train_batch_size": 16,
        "eval_batch_size": 64,
        **TINY_MODEL,
    }
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp)
        patch.setattr("sys.argv", ["pytest"])
        patch.setattr("recbole_attn.engine.threads.idle_cores", lambda: None)
        model_file = _train(config, "SASRecAP")
        onnx_file = _export(model_file, tmp / "m.onnx")
        want = recommend(model_file, k=5)
        logging.getLogger().handlers.clear()
    return model_file, onnx_file, want


def _by_user(result):
    out = {}
    for user, rank, item, score, _ in result["rows"]:
        out.setdefault(user, []).append((item, score))
    return out


BAD = [
    (b"{not json", 400, "not JSON"),
    (b"[1, 2]", 422, "JSON object"),
    (b'{"items": ["i1"], "user": "u1"}', 422, "either items"),
    (b'{"topk": 3}', 422, "either items"),
    (b'{"items": [], "topk": 3}', 422, "empty"),
    (b'{"items": ["i1", "nope", "zz"], "topk": 3}', 422, "['nope', 'zz']"),
    (b'{"items": ["i1"], "topk": 0}', 422, "topk"),
    (b'{"items": ["i1"], "topk": 37}', 422, "from 1 to 36"),
    (b'{"items": ["i1"], "topk": "5"}', 422, "topk"),
    (b'{"items": "i1"}', 422, "list"),
    (b'{"items": [["i1"]]}', 422, "tokens"),
    (b'{"items": ["i1"], "exclude_seen": "no"}', 422, "exclude_seen"),
    (b'{"items": ["i1"], "color": 1}', 422, "unknown fields"),
    (b'{"user": "nobody"}', 404, "'nobody'"),
    (json.dumps({"items": ["i1"] * 400}).encode(), 422, "last 12"),
    (json.dumps({"items": ["i1"] * 3000}).encode(), 413, "over"),
]


@pytest.mark.parametrize("backend", ["onnx", "torch"])
def test_the_service_answers_as_the_model_ranks_and_refuses_bad_requests(
    served, backend, tmp_path
):
    model_file, onnx_file, want = served
    source = onnx_file if backend == "onnx" else model_file
    flags = ["--max_items=300", "--max_body_bytes=16000"]
    with Service(source, *flags, cwd=tmp_path) as service:
        assert "SASRecAP on tiny" in service.banner and "127.0.0.1" in service.url
        assert _get(service.url, "/health") == (
            200,
            {
                "status": "ok",
                "model": "SASRecAP",
                "dataset": "tiny",
                "backend": backend,
                "max_seq_length": 12,
                "n_items": 36,
                "known_users": 60,
            },
        )
        status, spec = _get(service.url, "/openapi.json")
        assert status == 200 and "/recommend" in spec["paths"]
        expected = _by_user(want)
        for user in ("u1", "u7", "u42"):
            status, body = _post(service.url, {"user": user, "topk": 5})
            assert status == 200
            got = [(e["item"], e["score"]) for e in body["items"]]
            assert [i for i, _ in got] == [i for i, _ in expected[user]], user
            assert [s for _, s in got] == pytest.approx(
                [s for _, s in expected[user]], rel=RTOL, abs=ATOL
            )
            assert [e["rank"] for e in body["items"]] == [1, 2, 3, 4, 5]
        # a new visitor's items, oldest first; its own items left out unless asked
        status, body = _post(service.url, {"items": ["i3", "i5", "i3"], "topk": 36})
        assert status == 200 and len(body["items"]) == 34 and body["used_items"] == 3
        assert {"i3", "i5"}.isdisjoint(e["item"] for e in body["items"])
        status, body = _post(
            service.url, {"items": ["i3", "i5"], "topk": 36, "exclude_seen": False}
        )
        assert status == 200 and len(body["items"]) == 36
        for raw, status, words in BAD:
            got_status, body = _post(service.url, raw, raw=True)
            assert (got_status, set(body)) == (status, {"error"}), (raw[:60], body)
            assert words in body["error"], body
            assert _post(service.url, {"items": ["i1"], "topk": 1})[0] == 200
        assert _get(service.url, "/nothing") == (404, {"error": "Not Found"})
        rc, out, err = service.stop()
    assert rc == 0 and "stopped" in out and "Traceback" not in err


def test_serve_refuses_a_port_in_use_and_a_missing_model(served, tmp_path, capsys):
    import socket

    _, onnx_file, _ = served
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = ["serve", f"--model_file={onnx_file}", f"--port={port}"]
        assert main(args) == 2
        assert "cannot listen on 127.0.0.1" in capsys.readouterr().err
    assert main(["serve", f"--model_file={tmp_path / 'x.onnx'}", "--port=0"]) == 2
    assert "ONNX file not found" in capsys.readouterr().err


def test_the_service_holds_a_bounded_concurrent_load(served, tmp_path):
    """16 clients, 25 requests each, on keep-alive connections: every one answered."""
    sys.path.insert(0, REPO)
    from experiments.serving_load import load

    _, onnx_file, _ = served
    with Service(onnx_file, cwd=tmp_path) as service:
        with open(f"{onnx_file}.json") as f:
            tokens = json.load(f)["item_tokens"][1:]
        report = load(service.url, tokens, clients=16, requests=400, seconds=120)
        assert report["errors"] == 0 and report["requests"] == 400
        assert 0 < report["p50_ms"] <= report["p99_ms"] and report["rps"] > 0
        rc, _, err = service.stop()
    assert rc == 0 and "Traceback" not in err


def test_sigterm_answers_the_requests_in_flight(served, tmp_path):
    """A request still waiting in the batcher (500 ms for company) when SIGTERM comes
    is answered before the service exits 0."""
    import threading
    import time

    _, onnx_file, _ = served
    with Service(onnx_file, "--batch_wait_ms=500", cwd=tmp_path) as service:
        answers = []
        client = threading.Thread(
            target=lambda: answers.append(
                _post(service.url, {"items": ["i3"], "topk": 2})
            )
        )
        client.start()
        time.sleep(0.3)
        rc, out, err = service.stop()
        client.join(timeout=60)
    assert rc == 0 and "stopped" in out and "Traceback" not in err
    assert [status for status, _ in answers] == [200]
    assert len(answers[0][1]["items"]) == 2
