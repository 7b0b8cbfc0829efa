"""The call path: its order is declared once and holds in behaviour; listeners cannot
change an outcome."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import httpx2
from doubles import MockGateway, completion, new_job

from swarm.calls import pipeline, steps
from swarm.calls.admission import MemoryAdmission, Outcome, Permit, Verdict
from swarm.calls.admission.limits import AdmissionPolicy
from swarm.calls.listeners import CallListener
from swarm.calls.pipeline import run_call
from swarm.calls.request import CallRequest
from swarm.calls.runtime import Runtime
from swarm.catalog import ModelSpec
from swarm.records import ErrorKind, Usage
from swarm.store import MemoryJobStore
from swarm.store.billing import BilledCall

Events = list[str]


def test_the_call_path_is_declared_in_one_order_per_backend_kind() -> None:
    assert pipeline.describe("hosted") == [
        "session", "retry", "health", "trace", "listen", "record", "hedge", "admit", "fence",
        "http",
    ]  # fmt: skip
    assert pipeline.describe("local") == [
        "session", "retry", "health", "trace", "listen", "record", "admit", "fence", "pace", "http",
    ]  # fmt: skip
    assert pipeline.PATHS["hosted"].transport is steps.transport
    assert pipeline.PATHS["local"].gate is pipeline.holding_gate_for


class _Admission(MemoryAdmission):
    def __init__(self, events: Events) -> None:
        super().__init__(AdmissionPolicy())
        self.events = events

    def acquire(self, *args: Any, **kwargs: Any) -> Any:
        self.events.append("admit")
        return super().acquire(*args, **kwargs)

    def finish(self, spec: ModelSpec, permit: Permit, outcome: Outcome) -> Verdict:
        self.events.append("admit:done")
        return super().finish(spec, permit, outcome)


class _Store(MemoryJobStore):
    def __init__(self, events: Events) -> None:
        super().__init__()
        self.events = events

    def record_call(self, job_id: str, billed: BilledCall, fence: Any = None) -> bool:
        self.events.append("record")
        return bool(super().record_call(job_id, billed, fence))


class _Listener(CallListener):
    def __init__(self, events: Events, fail: bool = False) -> None:
        self.events = events
        self.fail = fail

    def attempt_finished(
        self, model: str, error_kind: ErrorKind | None, usage: Usage, latency_s: float
    ) -> None:
        self.events.append(f"listen:{error_kind or 'ok'}")
        if self.fail:
            raise ValueError("listener bug")


def _runtime(rt: Runtime, events: Events, *, fail: bool = False) -> Runtime:
    rt = replace(
        rt,
        admission=_Admission(events),
        store=_Store(events),
        listener=_Listener(events, fail),
    )
    new_job(rt, 1)
    return rt


def _request(rt: Runtime) -> CallRequest:
    model = rt.catalog.model("kimi-k2.5")
    return CallRequest.of("j1", "n0", model, [{"role": "user", "content": "hi"}], 32)


def _gateway(events: Events, first: int = 200) -> Callable[[dict[str, Any], int], httpx2.Response]:
    def handler(body: dict[str, Any], n: int) -> httpx2.Response:
        events.append("http")
        if n == 1 and first != 200:
            return httpx2.Response(first, json={"error": {"message": "busy"}})
        return completion("answer", prompt=10, completion_tokens=2)

    return handler


def test_each_attempt_runs_listen_record_admit_http_nested_in_that_order(
    make_runtime: Callable[..., tuple[Runtime, MockGateway]],
) -> None:
    events: Events = []
    base, _ = make_runtime(_gateway(events, first=503))
    rt = _runtime(base, events)
    result = run_call(rt, _request(rt))
    assert result.ok and result.attempts == 2
    one_failed = ["admit", "http", "admit:done", "listen:server_error"]
    one_answered = ["admit", "http", "admit:done", "record", "listen:ok"]
    assert events == one_failed + one_answered


def test_a_listener_that_raises_after_a_billed_answer_changes_nothing(
    make_runtime: Callable[..., tuple[Runtime, MockGateway]],
) -> None:
    events: Events = []
    base, gw = make_runtime(_gateway(events))
    rt = _runtime(base, events, fail=True)
    result = run_call(rt, _request(rt))
    assert result.ok and result.answer is not None and result.answer.content == "answer"
    assert len(gw.requests) == 1  # no second gateway call
    assert result.attempts == 1 and result.usage == Usage(prompt_tokens=10, completion_tokens=2)
    assert rt.store.ledger("j1")["kimi-k2.5"].calls == 1


def test_the_hedge_step_is_left_out_when_the_process_does_not_hedge(
    make_runtime: Callable[..., tuple[Runtime, MockGateway]],
) -> None:
    events: Events = []
    base, _ = make_runtime(_gateway(events))
    rt = _runtime(base, events)
    request = replace(_request(rt), hedge_cap=5)  # allowed, but rt.hedger is None
    assert rt.hedger is None and run_call(rt, request).ok
    assert events == ["admit", "http", "admit:done", "record", "listen:ok"]


def test_an_auth_failure_without_a_key_says_no_key_was_sent() -> None:
    from swarm.calls.gateway import NO_KEY
    from swarm.calls.request import CallResult
    from swarm.records import ErrorKind, Usage

    failed = CallResult(None, Usage(), 1, 5, ErrorKind.AUTH, "AuthenticationError: incorrect")
    keyless = pipeline.keyless_auth(failed, NO_KEY)
    assert keyless.error is not None and keyless.error.startswith("no API key was sent")
    assert "incorrect" in keyless.error
    refused = pipeline.keyless_auth(failed, "sk-real", "MOONSHOT_API_KEY")
    assert refused.error == "the gateway refused the key in MOONSHOT_API_KEY: " + str(failed.error)
    assert "set SWARM_API_KEY (or OPENAI_API_KEY)" in str(keyless.error)
    timeout = CallResult(None, Usage(), 1, 5, ErrorKind.TIMEOUT, "slow")
    assert pipeline.keyless_auth(timeout, NO_KEY) == timeout
