"""The HTTP service of ``recbole-attn serve``: a FastAPI app over one scorer (ONNX
Runtime or the checkpoint). ``GET /health``; ``POST /recommend`` with ``{"items": [item
tokens, oldest first], "topk": K}`` or ``{"user": token, "topk": K}`` answers ``{"items":
[{"item": token, "score": s, "rank": r}, ...]}``, the request's own items left out unless
``"exclude_seen": false``. Requests are scored in batches by one worker thread
(:class:`Batcher`); every bad request is a 4xx ``{"error": ...}`` (docs/serving.md)."""

import asyncio
import json
import logging
import queue
import threading
from concurrent.futures import Future

import numpy as np

from recbole_attn.commands.serving.ranking import top_k

#: the largest request body read (bytes): a history of thousands of tokens fits
MAX_BODY_BYTES = 256 * 1024
#: the longest history a request may send (items beyond T are read for exclusion only)
MAX_ITEMS = 10_000
#: the most items one answer lists
MAX_TOPK = 1000
#: how many of the unknown tokens an error lists
SHOWN = 20

log = logging.getLogger("recbole_attn.serve")


class RequestError(Exception):
    """A bad request: its HTTP status and one line saying what to change."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class Batcher:
    """One worker thread owns the scorer: requests queued while it scores are scored
    together (at most ``max_batch`` rows, after waiting ``wait_ms`` for company), each
    answered through its future."""

    def __init__(self, scorer, max_batch=64, wait_ms=2.0):
        self.scorer = scorer
        self.max_batch = max_batch
        self.wait = wait_ms / 1000.0
        self.jobs = queue.Queue()
        self.thread = threading.Thread(target=self._work, name="scorer", daemon=True)
        self.thread.start()

    def submit(self, items, user, k, exclude):
        """A future of ``(item ids, scores)`` of one request."""
        future = Future()
        self.jobs.put((items, user, k, exclude, future))
        return future

    def close(self):
        """Answer what is queued, then stop the worker."""
        self.jobs.put(None)
        self.thread.join()

    def _work(self):
        while True:
            job = self.jobs.get()
            if job is None:
                return
            batch = [job]
            try:
                while len(batch) < self.max_batch:
                    more = self.jobs.get(timeout=self.wait)
                    if more is None:
                        self.jobs.put(None)  # stop after this batch
                        break
                    batch.append(more)
            except queue.Empty:
                pass
            self._score(batch)

    def _score(self, batch):
        catalog = self.scorer.catalog
        seqs = [items[-catalog.max_seq_length :] for items, *_ in batch]
        item_seq = np.zeros((len(batch), max(map(len, seqs))), dtype=np.int64)
        for row, seq in enumerate(seqs):
            item_seq[row, : len(seq)] = seq
        lengths = np.array([len(s) for s in seqs], dtype=np.int64)
        users = np.array([user for _, user, *_ in batch], dtype=np.int64)
        try:
            scores = self.scorer.scores(item_seq, lengths, users)
            for row, (items, _, k, exclude, future) in enumerate(batch):
                future.set_result(top_k(scores[row], k, items if exclude else ()))
        except Exception as err:  # answered as a 500 by each request, logged once
            log.exception("scoring a batch of %d failed", len(batch))
            for *_, future in batch:
                if not future.done():
                    future.set_exception(err)


def parse_request(body, catalog, max_items=MAX_ITEMS, max_topk=MAX_TOPK):
    """``(item ids, user id, k, exclude_seen)`` of a request body (bytes), or a
    :class:`RequestError` naming what is wrong."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as err:
        raise RequestError(400, f"the body is not JSON ({err})") from None
    if not isinstance(data, dict):
        raise RequestError(422, "the body must be a JSON object")
    known = {"items", "user", "topk", "exclude_seen"}
    extra = sorted(set(data) - known)
    if extra:
        raise RequestError(
            422,
            f"unknown fields {extra}; a request has items or user, topk, "
            "exclude_seen",
        )
    if ("items" in data) == ("user" in data):
        raise RequestError(
            422,
            "give either items (item tokens, oldest first) or user (a known "
            "user's token), not both or neither",
        )
    k = data.get("topk", 20)
    limit = min(max_topk, catalog.n_items)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= limit:
        raise RequestError(422, f"topk must be an integer from 1 to {limit}, got {k!r}")
    exclude = data.get("exclude_seen", True)
    if not isinstance(exclude, bool):
        raise RequestError(422, f"exclude_seen must be true or false, got {exclude!r}")
    user = 0  # a new visitor (a model that reads users: the padding user)
    if "user" in data:
        token = data["user"]
        if not isinstance(token, (str, int)) or isinstance(token, bool):
            raise RequestError(422, f"user must be a token (a string), got {token!r}")
        items = catalog.histories.get(str(token))
        if items is None:
            what = "has no history here" if catalog.histories else "is unknown"
            raise RequestError(
                404,
                f"user {str(token)!r} {what}: this service knows "
                f"{len(catalog.histories)} users' histories; send their items instead",
            )
        if catalog.user_ids is not None:
            user = catalog.user_ids[str(token)]
        return list(items), user, k, exclude
    tokens = data["items"]
    if not isinstance(tokens, list):
        raise RequestError(422, "items must be a list of item tokens, oldest first")
    if not tokens:
        raise RequestError(422, "items is empty; send at least one item token")
    if len(tokens) > max_items:
        raise RequestError(
            422,
            f"items holds {len(tokens)} tokens, more than the {max_items} taken; "
            f"send the most recent ones (the model reads the last "
            f"{catalog.max_seq_length})",
        )
    bad = [t for t in tokens if isinstance(t, bool) or not isinstance(t, (str, int))]
    if bad:
        raise RequestError(422, f"items must be tokens (strings), got {bad[:SHOWN]}")
    ids = [catalog.item_ids.get(str(t)) for t in tokens]
    unknown = list(dict.fromkeys(str(t) for t, i in zip(tokens, ids) if i is None))
    if unknown:
        more = f" and {len(unknown) - SHOWN} more" if len(unknown) > SHOWN else ""
        raise RequestError(
            422,
            f"{len(unknown)} unknown item tokens: {unknown[:SHOWN]}{more}; items "
            f"are the tokens of {catalog.dataset!r} ({catalog.n_items} items)",
        )
    return ids, user, k, exclude


