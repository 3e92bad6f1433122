"""The load benchmark of ``recbole-attn serve`` (docs/serving.md): N concurrent clients on
keep-alive loopback connections send a bounded number of ``POST /recommend`` requests
(random item sequences of the dataset, seeded) to the ONNX Runtime service and to the
PyTorch one of the same checkpoint, in one run; reported: errors, p50/p99 latency,
requests per second, and their ratios; beside it, the scorers alone (no HTTP): one
sequence's latency and a batch's throughput, ONNX Runtime against PyTorch.

    python -m experiments.serving_load --model_file=saved/SASRecAP-....pth \\
        --output=experiments/serving --clients=16 --requests=2000
"""

import argparse
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.parse

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load(url, tokens, clients=16, requests=2000, seconds=300, topk=20, seed=0):
    """``requests`` requests from ``clients`` threads (each its own keep-alive
    connection), stopped after ``seconds`` at the latest: errors (a status other than
    200, a refused or broken connection), p50/p99 latency in ms, requests per second."""
    target = urllib.parse.urlsplit(url)
    rng = np.random.default_rng(seed)
    bodies = [
        json.dumps(
            {
                "items": [str(t) for t in rng.choice(tokens, int(rng.integers(1, 60)))],
                "topk": topk,
            }
        ).encode()
        for _ in range(requests)
    ]
    latencies, errors, lock = [], [], threading.Lock()
    next_index = iter(range(requests))
    deadline = time.monotonic() + seconds

    def client():
        connection = http.client.HTTPConnection(target.hostname, target.port, 30)
        while time.monotonic() < deadline:
            with lock:
                index = next(next_index, None)
            if index is None:
                break
            start = time.perf_counter()
            try:
                connection.request(
                    "POST",
                    "/recommend",
                    bodies[index],
                    {"Content-Type": "application/json"},
                )
                response = connection.getresponse()
                payload = response.read()
                ok = response.status == 200 and b'"items"' in payload
            except (OSError, http.client.HTTPException):
                ok = False
                connection.close()
                connection = http.client.HTTPConnection(
                    target.hostname, target.port, 30
                )
            elapsed = time.perf_counter() - start
            with lock:
                (latencies if ok else errors).append(elapsed)
        connection.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - began
    done = len(latencies) + len(errors)
    ms = np.array(latencies) * 1000 if latencies else np.zeros(1)
    return {
        "clients": clients,
        "requests": done,
        "errors": len(errors) + (requests - done),
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
        "rps": done / wall,
        "seconds": wall,
    }


def serve(model_file, *flags):
    """``recbole-attn serve`` on a free loopback port: ``(process, url)``."""
    command = [sys.executable, "-m", "recbole_attn", "serve"]
    process = subprocess.Popen(
        [*command, f"--model_file={model_file}", "--port=0", *flags],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": REPO},
    )
    banner = process.stdout.readline()
    if " at http://" not in banner:
        process.kill()
        raise SystemExit(f"serve did not start: {banner}")
    return process, banner.split(" at ")[1].split()[0]


def scorer_timings(onnx_file, model_file, threads, repeats=200, batch=64):
    """Per scorer: one sequence's median latency (ms) and a batch's sequences/s."""
    from recbole_attn.commands.serving.scorers import OnnxScorer, TorchScorer

    out = {}
    for name, scorer in (
        ("onnx", OnnxScorer(onnx_file, threads)),
        ("torch", TorchScorer(model_file, threads)),
    ):
        length = scorer.catalog.max_seq_length
        rng = np.random.default_rng(0)
        n = scorer.catalog.n_items
        one = rng.integers(1, n + 1, (1, length)), np.array([length])
        many = rng.integers(1, n + 1, (batch, length)), np.full(batch, length)
        users = np.zeros(batch, dtype=np.int64)
        for _ in range(10):  # warm-up
            scorer.scores(*one, users[:1])
        single = []
        for _ in range(repeats):
            start = time.perf_counter()
            scorer.scores(*one, users[:1])
            single.append(time.perf_counter() - start)
        start = time.perf_counter()
        rounds = max(1, repeats // 10)
        for _ in range(rounds):
            scorer.scores(*many, users)
        out[name] = {
            "single_ms": float(np.median(single) * 1000),
            "batch_per_s": batch * rounds / (time.perf_counter() - start),
        }
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model_file", required=True, help="a checkpoint (.pth)")
    parser.add_argument("--output", required=True, help="a folder for the results")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--seconds", type=int, default=300, help="per backend, at most")
    parser.add_argument("--threads", type=int, default=1, help="the scorer's threads")
    parser.add_argument("--max_batch", type=int, default=64)
    args = parser.parse_args(argv)
    os.makedirs(args.output, exist_ok=True)
    onnx_file = os.path.join(args.output, "model.onnx")
    if not os.path.exists(onnx_file):
        subprocess.run(
            [sys.executable, "-m", "recbole_attn", "export-onnx"]
            + [f"--model_file={args.model_file}", f"--output={onnx_file}"],
            check=True,
        )
    with open(f"{onnx_file}.json") as f:
        side = json.load(f)
    tokens = side["item_tokens"][1:]
    result = {
        "command": "python -m experiments.serving_load " + " ".join(sys.argv[1:]),
        "machine": "2-core AMD EPYC (Zen 2, AVX2) CPU, loopback, other jobs running",
        "model": side["model"],
        "dataset": side["dataset"],
        "n_items": len(tokens),
        "max_seq_length": side["max_seq_length"],
        "scorers": scorer_timings(onnx_file, args.model_file, args.threads),
        "load": {},
    }
    flags = [f"--threads={args.threads}", f"--max_batch={args.max_batch}"]
    for name, source in (("onnx", onnx_file), ("torch", args.model_file)):
        process, url = serve(source, *flags)
        try:
            load(url, tokens, clients=4, requests=100, seconds=30)  # warm-up
            result["load"][name] = load(
                url, tokens, args.clients, args.requests, args.seconds
            )
        finally:
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=60)
        result["load"][name]["exit_status"] = process.returncode
    onnx, torch_ = result["load"]["onnx"], result["load"]["torch"]
    result["ratios_onnx_over_torch"] = {
        "rps": onnx["rps"] / torch_["rps"],
        "p50": onnx["p50_ms"] / torch_["p50_ms"],
        "p99": onnx["p99_ms"] / torch_["p99_ms"],
        "single_latency": result["scorers"]["onnx"]["single_ms"]
        / result["scorers"]["torch"]["single_ms"],
        "batch_throughput": result["scorers"]["onnx"]["batch_per_s"]
        / result["scorers"]["torch"]["batch_per_s"],
    }
    path = os.path.join(args.output, "results.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
