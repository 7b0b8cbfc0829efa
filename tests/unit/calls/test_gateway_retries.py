from __future__ import annotations

from typing import Any

import httpx2
from doubles import MockGateway, completion

from swarm.calls.gateway import send
from swarm.calls.request import CallRequest
from swarm.calls.retries import call_with_retries
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
