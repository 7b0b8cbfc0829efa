"""Backend-level failures as backend state: a held backend's calls are not sent, a paused
one's wait without spending attempts (swarm.calls.backend_health through run_call)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import httpx2
import openai
import pytest
import redis
from doubles import MockGateway, completion, new_job

from swarm.calls.admission.gate import outcome_of_error
from swarm.calls.backend_health import Action, BackendHealth, HealthPolicy, verdict
from swarm.calls.pipeline import run_call
from swarm.calls.request import CallRequest
from swarm.calls.runtime import Runtime
from swarm.records import ErrorKind
from swarm.store.backend_holds import Hold, MemoryBackendHolds

BALANCE = (
    "Your account org-1<ak-2> is suspended due to insufficient balance, please recharge your "
    "account or check your plan and billing details"
)
MakeRuntime = Callable[..., tuple[Runtime, MockGateway]]


def refusal(status: int, kind: str, message: str, **headers: str) -> httpx2.Response:
    body = {"error": {"message": message, "type": kind}}
    return httpx2.Response(status, json=body, headers=headers)


def with_health(rt: Runtime, **policy: Any) -> Runtime:
    health = BackendHealth(MemoryBackendHolds(), HealthPolicy(**policy), sleep=lambda s: None)
    new_job(rt, 10)
    return dataclasses.replace(rt, health=health)


def call(rt: Runtime, slot: str) -> Any:
    request = CallRequest.of("j1", slot, rt.catalog.model("kimi-k2.5"),
                             [{"role": "user", "content": slot}], 64)  # fmt: skip
    return run_call(rt, request)


def test_an_empty_balance_stops_every_call_of_its_backend_until_released(
    make_runtime: MakeRuntime, caplog: pytest.LogCaptureFixture
) -> None:
    paid = False

    def gateway(body: dict[str, Any], n: int) -> httpx2.Response:
        if paid:
            return completion("ok")
        return refusal(429, "exceeded_current_quota_error", BALANCE)

    base, gw = make_runtime(gateway)
    rt = with_health(base)
    first = call(rt, "n0")
    assert (first.error_kind, first.attempts, len(gw.requests)) == (
        ErrorKind.INSUFFICIENT_BALANCE, 1, 1)  # fmt: skip
    assert "exceeded_current_quota_error" in first.error and "insufficient balance" in first.error
    later = [call(rt, f"n{i}") for i in range(1, 6)]
    assert len(gw.requests) == 1  # nothing more sent to a dead account
    assert {r.error_kind for r in later} == {ErrorKind.INSUFFICIENT_BALANCE}
    assert all(BALANCE in (r.error or "") and "swarm resume" in (r.error or "") for r in later)
    assert rt.store.rate_limited("j1") == {}  # not a rate limit
    assert "held (insufficient_balance)" in caplog.text
    paid = True
    rt.health.holds.release(["default"])
    assert call(rt, "n9").ok


def test_a_refused_key_is_final_for_its_backend(make_runtime: MakeRuntime) -> None:
    base, gw = make_runtime(
        lambda body, n: refusal(401, "invalid_authentication_error", "Invalid Authentication")
    )
    rt = with_health(base)
    results = [call(rt, f"n{i}") for i in range(4)]
    assert len(gw.requests) == 1
    assert {r.error_kind for r in results} == {ErrorKind.AUTH}
    assert "Invalid Authentication" in (results[3].error or "")


def test_a_content_filter_fails_its_node_at_once_and_only_it(make_runtime: MakeRuntime) -> None:
    def gateway(body: dict[str, Any], n: int) -> httpx2.Response:
        if body["messages"][-1]["content"] == "bad":
            message = "The request was rejected because it was considered high risk"
            return refusal(400, "content_filter", message)
        return completion("ok")

    base, _gw = make_runtime(gateway)
    rt = with_health(base)
    bad = call(rt, "bad")
    assert (bad.error_kind, bad.attempts) == (ErrorKind.CONTENT_FILTER, 1)
    assert "considered high risk" in (bad.error or "")
    assert call(rt, "good").ok


def test_an_overloaded_engine_is_retried_and_not_taken_as_a_rate_limit(
    make_runtime: MakeRuntime,
) -> None:
    message = "The engine is currently overloaded, please try again later"

    def gateway(body: dict[str, Any], n: int) -> httpx2.Response:
        return refusal(429, "engine_overloaded_error", message) if n < 3 else completion("ok")

    base, _gw = make_runtime(gateway)
    rt = with_health(base)
    result = call(rt, "n0")
    assert result.ok and result.attempts == 3
    assert rt.store.rate_limited("j1") == {}
    overloaded = refusal(429, "engine_overloaded_error", message)
    exc = base.client._make_status_error_from_response(  # the SDK's own exception
        httpx2.Response(429, content=overloaded.content, request=httpx2.Request("POST", "http://x"))
    )
    outcome = outcome_of_error(exc, 0.0, at_limit=True)
    assert not outcome.rate_limited and not outcome.exhausted  # admission learns nothing


TPD = "request reached organization TPD rate limit, current: 1500012, limit: 1500000"


def test_a_daily_limit_far_from_its_reset_fails_the_nodes_naming_it(
    make_runtime: MakeRuntime,
) -> None:
    base, gw = make_runtime(lambda body, n: refusal(429, "rate_limit_reached_error", TPD))
    rt = with_health(base, daily_limit_wait_s=60)
    results = [call(rt, f"n{i}") for i in range(3)]
    assert len(gw.requests) == 1
    assert {r.error_kind for r in results} == {ErrorKind.DAILY_LIMIT}
    assert all(TPD in (r.error or "") and "UTC" in (r.error or "") for r in results)


def test_a_daily_limit_that_resets_soon_is_waited_out_unspent(make_runtime: MakeRuntime) -> None:
    def gateway(body: dict[str, Any], n: int) -> httpx2.Response:
        if n == 1:
            return refusal(429, "rate_limit_reached_error", TPD, **{"Retry-After": "0.05"})
        return completion("ok")

    base, gw = make_runtime(gateway)
    new_job(base, 1)
    rt = dataclasses.replace(base, health=BackendHealth(MemoryBackendHolds()))  # real sleeps
    result = call(rt, "n0")
    assert result.ok and result.attempts == 1 and len(gw.requests) == 2


REFUSED = openai.APIConnectionError(request=httpx2.Request("POST", "http://gw/v1/chat"))


def connect_error(request_body: dict[str, Any], n: int) -> httpx2.Response:
    raise httpx2.ConnectError("Connection refused")


def test_one_failing_call_on_a_healthy_gateway_spends_its_own_attempts(
    make_runtime: MakeRuntime,
) -> None:
    base, gw = make_runtime(connect_error)
    rt = with_health(base)
    result = call(rt, "n0")
    assert result.error_kind is ErrorKind.CONNECTION
    assert result.attempts == base.settings.max_attempts == len(gw.requests)
    assert rt.health.current("default") is None


def test_an_outage_is_waited_out_without_spending_attempts(make_runtime: MakeRuntime) -> None:
    def gateway(body: dict[str, Any], n: int) -> httpx2.Response:
        if n <= 8:  # more refusals than a call has attempts
            raise httpx2.ConnectError("Connection refused")
        return completion("ok")

    base, gw = make_runtime(gateway)
    rt = with_health(base, probe_every_s=0.001)
    holds = rt.health.holds
    for other in ("a", "b"):  # other calls of the backend failed to connect just now
        rt.health.failed("default", other, REFUSED)
    assert holds.get("default") is None
    result = call(rt, "n0")
    assert result.ok and len(gw.requests) == 9
    assert result.attempts == 1  # the first failure showed the outage; no attempt spent
    assert holds.get("default") is None  # the probe's answer ended it


def test_an_outage_longer_than_the_window_fails_the_calls_naming_it(
    make_runtime: MakeRuntime,
) -> None:
    base, gw = make_runtime(connect_error)
    now = [1000.0]
    rt = with_health(base, outage_window_s=5)
    rt.health.clock = lambda: now[0]
    for other in ("a", "b", "c"):
        rt.health.failed("default", other, REFUSED)
    now[0] += 6
    result = call(rt, "n0")
    assert result.error_kind is ErrorKind.OUTAGE and not gw.requests
    assert "unreachable for 5 s" in (result.error or "")


@pytest.mark.parametrize(
    ("hold", "now", "action"),
    [
        (Hold(ErrorKind.INSUFFICIENT_BALANCE, "m", 0.0), 10.0, Action.FAIL),
        (Hold(ErrorKind.AUTH, "m", 0.0), 10.0, Action.FAIL),
        (Hold(ErrorKind.DAILY_LIMIT, "m", 0.0, 100.0), 10.0, Action.WAIT),
        (Hold(ErrorKind.DAILY_LIMIT, "m", 0.0, 10_000.0), 10.0, Action.FAIL),
        (Hold(ErrorKind.OUTAGE, "m", 0.0, 120.0), 10.0, Action.PROBE),
        (Hold(ErrorKind.OUTAGE, "m", 0.0, 120.0), 121.0, Action.FAIL),
    ],
)
def test_verdicts(hold: Hold, now: float, action: Action) -> None:
    assert verdict(hold, now, HealthPolicy(daily_limit_wait_s=600))[0] is action


def test_any_answer_while_the_backend_is_taken_as_down_ends_the_outage() -> None:
    health = BackendHealth(MemoryBackendHolds(), HealthPolicy())
    for other in ("a", "b", "c"):
        assert health.failed("default", other, REFUSED) is (other == "c")
    assert health.current("default") is not None
    health.answered("default", probing=False)  # e.g. a call sent before, or a slow timeout
    assert health.current("default") is None


def test_timeouts_beside_answers_are_slow_requests_not_an_outage() -> None:
    timed_out = openai.APITimeoutError(request=httpx2.Request("POST", "http://gw/v1/chat"))
    health = BackendHealth(MemoryBackendHolds(), HealthPolicy())
    health.answered("default", probing=False)
    assert not any(health.failed("default", call, timed_out) for call in "abcd")
    alone = BackendHealth(MemoryBackendHolds(), HealthPolicy())  # nothing answered lately
    assert [alone.failed("default", call, timed_out) for call in "abc"] == [False, False, True]


@pytest.mark.parametrize(
    ("status", "kind", "message"),
    [
        (429, "exceeded_current_quota_error", BALANCE),
        (429, "insufficient_quota", "You exceeded your current quota"),
        (429, "rate_limit_reached_error", TPD),
        (429, "engine_overloaded_error", "The engine is currently overloaded"),
    ],
)
def test_no_typed_429_pauses_admission_as_a_rate_limit(
    status: int, kind: str, message: str
) -> None:
    client = openai.OpenAI(base_url="http://gw/v1", api_key="k")
    answer = refusal(status, kind, message)
    exc = client._make_status_error_from_response(
        httpx2.Response(status, content=answer.content, request=httpx2.Request("POST", "http://x"))
    )
    outcome = outcome_of_error(exc, 0.0, at_limit=True)
    assert not outcome.rate_limited and not outcome.exhausted


class _Unreachable(MemoryBackendHolds):
    """Holds whose Redis cannot be reached."""

    def get(self, backend: str) -> Hold | None:
        raise redis.exceptions.ConnectionError("refused")

    def hold(self, backend: str, hold: Hold, ttl_s: float) -> None:
        raise redis.exceptions.ConnectionError("refused")


def test_holds_unreachable_leave_the_call_to_its_own_outcome(make_runtime: MakeRuntime) -> None:
    base, gw = make_runtime(lambda body, n: refusal(402, "unknown_error", "Insufficient Balance"))
    new_job(base, 2)
    rt = dataclasses.replace(base, health=BackendHealth(_Unreachable()))
    results = [call(rt, "n0"), call(rt, "n1")]
    assert {r.error_kind for r in results} == {ErrorKind.INSUFFICIENT_BALANCE}
    assert len(gw.requests) == 2  # no hold recorded: each call meets the refusal itself


def test_a_daily_limit_resetting_after_the_job_s_deadline_fails_at_once() -> None:
    hold = Hold(ErrorKind.DAILY_LIMIT, "m", 0.0, 100.0)
    policy = HealthPolicy(daily_limit_wait_s=600)
    assert verdict(hold, 10.0, policy, deadline_at=200.0)[0] is Action.WAIT
    assert verdict(hold, 10.0, policy, deadline_at=50.0)[0] is Action.FAIL


def test_a_soon_reset_after_the_job_s_deadline_fails_the_node(make_runtime: MakeRuntime) -> None:
    base, gw = make_runtime(
        lambda body, n: refusal(429, "rate_limit_reached_error", TPD, **{"Retry-After": "300"})
    )
    rt = with_health(base)
    spec = rt.store.spec("j1")
    rt.store.create_job(spec.model_copy(update={"job_id": "j2", "deadline_at": time.time() + 60}),
                        ["x"] * 10)  # fmt: skip
    request = CallRequest.of("j2", "n0", rt.catalog.model("kimi-k2.5"),
                             [{"role": "user", "content": "x"}], 64)  # fmt: skip
    result = run_call(rt, request)
    assert result.error_kind is ErrorKind.DAILY_LIMIT and len(gw.requests) == 1
    assert "deadline" in (result.error or "")
