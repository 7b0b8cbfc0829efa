from __future__ import annotations

import json
from typing import Any

import httpx2
import openai
import pytest
from doubles import MockGateway, completion

from swarm.calls import gateway
from swarm.calls.gateway import send
from swarm.calls.request import CallRequest
from swarm.calls.retries import call_with_retries
from swarm.calls.retry_policy import BadResponseError
from swarm.catalog import load_catalog
from swarm.records import ErrorKind, Usage
from swarm.settings import Settings

SPEC = load_catalog().model("kimi-k2.5")
MSGS = [{"role": "user", "content": "hi"}]


def run(gw: MockGateway, settings: Settings, sleeps: list[float] | None = None) -> Any:
    client = gw.client()
    request = CallRequest.of("j", "n0", SPEC, MSGS, 64)
    return call_with_retries(
        lambda: send(client, request),
        max_attempts=settings.max_attempts,
        backoff_max_s=settings.backoff_max_s,
        sleep=(sleeps.append if sleeps is not None else lambda s: None),
    )


def test_success_records_usage_and_sends_gateway_name(fast_settings: Settings) -> None:
    gw = MockGateway(lambda body, n: completion("hello", prompt=12, completion_tokens=3, cached=4))
    result = run(gw, fast_settings)
    assert result.answer.content == "hello" and result.attempts == 1
    assert result.usage == Usage(prompt_tokens=12, completion_tokens=3, cached_tokens=4)
    assert gw.requests[0]["model"] == "kimi-k2.5" and gw.requests[0]["max_tokens"] == 64


def test_429_then_success_waits_at_least_retry_after(fast_settings: Settings) -> None:
    def handler(body: dict[str, Any], n: int) -> httpx2.Response:
        if n == 1:
            return httpx2.Response(429, headers={"Retry-After": "0.7"}, json={"error": {}})
        return completion("ok")

    sleeps: list[float] = []
    result = run(MockGateway(handler), fast_settings, sleeps)
    assert result.answer is not None and result.attempts == 2
    assert sleeps == [0.7]
    assert len(result.billed) == 1  # the 429 billed nothing


def test_transient_errors_stop_after_max_attempts(fast_settings: Settings) -> None:
    gw = MockGateway(lambda body, n: httpx2.Response(503, json={"error": {"message": "busy"}}))
    result = run(gw, fast_settings)
    assert result.answer is None and result.attempts == 3 == len(gw.requests)
    assert result.error_kind is ErrorKind.SERVER_ERROR and "503" in (result.error or "")


def test_non_retryable_errors_are_not_retried(fast_settings: Settings) -> None:
    for status, kind in (
        (400, ErrorKind.BAD_REQUEST),
        (401, ErrorKind.AUTH),
        (404, ErrorKind.NOT_FOUND),
        (422, ErrorKind.BAD_REQUEST),
    ):
        gw = MockGateway(lambda body, n, s=status: httpx2.Response(s, json={"error": {}}))
        result = run(gw, fast_settings)
        assert (result.attempts, result.error_kind) == (1, kind)


def test_bad_bodies_are_bad_response_and_retried(fast_settings: Settings) -> None:
    def handler(body: dict[str, Any], n: int) -> httpx2.Response:
        if n == 1:
            return httpx2.Response(
                200, text="<html>oops</html>", headers={"content-type": "text/html"}
            )
        if n == 2:
            return httpx2.Response(
                200,
                json={
                    "id": "x",
                    "object": "chat.completion",
                    "created": 0,
                    "model": "m",
                    "choices": [],
                },
            )
        return completion("third time")

    result = run(MockGateway(handler), fast_settings)
    assert result.answer.content == "third time" and result.attempts == 3


def test_connection_errors_are_retried(fast_settings: Settings) -> None:
    def handler(body: dict[str, Any], n: int) -> httpx2.Response:
        if n == 1:
            raise httpx2.ConnectError("refused")
        return completion("ok")

    result = run(MockGateway(handler), fast_settings)
    assert result.answer is not None and result.attempts == 2


def test_missing_usage_counts_as_zero_and_length_is_kept(fast_settings: Settings) -> None:
    def handler(body: dict[str, Any], n: int) -> httpx2.Response:
        r = completion("cut", finish="length").json()
        del r["usage"]
        return httpx2.Response(200, json=r)

    result = run(MockGateway(handler), fast_settings)
    assert result.usage == Usage() and result.answer.finish_reason == "length"


def test_the_request_carries_the_clients_key_and_the_body_as_json() -> None:
    seen: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return completion("ok")

    http = httpx2.Client(transport=httpx2.MockTransport(handler))
    client = openai.OpenAI(base_url="http://gw/v1/", api_key="k-1", max_retries=0, http_client=http)
    answer = send(client, CallRequest.of("j", "n0", SPEC, MSGS, 64))
    assert answer.content == "ok"
    (request,) = seen
    assert str(request.url) == "http://gw/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer k-1"
    assert request.headers["content-type"] == "application/json"
    assert json.loads(request.content)["messages"] == MSGS


