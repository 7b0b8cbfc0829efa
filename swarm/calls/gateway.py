"""The HTTP end of a call: one shared openai client per process, one request, its answer.

The SDK's own retries are off (max_retries=0) so every retry passes through our policy
(swarm.calls.retry_policy) and admission. Timeouts are enforced by the HTTP client,
because Celery's threads pool ignores task time limits.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx2
import openai
from openai.types.chat import ChatCompletion

from swarm.calls.request import Answer, CallRequest
from swarm.calls.retry_policy import BadResponseError
from swarm.catalog import Catalog
from swarm.records import ToolCall, Usage
from swarm.settings import Settings


def make_client(settings: Settings, base_url: str, api_key: str) -> openai.OpenAI:
    """One client per process: pooled keep-alive connections, SDK retries off."""
    timeout = httpx2.Timeout(settings.node_timeout_s, connect=settings.connect_timeout_s)
    http = openai.DefaultHttpxClient(
        timeout=timeout,
        verify=settings.verify_tls,
        limits=httpx2.Limits(
            max_connections=settings.http_pool_size,
            max_keepalive_connections=settings.http_pool_size,
            keepalive_expiry=30.0,
        ),
    )
    return openai.OpenAI(
        base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout, http_client=http
    )


def backend_clients(
    settings: Settings, catalog: Catalog, environ: Mapping[str, str]
) -> dict[str, openai.OpenAI]:
    """A client per backend with a base URL of its own; its key is read from the variable
    its ``api_key_env`` names (else SWARM_API_KEY). Built once at start-up, at the edge."""
    default_key = settings.usable_key() or "no-key"
    clients = {}
    for backend in catalog.backends.values():
        if backend.base_url is None:
            continue
        key = environ.get(backend.api_key_env, "") if backend.api_key_env else default_key
        clients[backend.name] = make_client(settings, backend.base_url, key or "no-key")
    return clients


def send(client: openai.OpenAI, request: CallRequest) -> Answer:
    """One chat completion; raises openai errors or BadResponseError.

    Sent with the SDK's documented low-level ``client.post`` (same auth, timeouts, error
    types and typed ``ChatCompletion``) rather than ``chat.completions.create``, whose
    TypedDict transform of plain string messages cost about 0.8 ms of CPU per call, a
    third of the SDK's share at hundreds of calls per second (measured).
    """
    completion = client.post("/chat/completions", body=request.body(), cast_to=ChatCompletion)
    return answer_of(completion)


def answer_of(completion: Any) -> Answer:
    """The usable answer in a chat completion; BadResponseError (with any billed usage)
    when it has none."""
    if not hasattr(completion, "choices"):
        raise BadResponseError(f"not a chat completion: {str(completion)[:80]!r}")
    billed = _usage_of(completion) if getattr(completion, "usage", None) else None
    if not completion.choices:
        raise BadResponseError("answer has no choices", billed)
    choice = completion.choices[0]
    content = choice.message.content if choice.message else None
    calls = _tool_calls_of(choice.message)
    if content is None and not calls:
        raise BadResponseError("answer has no message content", billed)
    return Answer(
        content=content or "",
        usage=_usage_of(completion),
        finish_reason=choice.finish_reason,
        usage_missing=getattr(completion, "usage", None) is None,
        tool_calls=calls,
    )


def _tool_calls_of(message: Any) -> tuple[ToolCall, ...]:
    """The function calls of an assistant message (arguments kept as sent, even when they
    are not JSON: the agent loop answers those with the parse error)."""
    calls = []
    for index, call in enumerate(getattr(message, "tool_calls", None) or ()):
        function = getattr(call, "function", None)
        if function is None:
            continue
        calls.append(
            ToolCall(
                id=getattr(call, "id", None) or f"call_{index}",
                name=getattr(function, "name", None) or "",
                arguments=getattr(function, "arguments", None) or "",
            )
        )
    return tuple(calls)


def _usage_of(completion: Any) -> Usage:
    usage = getattr(completion, "usage", None)
    if usage is None:
        return Usage()
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) or 0
    return Usage(
        prompt_tokens=usage.prompt_tokens or 0,
        completion_tokens=usage.completion_tokens or 0,
        cached_tokens=cached,
    )
