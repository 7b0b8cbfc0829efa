"""The HTTP end of a call: one shared openai client per process, one request, its answer.

The SDK's own retries are off (max_retries=0) so every retry passes through our policy
(swarm.calls.retry_policy) and admission. Timeouts are enforced by the HTTP client,
because Celery's threads pool ignores task time limits.

A request carries only the headers a gateway uses (auth, content type, user agent): the
SDK's ``X-Stainless-*`` telemetry headers are omitted (the SDK's documented ``Omit``), and
the client keeps each merged request URL (``SwarmOpenAI``). Both cut the CPU of a request:
every header is handled again by the SDK, httpx2, httpcore2 and h11, and the URL merge
parses the base URL again on every call (ops/bench/results/sdk_request.md). A request's
options name the client's retries and timeout and the SDK's default auth scheme
(``request_options``): the SDK deep-copies the default of every option not given, on every
request (ops/bench/results/hosted_speed_cpu.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from typing import Any

import httpx2
import openai
from openai import RequestOptions
from openai._models import FinalRequestOptions

from swarm.calls.admission.feedback import int_or_none, used_up_reset_s
from swarm.calls.http_pool import SHARDS, ThreadPools
from swarm.calls.request import Answer, CallRequest
from swarm.calls.retry_policy import BadResponseError
from swarm.calls.usage import usage_of
from swarm.catalog import Catalog
from swarm.records import ErrorKind, ToolCall, Usage
from swarm.settings import Settings
from swarm.unique import unique_hex

KEEPALIVE_S = 30.0
"""An idle connection is closed after this long."""
NO_KEY = "no-key"
"""The key a client sends when none is set (the SDK needs one; a local server ignores it)."""

TELEMETRY_HEADERS = (
    "X-Stainless-Lang",
    "X-Stainless-Package-Version",
    "X-Stainless-OS",
    "X-Stainless-Arch",
    "X-Stainless-Runtime",
    "X-Stainless-Runtime-Version",
    "X-Stainless-Async",
)
"""The SDK's platform headers, omitted from every request of a ``make_client`` client."""
_DEFAULT_HEADERS: Mapping[str, Any] = {
    **dict.fromkeys(TELEMETRY_HEADERS, openai.Omit()),
    "User-Agent": f"OpenAI/Python {openai.__version__}",  # the SDK names it after the class
}
_PER_REQUEST_OMITTED = {"X-Stainless-Retry-Count": openai.Omit(),
                        "X-Stainless-Read-Timeout": openai.Omit()}  # fmt: skip
"""The SDK's per-request telemetry headers (retries taken, read timeout), omitted by
``send`` (the SDK adds them unless a request's own headers name them)."""
SDK_SECURITY = FinalRequestOptions.model_fields["security"].default
"""The auth schemes the SDK applies to a request that names none (bearer auth)."""


class SwarmOpenAI(openai.OpenAI):
    """The openai client, keeping each merged request URL: the SDK merges a path with the
    base URL (parsing and quoting both) on every request, and a worker sends one path."""

    def _prepare_url(self, url: str) -> httpx2.URL:
        return _kept_url(self.__dict__, url, super()._prepare_url)


class SwarmAsyncOpenAI(openai.AsyncOpenAI):
    """The async openai client (a hedged attempt's requests, swarm.calls.hedging), keeping
    each merged request URL as ``SwarmOpenAI`` does."""

    def _prepare_url(self, url: str) -> httpx2.URL:
        return _kept_url(self.__dict__, url, super()._prepare_url)


def _kept_url(
    attributes: dict[str, Any], url: str, prepare: Callable[[str], httpx2.URL]
) -> httpx2.URL:
    """``prepare(url)``, kept in the client's ``attributes`` for the next request."""
    urls: dict[str, httpx2.URL] = attributes.setdefault("_swarm_urls", {})
    prepared = urls.get(url)
    if prepared is None:
        prepared = urls[url] = prepare(url)
    return prepared


def make_client(
    settings: Settings,
    base_url: str,
    api_key: str,
    transport: httpx2.BaseTransport | None = None,
) -> openai.OpenAI:
    """One client per process: keep-alive connections in pools shared by a few threads each
    (swarm.calls.http_pool: ``http_pool_size`` connections at most), SDK retries off, no
    telemetry headers. ``transport`` replaces the HTTP transport (tests)."""
    http = openai.DefaultHttpxClient(
        timeout=_timeout(settings),
        verify=settings.verify_tls,
        transport=transport
        or ThreadPools(partial(_pool, settings.verify_tls), SHARDS, settings.http_pool_size),
    )
    return SwarmOpenAI(**_client_options(settings, base_url, api_key), http_client=http)


