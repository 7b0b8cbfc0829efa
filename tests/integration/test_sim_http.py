"""The gateway simulator over real HTTP, driven by the official openai SDK."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import aiohttp
import openai
import pytest

from swarm.sim import RunningSim, SimConfig, start_in_thread
from swarm.tokens import estimate_messages

pytestmark = pytest.mark.integration

MODEL = "kimi-k2.5"
WAIT_S = 60.0
"""A generous deadline for a condition the simulator reaches (never a timing bound)."""


@pytest.fixture(scope="module")
def sim() -> Iterator[RunningSim]:
    with start_in_thread(SimConfig()) as running:
        yield running


@pytest.fixture
def client(sim: RunningSim) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=sim.base_url, api_key="test", max_retries=0, timeout=WAIT_S) as c:
        yield c


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def _create(client: openai.OpenAI, messages: Any, model: str = MODEL, **extra: Any) -> Any:
    return client.chat.completions.create(model=model, messages=messages, **extra)


def _chat(client: openai.OpenAI, text: str, **extra: Any) -> Any:
    return _create(client, _user(text), **extra)


async def _raw(sim: RunningSim, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, sim.url + path, **kwargs) as response,
    ):
        return response.status, await response.json(content_type=None)


def test_normal_completion_parses(client: openai.OpenAI) -> None:
    completion = _chat(client, "hello <result a> <result b>")
    assert completion.id.startswith("chatcmpl-")
    assert completion.model == MODEL
    choice = completion.choices[0]
    assert choice.finish_reason == "stop"
    assert choice.message.role == "assistant"
    assert choice.message.content.startswith(f"sim:{MODEL}:")
    assert " results=2 " in choice.message.content
    usage = completion.usage
    assert usage.prompt_tokens == estimate_messages(["hello <result a> <result b>"])
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert usage.prompt_tokens_details.cached_tokens == 0
    again = _chat(client, "hello <result a> <result b>")
    assert again.choices[0].message.content == choice.message.content


def test_max_tokens_gives_finish_reason_length(client: openai.OpenAI) -> None:
    completion = _chat(client, "hello", max_completion_tokens=3)
    assert completion.choices[0].finish_reason == "length"
    assert completion.usage.completion_tokens == 3


def test_cached_tokens_on_a_repeated_long_prefix(client: openai.OpenAI) -> None:
    system = {"role": "system", "content": "policy " * 800}  # ~1400 tokens
    first = _create(client, [system, {"role": "user", "content": "one"}])
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    second = _create(client, [system, {"role": "user", "content": "two"}])
    assert second.usage.prompt_tokens_details.cached_tokens == estimate_messages(
        [system["content"]]
    )


def test_json_object_answer_is_valid_json(client: openai.OpenAI) -> None:
    completion = _chat(client, "give json", response_format={"type": "json_object"})
    data = json.loads(completion.choices[0].message.content)
    assert data["model"] == MODEL
    assert data["results"] == 0


def test_models_are_listed(client: openai.OpenAI) -> None:
    names = [model.id for model in client.models.list()]
    assert names == list(SimConfig().models)
    assert client.models.retrieve("anything-goes").id == "anything-goes"


def test_status_markers_raise_status_errors(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as bad:
        _chat(client, "x [[sim:status=400]]")
    assert bad.value.status_code == 400
    assert bad.value.body["message"].startswith("Simulated error 400")  # type: ignore[index]
    with pytest.raises(openai.InternalServerError) as server:
        _chat(client, "x [[sim:status=500]]")
    assert server.value.status_code == 500
    with pytest.raises(openai.AuthenticationError):
        _chat(client, "x [[sim:status=401]]")
    with pytest.raises(openai.RateLimitError) as limited:
        _chat(client, "x [[sim:status=429]]")
    assert limited.value.response.headers["retry-after"] == "1"


def test_hang_marker_times_out(client: openai.OpenAI, sim: RunningSim) -> None:
    hangs = sim.stats()["faults"]["hang"]
    with pytest.raises(openai.APITimeoutError):  # only the client's timeout ends a hang
        _chat(client, "x [[sim:hang]]", timeout=0.3)
    _wait_until(lambda: sim.stats()["inflight"] == 0)  # and the hang ends with its connection
    assert sim.stats()["faults"]["hang"] == hangs + 1


@pytest.mark.parametrize("finish", [False, True])
def test_a_request_whose_client_left_is_billed_only_when_the_server_finishes_it(
    finish: bool,
) -> None:
    # The client gives up at 0.2 s on a 0.8 s answer: by default the simulator stops it
    # (cancelled, not completed); finishing abandoned requests, as llama.cpp does, it
    # computes the answer to the end and counts it (completed, tokens, abandoned).
    with (
        start_in_thread(SimConfig(finish_abandoned=finish)) as sim,
        openai.OpenAI(base_url=sim.base_url, api_key="test", max_retries=0, timeout=0.2) as client,
    ):
        with pytest.raises(openai.APITimeoutError):
            _chat(client, "x [[sim:latency_ms=800]]")
        _wait_until(lambda: sim.stats()["inflight"] == 0)
        stats = sim.stats()
    assert (stats["cancelled"], stats["completed"], stats["abandoned"]) == (
        (1, 1, 1) if finish else (1, 0, 0)
    )
    assert (stats["completion_tokens"] > 0) is finish


def test_drop_marker_is_a_connection_error(client: openai.OpenAI) -> None:
    with pytest.raises(openai.APIConnectionError) as caught:
        _chat(client, "x [[sim:drop]]")
    assert not isinstance(caught.value, openai.APITimeoutError)


def test_bad_json_marker_comes_back_as_text(client: openai.OpenAI) -> None:
    # The SDK does not raise for a non-JSON 200: without strict validation it returns
    # the body text (a str) instead of a ChatCompletion.
    answer = _chat(client, "x [[sim:bad_json]]")
    assert isinstance(answer, str)
    assert answer.startswith("<html>")


def test_empty_choices_and_no_usage_markers(client: openai.OpenAI) -> None:
    empty = _chat(client, "x [[sim:empty_choices]]")
    assert empty.choices == []
    assert empty.usage.completion_tokens == 0
    bare = _chat(client, "x [[sim:no_usage]]")
    assert bare.usage is None
    assert bare.choices[0].message.content.startswith("sim:")


def test_latency_marker(client: openai.OpenAI) -> None:
    start = time.monotonic()
    _chat(client, "x [[sim:latency_ms=200]]")
    assert time.monotonic() - start >= 0.19  # a floor only: a busy machine is never faster


def test_stream_is_rejected(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        _chat(client, "x", stream=True)
    assert caught.value.body["param"] == "stream"  # type: ignore[index]


def test_malformed_requests_get_openai_errors(sim: RunningSim) -> None:
    url = "/v1/chat/completions"
    status, body = asyncio.run(_raw(sim, "POST", url, data=b"{not json"))
    assert status == 400
    assert set(body["error"]) >= {"message", "type", "code"}
    status, body = asyncio.run(_raw(sim, "POST", url, json={"model": MODEL, "messages": []}))
    assert status == 400
    assert body["error"]["type"] == "invalid_request_error"
    assert asyncio.run(_raw(sim, "GET", "/health")) == (200, {"status": "ok"})


def test_rpm_limit_gives_429_with_retry_after() -> None:
    with (
        start_in_thread(SimConfig(rpm=2)) as limited,
        openai.OpenAI(base_url=limited.base_url, api_key="t", max_retries=0) as client,
    ):
        raw: Any = client.chat.completions.with_raw_response
        ok = raw.create(model=MODEL, messages=_user("a"))
        assert ok.headers["x-ratelimit-limit-requests"] == "2"
        assert ok.headers["x-ratelimit-remaining-requests"] == "1"
        _chat(client, "b")
        with pytest.raises(openai.RateLimitError) as caught:
            _chat(client, "c")
        headers = caught.value.response.headers
        assert 55 < float(headers["retry-after"]) <= 60
        assert headers["x-ratelimit-remaining-requests"] == "0"
        assert float(headers["x-ratelimit-reset-requests"].removesuffix("s")) > 55
        assert "x-ratelimit-remaining-tokens" in headers
        assert _create(client, _user("x"), model="gpt-4.1").usage is not None  # per model
        stats = limited.stats()
        assert stats["rate_limited"] == 1
        assert stats["windows"][MODEL]["max_requests_60s"] == 2


async def _429_while_a_call_holds_the_only_slot(sim: RunningSim) -> tuple[int, float, int]:
    """A ten-minute call takes the simulator's one slot; another call meanwhile, then once
    the first is cancelled: (status, Retry-After, status)."""
    url = f"{sim.base_url}/chat/completions"
    async with aiohttp.ClientSession() as session:

        async def call(text: str) -> tuple[int, float]:
            body = {"model": MODEL, "messages": _user(text)}
            async with session.post(url, json=body) as response:
                await response.read()
                return response.status, float(response.headers.get("retry-after", "0"))

        slow = asyncio.ensure_future(call("slow [[sim:latency_ms=600000]]"))
        deadline = time.monotonic() + WAIT_S
        while (await _stats(session, sim))["inflight"] < 1:
            assert time.monotonic() < deadline, "the slow call never arrived"
            await asyncio.sleep(0.02)
        limited, retry_after = await call("fast")
        slow.cancel()
        await asyncio.gather(slow, return_exceptions=True)
        while (await _stats(session, sim))["inflight"]:
            assert time.monotonic() < deadline, "the slow call's slot never came back"
            await asyncio.sleep(0.02)
        served, _ = await call("fast again")
        return limited, retry_after, served


def test_max_concurrent_gives_429_until_the_slot_frees() -> None:
    with start_in_thread(SimConfig(max_concurrent=1)) as limited:
        first, retry_after, again = asyncio.run(_429_while_a_call_holds_the_only_slot(limited))
    assert first == 429
    assert 0 < retry_after <= 600  # until the call holding the slot is due
    assert again == 200


def test_random_faults_use_their_rates() -> None:
    config = SimConfig(rate_limit_rate=1.0, spurious_retry_after_s=0.25)
    with (
        start_in_thread(config) as faulty,
        openai.OpenAI(base_url=faulty.base_url, api_key="t", max_retries=0) as client,
    ):
        with pytest.raises(openai.RateLimitError) as caught:
            _chat(client, "x")
        assert caught.value.response.headers["retry-after"] == "0.25"
    with (
        start_in_thread(SimConfig(error_rate=1.0)) as failing,
        openai.OpenAI(base_url=failing.base_url, api_key="t", max_retries=0) as client,
    ):
        with pytest.raises(openai.InternalServerError) as server:
            _chat(client, "x")
        assert server.value.status_code in (500, 502, 503)
        assert failing.stats()["errors"] == 1


def test_api_key_is_enforced_when_configured() -> None:
    with start_in_thread(SimConfig(api_key="sekret")) as keyed:
        with (
            openai.OpenAI(base_url=keyed.base_url, api_key="wrong", max_retries=0) as bad,
            pytest.raises(openai.AuthenticationError),
        ):
            _chat(bad, "x")
        with openai.OpenAI(base_url=keyed.base_url, api_key="sekret", max_retries=0) as good:
            assert _chat(good, "x").usage is not None
            assert len(good.models.list().data) == 5
        assert keyed.stats()["client_errors"] == 1


def test_stats_equal_the_usage_the_client_saw() -> None:
    texts = ["a", "b [[sim:no_usage]]", "c [[sim:empty_choices]]", "d [[sim:status=503]]", "e"]
    with (
        start_in_thread(SimConfig()) as fresh,
        openai.OpenAI(base_url=fresh.base_url, api_key="t", max_retries=0) as client,
    ):
        seen = {"prompt_tokens": 0, "completion_tokens": 0, "completed": 0}
        for text in texts:
            try:
                usage = _chat(client, text).usage
            except openai.APIStatusError:
                continue
            if usage is not None:
                seen["prompt_tokens"] += usage.prompt_tokens
                seen["completion_tokens"] += usage.completion_tokens
                seen["completed"] += 1
        stats = fresh.stats()
        assert {key: stats[key] for key in seen} == seen
        assert stats["models"][MODEL]["prompt_tokens"] == seen["prompt_tokens"]
        assert (stats["requests"], stats["errors"], stats["completed"]) == (5, 1, 3)
        assert stats["faults"]["no_usage"] == 1
        fresh.reset()
        assert fresh.stats()["requests"] == 0
        status, body = asyncio.run(_raw(fresh, "POST", "/stats/reset"))
        assert status == 200
        assert body["completed"] == 0


async def _flood(base_url: str, count: int) -> list[int]:
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(index: int) -> int:
            body = {"model": MODEL, "messages": _user(f"hello {index}")}
            async with session.post(f"{base_url}/chat/completions", json=body) as response:
                await response.json()
                return response.status

        return await asyncio.gather(*(one(i) for i in range(count)))


async def _held_at_once(sim: RunningSim, count: int) -> dict[str, Any]:
    """``count`` requests that each take ten minutes, sent until the simulator serves all of
    them at once; its stats at that moment. The requests are then cancelled."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def hold(index: int) -> None:
            body = {"model": MODEL, "messages": _user(f"hold {index} [[sim:latency_ms=600000]]")}
            async with session.post(f"{sim.base_url}/chat/completions", json=body) as response:
                await response.read()

        held = [asyncio.ensure_future(hold(i)) for i in range(count)]
        try:
            deadline = time.monotonic() + WAIT_S
            while (stats := await _stats(session, sim))["inflight"] < count:
                assert time.monotonic() < deadline, stats
                await asyncio.sleep(0.05)
            return stats
        finally:
            for request in held:
                request.cancel()
            await asyncio.gather(*held, return_exceptions=True)


