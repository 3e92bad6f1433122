"""An HTTP service of a trained model on FastAPI and uvicorn (``pip install
'recbole-attn[serve]'``): ``GET /health``, ``POST /recommend`` with ``{"items": [item
tokens, oldest first], "topk": K}`` or ``{"user": token, "topk": K}``, OpenAPI docs at
``/docs`` (``recbole-attn serve --model_file=model.onnx``). From an ONNX export it runs on
ONNX Runtime alone; from a checkpoint (or a folder's newest) on PyTorch. It binds to
127.0.0.1 unless told otherwise; SIGTERM or Ctrl-C stops it after the requests in
flight are answered (docs/serving.md)."""

import socket
import sys

from recbole_attn.errors import RecboleAttnError


def add_arguments(parser):
    """The model, where to listen, the batching and the request limits."""
    from recbole_attn.options.arguments import checked, positive_int
    from recbole_attn.commands.serving.app import MAX_BODY_BYTES, MAX_ITEMS, MAX_TOPK

    parser.add_argument(
        "--model_file",
        required=True,
        help="an ONNX export (.onnx, its .onnx.json beside it) or a checkpoint "
        "(.pth), or a folder: its newest checkpoint",
    )
    parser.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1")
    parser.add_argument(
        "--port",
        type=checked(
            int, lambda p: 0 <= p <= 65535, "port must be 0 to 65535, got {value}"
        ),
        default=8000,
        help="default 8000 (0: a free one, said on start)",
    )
    parser.add_argument(
        "--max_batch",
        type=positive_int,
        default=64,
        help="the most requests scored together (default 64; 1: no batching)",
    )
    parser.add_argument(
        "--batch_wait_ms",
        type=checked(
            float,
            lambda w: 0 <= w <= 1000,
            "batch_wait_ms must be 0 to 1000, got {value}",
        ),
        default=2.0,
        help="how long a request waits for others to score with (default 2)",
    )
    parser.add_argument(
        "--threads",
        type=positive_int,
        help="the scorer's threads (default: the runtime's own choice)",
    )
    parser.add_argument(
        "--max_body_bytes", type=positive_int, default=MAX_BODY_BYTES, help="413 above"
    )
    parser.add_argument(
        "--max_items",
        type=positive_int,
        default=MAX_ITEMS,
        help="tokens a request may send",
    )
    parser.add_argument(
        "--max_topk", type=positive_int, default=MAX_TOPK, help="the largest topk"
    )
    parser.add_argument("--data_path", help="a checkpoint's dataset, if it moved")


def listening_socket(host, port):
    """A bound, listening TCP socket; an address in use or not here is one line."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as err:
        raise RecboleAttnError(
            f"cannot listen on {host}:{port} ({err.strerror or err}); choose another "
            "--port (or --host)"
        ) from None
    return sock


def run(args):
    """Load the model, bind, serve until SIGTERM or Ctrl-C; returns the exit status."""
    try:
        import fastapi  # noqa: F401
        import uvicorn
    except ImportError:
        raise RecboleAttnError(
            "serve needs FastAPI and uvicorn; pip install 'recbole-attn[serve]'"
        ) from None
    from recbole_attn.commands.serving.app import create_app
    from recbole_attn.commands.serving.scorers import open_scorer

    sock = listening_socket(args.host, args.port)  # before the model loads
    config = {"data_path": args.data_path} if args.data_path else None
    scorer = open_scorer(args.model_file, args.threads, config)
    app = create_app(
        scorer,
        max_batch=args.max_batch,
        wait_ms=args.batch_wait_ms,
        max_body_bytes=args.max_body_bytes,
        max_items=args.max_items,
        max_topk=args.max_topk,
    )
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    catalog = scorer.catalog
    print(
        f"serving {catalog.model} on {catalog.dataset} ({catalog.n_items} items, "
        f"{len(catalog.histories)} known users, {scorer.kind}) from {scorer.source} "
        f"at http://{shown}:{port} (POST /recommend, GET /health, docs at /docs)",
        flush=True,
    )
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=30)
    )
    try:
        server.run(sockets=[sock])  # uvicorn's own SIGTERM/SIGINT: a graceful stop
    except KeyboardInterrupt:  # the signal uvicorn raises again once it has stopped
        pass
    print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    from recbole_attn.options.arguments import command_main

    sys.exit(command_main(sys.modules[__name__], prog=f"python -m {__spec__.name}"))