def create_app(
    scorer,
    max_batch=64,
    wait_ms=2.0,
    max_body_bytes=MAX_BODY_BYTES,
    max_items=MAX_ITEMS,
    max_topk=MAX_TOPK,
):
    """The FastAPI app of ``scorer``; its batcher starts and stops with the app."""
    import contextlib

    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException

    catalog = scorer.catalog
    state = {}

    def batcher():
        """The app's batcher, started on first use (a host that runs no lifespan,
        such as a Ray Serve replica, starts it with the first request)."""
        if "batcher" not in state:
            state["batcher"] = Batcher(scorer, max_batch, wait_ms)
        return state["batcher"]

    @contextlib.asynccontextmanager
    async def lifespan(app):
        batcher()
        try:
            yield
        finally:  # after uvicorn answered the requests in flight
            state.pop("batcher").close()

    app = FastAPI(
        title=f"recbole-attn: {catalog.model} on {catalog.dataset}",
        description=(
            "Top-K recommendations for an item sequence (or a known user's history). "
            f"The model reads the last {catalog.max_seq_length} items; older ones are "
            "only left out of the answer."
        ),
        lifespan=lifespan,
    )

    def error(status, message):
        return JSONResponse({"error": message}, status_code=status)

    @app.exception_handler(HTTPException)
    async def http_error(request, exc):  # 404, 405 and the like, as JSON
        return error(exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    async def internal_error(request, exc):
        log.exception("request failed")
        return error(500, f"internal error ({type(exc).__name__}); see the log")

    @app.get("/health")
    async def health():
        return {
            "status": "ok",
            "model": catalog.model,
            "dataset": catalog.dataset,
            "backend": scorer.kind,
            "max_seq_length": catalog.max_seq_length,
            "n_items": catalog.n_items,
            "known_users": len(catalog.histories),
        }

    @app.post(
        "/recommend",
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": REQUEST_SCHEMA,
                        "example": {"items": catalog.item_tokens[1:4], "topk": 10},
                    }
                },
            }
        },
    )
    async def recommend(request: Request):
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > max_body_bytes:
                return error(
                    413, f"the body is over {max_body_bytes} bytes; send fewer items"
                )
        try:
            items, user, k, exclude = parse_request(
                bytes(body), catalog, max_items, max_topk
            )
        except RequestError as err:
            return error(err.status, str(err))
        ids, scores = await asyncio.wrap_future(
            batcher().submit(items, user, k, exclude)
        )
        tokens = catalog.item_tokens
        return {
            "items": [
                {"item": tokens[i], "score": float(s), "rank": r}
                for r, (i, s) in enumerate(zip(ids.tolist(), scores.tolist()), 1)
            ],
            "used_items": min(len(items), catalog.max_seq_length),
        }

    return app


REQUEST_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "items": {
            "type": "array",
            "items": {"type": "string"},
            "minItems": 1,
            "description": "item tokens, oldest first (the model reads the last T; "
            "all are left out of the answer unless exclude_seen is false)",
        },
        "user": {"type": "string", "description": "a known user's token"},
        "topk": {"type": "integer", "minimum": 1, "default": 20},
        "exclude_seen": {"type": "boolean", "default": True},
    },
}