def test_timeouts_and_status_errors_keep_the_sdks_types() -> None:
    def timeout(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ReadTimeout("slow", request=request)

    request = CallRequest.of("j", "n0", SPEC, MSGS, 64)
    http = httpx2.Client(transport=httpx2.MockTransport(timeout))
    client = openai.OpenAI(base_url="http://gw/v1", api_key="k", max_retries=0, http_client=http)
    with pytest.raises(openai.APITimeoutError):
        send(client, request)
    limited = MockGateway(lambda body, n: httpx2.Response(429, headers={"Retry-After": "2"}))
    with pytest.raises(openai.RateLimitError) as caught:
        send(limited.client(), request)
    assert caught.value.response.headers["retry-after"] == "2"


@pytest.mark.parametrize(
    "body",
    [b"[1, 2]", b'{"choices": "none"}', b'{"choices": [{"message": {"content": 7}}]}', b"{"],
)
def test_json_that_is_no_chat_completion_is_a_bad_response(body: bytes) -> None:
    gw = MockGateway(lambda _, n: httpx2.Response(200, content=body))
    with pytest.raises(BadResponseError):
        send(gw.client(), CallRequest.of("j", "n0", SPEC, MSGS, 64))


@pytest.mark.parametrize(
    ("headers", "reset_s"),
    [
        ({}, None),
        ({"x-ratelimit-remaining-requests": "4", "x-ratelimit-reset-requests": "2s"}, None),
        ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "2s"}, 2.0),
        ({"X-RateLimit-Remaining-Tokens": "0", "X-RateLimit-Reset-Tokens": "1m30s"}, 60.0),
        ({"x-ratelimit-remaining-tokens": "0"}, 0.0),
    ],
)
def test_an_answer_carries_a_used_up_limit_and_its_reset(
    headers: dict[str, str], reset_s: float | None
) -> None:
    def handler(body: dict[str, Any], n: int) -> httpx2.Response:
        ok = completion("ok")
        return httpx2.Response(200, content=ok.content, headers=headers)

    answer = send(MockGateway(handler).client(), CallRequest.of("j", "n0", SPEC, MSGS, 64))
    assert answer.content == "ok" and answer.limit_reset_s == reset_s


def test_the_rate_limit_headers_are_read_whole_only_when_a_limit_is_used_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    read: list[object] = []

    def parse(headers: object) -> float:
        read.append(headers)
        return 2.0

    monkeypatch.setattr(gateway, "used_up_reset_s", parse)
    left = {"x-ratelimit-remaining-requests": "4", "x-ratelimit-remaining-tokens": "900",
            "x-ratelimit-reset-requests": "2s", "x-ratelimit-reset-tokens": "1m"}  # fmt: skip
    body = completion("ok").content
    assert gateway.parse_answer(body, httpx2.Headers(left)).limit_reset_s is None
    unreadable = httpx2.Headers({**left, "x-ratelimit-remaining-tokens": "x"})
    assert gateway.parse_answer(body, unreadable).limit_reset_s is None
    assert read == []
    used = httpx2.Headers({"X-RateLimit-Remaining-Tokens": "0", "X-RateLimit-Reset-Tokens": "1m"})
    assert gateway.parse_answer(body, used).limit_reset_s == 2.0
    assert read == [used]


def test_a_calls_error_names_the_url_it_called(fast_settings: Settings) -> None:
    """A node's error says where the worker's call went (its own SWARM_BASE_URL, which the
    report's reader may not know): a refused connection, and a gateway's own answer."""

    def refuse(body: dict[str, Any], n: int) -> httpx2.Response:
        raise httpx2.ConnectError("connection refused")

    result = run(MockGateway(refuse), fast_settings)
    assert result.error_kind is ErrorKind.CONNECTION
    assert result.error.endswith("(calling http://gw/v1/chat/completions)"), result.error
    denied = run(MockGateway(lambda body, n: httpx2.Response(401, json={})), fast_settings)
    assert "401" in denied.error and "(calling http://gw/v1/chat/completions)" in denied.error


def test_the_url_in_an_error_drops_credentials_and_query() -> None:
    from swarm.calls.retries import one_line

    request = httpx2.Request("POST", "https://user:secret@gw.example:8443/v1/chat?key=sk-1")
    line = one_line(openai.APIConnectionError(request=request))
    assert line.endswith("(calling https://gw.example:8443/v1/chat)")
    assert "secret" not in line and "sk-1" not in line
    long = one_line(openai.APIConnectionError(message="x" * 1000, request=request))
    assert len(long) <= 300 and long.endswith("(calling https://gw.example:8443/v1/chat)")
    assert one_line(ValueError("no request")) == "ValueError: no request"
