"""The simulator's Batch API, OpenAI-shaped: files up and down, batches and their life.

Routes (mounted by ``mount_batch``): ``POST /v1/files`` (multipart, ``purpose=batch``),
``GET /v1/files/{id}``, ``GET /v1/files/{id}/content``, ``POST /v1/batches``,
``GET /v1/batches`` (``limit``, ``after``; newest first), ``GET /v1/batches/{id}``,
``POST /v1/batches/{id}/cancel``.

A batch's state is a function of time, computed when asked (no background task):
``validating`` for ``validating_s``, then ``in_progress`` while its lines end one after
the other, evenly over ``processing_s``, then ``finalizing`` for ``finalizing_s``, then
``completed``. A cancel makes it ``cancelling`` (``cancel_s``) then ``cancelled``; a batch
not done when its window ends is ``expired``; a file that does not validate (not JSONL,
another endpoint, too many lines, two models where ``one_model``) makes it ``failed``. At
its end the lines done are answered in the output file (the same deterministic answers as
``/v1/chat/completions``) and billed; failed, refused and expired lines go to the error
file. Live counters in /stats keep their meaning; the ``batch`` counters are apart.
The records are in swarm.sim.batch_records, the JSONL files' formats in swarm.sim.batch_files.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from swarm.sim.batch_config import BatchSimConfig
from swarm.sim.batch_files import ENDPOINT, line_error, parse_file, req_id
from swarm.sim.batch_records import BatchStats, Line, SimBatch, SimFile
from swarm.sim.content import (
    RequestError,
    completion_body,
    make_completion,
    parse_chat_request,
    prompt_tokens,
)
from swarm.sim.errors import error_response
from swarm.sim.usage import usage_body

TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})


class BatchServer:
    """Files and batches of one simulator, and their handlers."""

    def __init__(self, config: BatchSimConfig, stats: BatchStats, seed: int = 0) -> None:
        self.config = config
        self.stats = stats
        self.stats.discount = config.discount
        self.seed = seed
        self.files: dict[str, SimFile] = {}
        self.batches: dict[str, SimBatch] = {}

    # -- files --
    async def upload(self, request: web.Request) -> web.Response:
        """POST /v1/files."""
        form = await request.post()
        upload, purpose = form.get("file"), form.get("purpose")
        if not isinstance(upload, web.FileField):
            return _error(400, "'file' must be a file upload", "invalid_file", "file")
        if purpose != "batch":
            return _error(400, "only purpose=batch is supported", "invalid_purpose", "purpose")
        data = upload.file.read()
        if len(data) > self.config.max_bytes:
            message = f"file of {len(data)} bytes is over the {self.config.max_bytes} limit"
            return _error(413, message, "file_too_large", "file")
        sim_file = SimFile(f"file-{uuid.uuid4().hex[:24]}", upload.filename, "batch", data)
        self.files[sim_file.id] = sim_file
        self.stats.files_uploaded += 1
        return web.json_response(sim_file.body())

    async def file(self, request: web.Request) -> web.Response:
        """GET /v1/files/{id}."""
        sim_file = self.files.get(request.match_info["file_id"])
        if sim_file is None:
            return _error(404, "no such file", "file_not_found")
        return web.json_response(sim_file.body())

    async def content(self, request: web.Request) -> web.Response:
        """GET /v1/files/{id}/content."""
        sim_file = self.files.get(request.match_info["file_id"])
        if sim_file is None:
            return _error(404, "no such file", "file_not_found")
        return web.Response(body=sim_file.data, content_type="application/jsonl")

    # -- batches --
    async def create(self, request: web.Request) -> web.Response:
        """POST /v1/batches."""
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "the request body is not valid JSON", "invalid_json")
        if not isinstance(body, dict):
            return _error(400, "the request body must be a JSON object", "invalid_request")
        sim_file = self.files.get(str(body.get("input_file_id")))
        if sim_file is None:
            return _error(400, "input_file_id names no file", "file_not_found", "input_file_id")
        if body.get("endpoint") != ENDPOINT:
            return _error(400, f"endpoint must be {ENDPOINT}", "invalid_endpoint", "endpoint")
        window = str(body.get("completion_window") or "24h")
        metadata = body.get("metadata")
        lines, errors = parse_file(sim_file.data, self.config)
        now = time.time()
        batch = SimBatch(
            id=f"batch_{uuid.uuid4().hex[:24]}",
            input_file_id=sim_file.id,
            completion_window=window,
            metadata=metadata if isinstance(metadata, dict) else None,
            created=now,
            expires=now + self.config.window_s(window),
            lines=lines,
            errors=errors,
        )
        self.batches[batch.id] = batch
        self.stats.batches_created += 1
        self.stats.lines_received += len(lines)
        return web.json_response(self._body(batch, now))

    async def retrieve(self, request: web.Request) -> web.Response:
        """GET /v1/batches/{id}."""
        batch = self.batches.get(request.match_info["batch_id"])
        if batch is None:
            return _error(404, "no such batch", "batch_not_found")
        return web.json_response(self._body(batch, time.time()))

    async def listing(self, request: web.Request) -> web.Response:
        """GET /v1/batches: newest first, ``limit`` (default 20) after the id ``after``."""
        try:
            limit = max(1, min(100, int(request.query.get("limit", "20"))))
        except ValueError:
            return _error(400, "limit must be an integer", "invalid_limit", "limit")
        ordered = sorted(self.batches.values(), key=lambda b: b.created, reverse=True)
        after = request.query.get("after")
        if after is not None:
            ids = [b.id for b in ordered]
            ordered = ordered[ids.index(after) + 1 :] if after in ids else []
        now = time.time()
        page = [self._body(b, now) for b in ordered[:limit]]
        return web.json_response({
            "object": "list",
            "data": page,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
            "has_more": len(ordered) > limit,
        })  # fmt: skip

    async def cancel(self, request: web.Request) -> web.Response:
        """POST /v1/batches/{id}/cancel."""
        batch = self.batches.get(request.match_info["batch_id"])
        if batch is None:
            return _error(404, "no such batch", "batch_not_found")
        now = time.time()
        status = self._status(batch, now)
        if status in TERMINAL:
            message = f"batch {batch.id} is {status}: it cannot be cancelled"
            return _error(409, message, "batch_not_cancellable")
        if batch.cancel_at is None:
            batch.cancel_at = now
            self.stats.batches_cancelled += 1
        return web.json_response(self._body(batch, now))

    # -- the batch's life --
    def _start(self, batch: SimBatch) -> float:
        return batch.created + self.config.validating_s

    def _lines_done_by(self, batch: SimBatch, moment: float) -> int:
        """Lines ended by ``moment`` (line i ends at start + processing * (i+1)/n)."""
        n = len(batch.lines)
        elapsed = moment - self._start(batch)
        if elapsed < 0 or n == 0:
            return 0
        if self.config.processing_s <= 0:
            return n
        return min(n, int(elapsed / self.config.processing_s * n + 1e-9))

    def _status(self, batch: SimBatch, now: float) -> str:
        """The batch's status at ``now`` (ending it once a terminal one is reached)."""
        if batch.ended_status is not None:
            return batch.ended_status
        if batch.errors:
            return self._end(batch, "failed", batch.created, 0)
        processed = self._start(batch) + self.config.processing_s
        done_at = processed + self.config.finalizing_s
        if batch.cancel_at is not None and batch.cancel_at < done_at:
            done = self._lines_done_by(batch, batch.cancel_at)
            if now >= batch.cancel_at + self.config.cancel_s:
                return self._end(batch, "cancelled", batch.cancel_at + self.config.cancel_s, done)
            return "cancelling"
        if batch.expires < done_at and now >= batch.expires:
            return self._end(batch, "expired", batch.expires, self._lines_done_by(batch, now))
        if now >= done_at:
            return self._end(batch, "completed", done_at, len(batch.lines))
        if now < self._start(batch):
            return "validating"
        return "in_progress" if now < processed else "finalizing"

    def _end(self, batch: SimBatch, status: str, at: float, done: int) -> str:
        """End the batch: answer its first ``done`` lines, the others fail; bill them."""
        batch.ended_status, batch.ended_at = status, at
        self.stats.batches_expired += status == "expired"
        self.stats.batches_failed += status == "failed"
        outputs: list[str] = []
        errors: list[str] = []
        for index, line in enumerate(batch.lines):
            if index >= done:
                code = "batch_expired" if status == "expired" else "batch_cancelled"
                errors.append(line_error(line, None, code, f"line not run: batch {status}"))
            elif line.refusal is not None:
                errors.append(line_error(line, 400, "invalid_request", line.refusal))
            elif self._fails(line):
                errors.append(line_error(line, 500, "server_error", "simulated line failure"))
            else:
                answered = self._answer(line)
                if answered is None:
                    errors.append(line_error(line, 400, "invalid_request", "bad body"))
                else:
                    outputs.append(answered)
        batch.done_lines, batch.failed_lines = len(outputs), len(errors)
        self.stats.lines_failed += len(errors)
        batch.output_file_id = self._produce(batch, "output", outputs)
        batch.error_file_id = self._produce(batch, "error", errors)
        return status

    def _fails(self, line: Line) -> bool:
        if self.config.failed_rate <= 0:
            return False
        digest = hashlib.sha256(f"{self.seed}:{line.custom_id}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64 < self.config.failed_rate

    def _answer(self, line: Line) -> str | None:
        """The output line of an answered request, counted as served and billed."""
        try:
            chat = parse_chat_request(line.body)
        except RequestError:
            return None
        completion = make_completion(chat)
        prompt = prompt_tokens(chat)
        usage = usage_body("plain", prompt, completion.completion_tokens)
        body = completion_body(chat, completion, usage, False)
        self.stats.lines_served += 1
        self.stats.lines_billed += 1
        self.stats.prompt_tokens += prompt
        self.stats.completion_tokens += completion.completion_tokens
        response = {"status_code": 200, "request_id": body["id"], "body": body}
        return json.dumps({"id": req_id(), "custom_id": line.custom_id,
                           "response": response, "error": None})  # fmt: skip

    def _produce(self, batch: SimBatch, kind: str, lines: list[str]) -> str | None:
        if not lines:
            return None
        data = ("\n".join(lines) + "\n").encode()
        sim_file = SimFile(f"file-{uuid.uuid4().hex[:24]}", f"{batch.id}_{kind}.jsonl",
                           f"batch_{kind}", data)  # fmt: skip
        self.files[sim_file.id] = sim_file
        return sim_file.id

    def _body(self, batch: SimBatch, now: float) -> dict[str, Any]:
        """The Batch object as OpenAI returns it."""
        status = self._status(batch, now)
        ended = batch.ended_status is not None
        done = batch.done_lines if ended else self._lines_done_by(batch, now)
        failed = batch.failed_lines if ended else 0
        times = _times(batch, status, int(self._start(batch)))
        return {
            "id": batch.id,
            "object": "batch",
            "endpoint": ENDPOINT,
            "errors": {"object": "list", "data": batch.errors} if batch.errors else None,
            "input_file_id": batch.input_file_id,
            "completion_window": batch.completion_window,
            "status": status,
            "output_file_id": batch.output_file_id,
            "error_file_id": batch.error_file_id,
            "created_at": int(batch.created),
            "expires_at": int(batch.expires),
            **times,
            "request_counts": {"total": len(batch.lines), "completed": done, "failed": failed},
            "metadata": batch.metadata,
        }


def _times(batch: SimBatch, status: str, started: int) -> dict[str, int | None]:
    at = int(batch.ended_at) if batch.ended_at is not None else None
    cancelling = int(batch.cancel_at) if batch.cancel_at is not None else None
    return {
        "in_progress_at": started if status not in {"validating", "failed"} else None,
        "finalizing_at": at if status == "completed" else None,
        "completed_at": at if status == "completed" else None,
        "failed_at": at if status == "failed" else None,
        "expired_at": at if status == "expired" else None,
        "cancelling_at": cancelling,
        "cancelled_at": at if status == "cancelled" else None,
    }


def _error(status: int, message: str, code: str, param: str | None = None) -> web.Response:
    return error_response(status, message, code, param, kind="invalid_request_error")


Handler = Callable[[web.Request], Awaitable[web.Response]]


def mount_batch(
    app: web.Application,
    config: BatchSimConfig,
    stats: BatchStats,
    *,
    seed: int = 0,
    authorized: Callable[[web.Request], bool] = lambda _request: True,
) -> BatchServer:
    """Add the Batch API routes to ``app`` (none when ``config.enabled`` is False); each
    answers 401 unless ``authorized``."""
    server = BatchServer(config, stats, seed)
    if not config.enabled:
        return server

    def guarded(handler: Handler) -> Handler:
        async def checked(request: web.Request) -> web.Response:
            if not authorized(request):
                return _error(401, "Incorrect API key provided", "invalid_api_key")
            return await handler(request)

        return checked

    routes = (
        ("POST", "/v1/files", server.upload),
        ("GET", "/v1/files/{file_id}", server.file),
        ("GET", "/v1/files/{file_id}/content", server.content),
        ("POST", "/v1/batches", server.create),
        ("GET", "/v1/batches", server.listing),
        ("GET", "/v1/batches/{batch_id}", server.retrieve),
        ("POST", "/v1/batches/{batch_id}/cancel", server.cancel),
    )
    for method, path, handler in routes:
        app.router.add_route(method, path, guarded(handler))
    return server
