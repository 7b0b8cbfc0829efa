"""Unit-test doubles: an openai client over httpx's MockTransport."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import httpx2
import openai

from swarm.calls.runtime import Runtime
from swarm.catalog import Catalog
from swarm.records import JobSpec

Handler = Callable[[dict[str, Any], int], httpx2.Response]


def completion(
    content: str,
    prompt: int = 10,
    completion_tokens: int = 5,
    cached: int = 0,
    finish: str = "stop",
    reasoning: str | None = None,
) -> httpx2.Response:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    return httpx2.Response(
        200,
        json={
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": finish,
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt + completion_tokens,
                "prompt_tokens_details": {"cached_tokens": cached},
            },
        },
    )


class MockGateway:
    """Answers chat completions with ``handler(body, call_number)``; records requests."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        return self.handler(body, len(self.requests))

    def client(self) -> openai.OpenAI:
        http = httpx2.Client(transport=httpx2.MockTransport(self))
        return openai.OpenAI(base_url="http://gw/v1", api_key="k", max_retries=0, http_client=http)


def job_spec(n: int, job_id: str = "j1", **fields: Any) -> JobSpec:
    """A job of ``n`` kimi-k2.5 nodes ``n00``, ``n01``, ... (``fields`` override)."""
    return JobSpec(
        job_id=job_id,
        instruction="find bugs",
        aggregate_instruction="merge",
        model="kimi-k2.5",
        aggregate_model="kimi-k2.5",
        node_ids=tuple(f"n{i:02d}" for i in range(n)),
        input_refs=tuple(f"f{i}" for i in range(n)),
        submitted_at=time.time(),
        **fields,
    )


def new_job(rt: Runtime, n: int = 4, ratio: float = 0.5) -> JobSpec:
    spec = JobSpec(
        job_id="j1",
        instruction="find bugs",
        aggregate_instruction="merge",
        model="kimi-k2.5",
        aggregate_model="kimi-k2.5",
        node_ids=tuple(f"n{i}" for i in range(n)),
        input_refs=tuple(f"f{i}.py" for i in range(n)),
        submitted_at=time.time(),
        min_success_ratio=ratio,
    )
    rt.store.create_job(spec, [f"input text {i}" for i in range(n)])
    return spec


def tool_call_answer(
    *calls: tuple[str, str], prompt: int = 10, reasoning: str | None = None
) -> httpx2.Response:
    """An answer asking for tool calls: (name, raw arguments) each, ids ``c0``, ``c1``...;
    with a ``reasoning_content`` when ``reasoning`` is given."""
    tool_calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": args}}
        for i, (name, args) in enumerate(calls)
    ]
    message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": tool_calls}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    return httpx2.Response(
        200,
        json={
            "id": "chatcmpl-t",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {"prompt_tokens": prompt, "completion_tokens": 7, "total_tokens": prompt + 7},
        },
    )


def as_local(catalog: Catalog) -> Catalog:
    """``catalog`` with every backend declared ``kind = "local"`` (the local call path:
    pacing, overtime, held permits, late answers; swarm.calls.local)."""
    backends = {
        name: spec.model_copy(update={"kind": "local"}) for name, spec in catalog.backends.items()
    }
    return catalog.model_copy(update={"backends": backends})