async def _stats(session: aiohttp.ClientSession, sim: RunningSim) -> dict[str, Any]:
    async with session.get(f"{sim.url}/stats") as response:
        return await response.json()  # type: ignore[no-any-return]


def test_a_thousand_concurrent_requests_all_succeed() -> None:
    # Concurrency without a clock: the simulator holds 1000 requests at the same moment
    # (none is queued behind another), and each of 1000 concurrent ones gets its answer.
    with start_in_thread(SimConfig(latency_ms=500)) as busy:
        held = asyncio.run(_held_at_once(busy, 1000))
        _wait_until(lambda: busy.stats()["inflight"] == 0)  # a closed connection ends its call
        statuses = asyncio.run(_flood(busy.base_url, 1000))
        stats = busy.stats()
    assert held["inflight"] == 1000
    assert statuses == [200] * 1000
    assert (stats["completed"], stats["cancelled"]) == (1000, 1000)


def _wait_until(condition: Any, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_stop_is_idempotent_and_closes_the_port() -> None:
    running = start_in_thread(SimConfig())
    assert asyncio.run(_raw(running, "GET", "/health"))[0] == 200
    running.stop()
    running.stop()
    with pytest.raises(aiohttp.ClientConnectionError):
        asyncio.run(_raw(running, "GET", "/health"))


def test_the_two_kinds_of_429_tell_a_noisy_gateway_from_a_tenant_limit() -> None:
    from swarm.calls.admission.feedback import exhausted_of

    def limited(config: SimConfig) -> list[openai.RateLimitError]:
        with (
            start_in_thread(config) as sim,
            openai.OpenAI(base_url=sim.base_url, api_key="t", max_retries=0) as client,
        ):
            out = []
            for i in range(12):
                try:
                    _chat(client, f"x{i}")
                except openai.RateLimitError as exc:
                    out.append(exc)
            return out

    # random 429s (an overloaded upstream): not tied to the rate; the window has room
    noisy = limited(SimConfig(rpm=1000, rate_limit_rate=0.5, spurious_retry_after_s=0.25))
    assert noisy and not any(exhausted_of(exc) for exc in noisy)
    assert {exc.response.headers["retry-after"] for exc in noisy} == {"0.25"}
    # window 429s: the tenant's limit is used up, and the gateway says so
    capped = limited(SimConfig(rpm=3))
    assert len(capped) == 9 and all(exhausted_of(exc) for exc in capped)