def make_async_client(settings: Settings, base_url: str, api_key: str) -> openai.AsyncOpenAI:
    """``make_client``'s async twin, for requests that are withdrawn by cancelling them
    (a hedged attempt's, on the hedger's event loop thread): the same timeouts, headers,
    kept URLs and keep-alive limits, in one pool (one thread sends on it)."""
    http = openai.DefaultAsyncHttpxClient(
        timeout=_timeout(settings), verify=settings.verify_tls,
        limits=_limits(settings.http_pool_size),
    )  # fmt: skip
    return SwarmAsyncOpenAI(**_client_options(settings, base_url, api_key), http_client=http)


def _client_options(settings: Settings, base_url: str, api_key: str) -> dict[str, Any]:
    """What both clients are made with: SDK retries off, the timeouts, no telemetry."""
    return {"base_url": base_url, "api_key": api_key, "max_retries": 0,
            "timeout": _timeout(settings), "default_headers": _DEFAULT_HEADERS}  # fmt: skip


def _timeout(settings: Settings) -> httpx2.Timeout:
    """A request's timeouts: reading closes at the node timeout."""
    return httpx2.Timeout(settings.node_timeout_s, connect=settings.connect_timeout_s)


def _limits(size: int) -> httpx2.Limits:
    """A pool of ``size`` keep-alive connections."""
    return httpx2.Limits(max_connections=size, max_keepalive_connections=size,
                         keepalive_expiry=KEEPALIVE_S)  # fmt: skip


def _pool(verify_tls: bool, size: int) -> httpx2.HTTPTransport:
    """A keep-alive pool of ``size`` connections."""
    return httpx2.HTTPTransport(verify=verify_tls, limits=_limits(size))


def backend_endpoints(
    settings: Settings, catalog: Catalog, environ: Mapping[str, str]
) -> dict[str, tuple[str, str]]:
    """Base URL and key of each backend with a base URL of its own; its key is read from
    the variable its ``api_key_env`` names (else SWARM_API_KEY)."""
    default_key = settings.usable_key() or NO_KEY
    endpoints = {}
    for backend in catalog.backends.values():
        if backend.base_url is None:
            continue
        key = environ.get(backend.api_key_env, "") if backend.api_key_env else default_key
        endpoints[backend.name] = (backend.base_url, key or NO_KEY)
    return endpoints


def backend_clients(
    settings: Settings, catalog: Catalog, environ: Mapping[str, str]
) -> dict[str, openai.OpenAI]:
    """A client per backend with a base URL of its own (see ``backend_endpoints``). Built
    once at start-up, at the edge."""
    endpoints = backend_endpoints(settings, catalog, environ)
    return {name: make_client(settings, url, key) for name, (url, key) in endpoints.items()}


def send(
    client: openai.OpenAI, request: CallRequest, read_timeout_s: float | None = None
) -> Answer:
    """One chat completion; raises openai errors or BadResponseError. ``read_timeout_s``
    replaces the client's read timeout (the node timeout) for this request: a request
    read past its node's deadline (swarm.calls.local.overtime).

    Sent with the SDK's documented low-level ``client.post`` (its auth, headers, timeouts
    and error types) asking for the raw HTTP response, which is parsed as JSON once
    (``parse_answer``, with the rate-limit headers): ``chat.completions.create`` would build a
    typed ``ChatCompletion`` and transform the messages, CPU on every call that the worker
    does not need.
    """
    response = client.post("/chat/completions", body=request.body(), cast_to=httpx2.Response,
                           options=request_options(client, read_timeout_s))  # fmt: skip
    return parse_answer(response.content, response.headers)


async def send_async(client: openai.AsyncOpenAI, request: CallRequest) -> Answer:
    """``send`` through an async client (``make_async_client``): cancelling it closes the
    request's connection at once."""
    options = request_options(client)
    body = request.body()
    response = await client.post("/chat/completions", body=body, cast_to=httpx2.Response,
                                 options=options)  # fmt: skip
    return parse_answer(response.content, response.headers)


def request_options(
    client: openai.OpenAI | openai.AsyncOpenAI, read_timeout_s: float | None = None
) -> RequestOptions:
    """The options of one request: no telemetry headers, and the values the SDK would take
    for the client's retries, its timeout (or ``read_timeout_s`` as the read timeout), the
    auth scheme and the post parser (none), given so the SDK copies no default of its own
    for them; and an idempotency key (unique per request, as the SDK's own: the openai
    client sends none as a header) so the SDK draws no uuid4 for it (swarm.unique)."""
    timeout = client.timeout
    if read_timeout_s is not None:
        timeout = _with_read(timeout, read_timeout_s)
    options: RequestOptions = {
        "headers": _PER_REQUEST_OMITTED, "max_retries": client.max_retries, "timeout": timeout,
        "security": SDK_SECURITY, "idempotency_key": unique_hex(),
    }  # fmt: skip
    # A field of FinalRequestOptions that post() takes through ``options`` (it builds them
    # with ``construct(..., **options)``) though RequestOptions does not list it: left out,
    # its NotGiven default is deep-copied on every request.
    options["post_parser"] = openai.NOT_GIVEN  # type: ignore[typeddict-unknown-key]
    return options


def _with_read(timeout: float | httpx2.Timeout | None, read_s: float) -> httpx2.Timeout:
    """The client's timeout with another read timeout."""
    if not isinstance(timeout, httpx2.Timeout):
        return httpx2.Timeout(read_s)
    return httpx2.Timeout(connect=timeout.connect, read=read_s, write=timeout.write,
                          pool=timeout.pool)  # fmt: skip


def parse_answer(content: bytes, headers: Mapping[str, str] | None = None) -> Answer:
    """The answer in a 2xx response (body and headers); BadResponseError when the body is
    not JSON or has no usable answer."""
    try:
        completion = json.loads(content)
    except ValueError:
        raise BadResponseError(f"not a chat completion: {content[:80]!r}") from None
    answer = answer_from_json(completion)
    if headers is not None and used_up(headers):
        answer = replace(answer, limit_reset_s=used_up_reset_s(headers))
    return answer


_REMAINING = ("x-ratelimit-remaining-requests", "x-ratelimit-remaining-tokens")
"""Headers that say what is left of the tenant's limits (``get`` on httpx headers ignores
case)."""


def used_up(headers: Mapping[str, str]) -> bool:
    """True when an x-ratelimit-remaining-* header says no request or token is left: only
    then are the rate-limit headers read whole (swarm.calls.admission.feedback), not on
    every answer of a gateway that sends them."""
    return any(int_or_none(headers.get(name)) == 0 for name in _REMAINING)


def answer_from_json(completion: Any) -> Answer:
    """The usable answer in a chat completion (parsed JSON); BadResponseError (with any
    billed usage) when it has none."""
    if not isinstance(completion, dict) or "choices" not in completion:
        raise BadResponseError(f"not a chat completion: {str(completion)[:80]!r}")
    usage = completion.get("usage")
    usage = usage if isinstance(usage, dict) else None
    billed = usage_of(usage) if usage else None
    choices = completion["choices"]
    if not isinstance(choices, list) or not choices:
        raise BadResponseError("answer has no choices", billed)
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = choice.get("message")
    message = message if isinstance(message, dict) else {}
    content = message.get("content")
    calls = _tool_calls_of(message)
    finish = choice.get("finish_reason")
    reasoning = _text(message.get("reasoning_content"))
    if not calls and finish == "length" and not (isinstance(content, str) and content.strip()):
        raise BadResponseError(_cut_text(reasoning, billed), billed, ErrorKind.REASONING_CUT)
    if not isinstance(content, str) and not calls:
        raise BadResponseError("answer has no message content", billed)
    return Answer(
        content=content if isinstance(content, str) else "",
        usage=usage_of(usage),
        finish_reason=finish if isinstance(finish, str) else None,
        usage_missing=usage is None,
        tool_calls=calls,
        response_id=_text(completion.get("id")) or None,
        response_model=_text(completion.get("model")) or None,
        reasoning=reasoning,
    )


def _cut_text(reasoning: str, billed: Usage | None) -> str:
    """Why an answer cut at its cap with no content is not used."""
    spent = f"all {billed.completion_tokens} completion tokens" if billed else "the whole cap"
    if reasoning:
        return (
            f"the model's reasoning used {spent} (finish_reason length) and left no "
            "content: raise max_tokens for this model, or turn its thinking off"
        )
    return f"the answer stopped at max_tokens with no content ({spent}, finish_reason length)"


def _tool_calls_of(message: dict[str, Any]) -> tuple[ToolCall, ...]:
    """The function calls of an assistant message (arguments kept as sent, even when they
    are not JSON: the agent loop answers those with the parse error)."""
    calls = []
    for index, call in enumerate(message.get("tool_calls") or ()):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            continue
        calls.append(
            ToolCall(
                id=_text(call.get("id")) or f"call_{index}",
                name=_text(function.get("name")),
                arguments=_text(function.get("arguments")),
            )
        )
    return tuple(calls)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
