"""A call's request answered after its node's deadline, through the whole call path: the
node retries as before, the late answer is billed in the ledger (never stored as the
call's answer), told to the listener, not fed to the model's pace (its latency is queueing)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import httpx2
from doubles import MockGateway, as_local, completion, new_job

from swarm.calls.admission import AdmissionPolicy, MemoryAdmission
from swarm.calls.listeners import CallListener
from swarm.calls.local.gate import HoldingGate
from swarm.calls.local.kit import LocalKit
from swarm.calls.local.overtime import Overtime
from swarm.calls.local_steps import kit_of, late_answer
from swarm.calls.pipeline import run_call
from swarm.calls.request import Answer, CallRequest
from swarm.calls.runtime import Runtime
from swarm.calls.session import CallSession
from swarm.calls.steps import CallContext
from swarm.records import ErrorKind, Usage

WAIT_S = 10.0
"""A generous deadline for a condition (never a timing bound)."""
MODEL = "kimi-k2.5"


class _Listener(CallListener):
    def __init__(self) -> None:
        self.attempts: list[ErrorKind | None] = []
        self.late: list[Usage] = []

    def attempt_finished(
        self, model: str, error_kind: ErrorKind | None, usage: Usage, latency_s: float
    ) -> None:
        self.attempts.append(error_kind)

    def late_answer(self, model: str, usage: Usage, latency_s: float) -> None:
        self.late.append(usage)


def _first_held(release: threading.Event, first: httpx2.Response) -> Callable[..., Any]:
    """The first request waits for ``release``, then answers ``first``; later ones at once."""

    def handler(body: dict[str, Any], n: int) -> httpx2.Response:
        if n == 1:
            assert release.wait(WAIT_S)
            return first
        return completion("in time", prompt=10, completion_tokens=2)

    return handler


def _runtime(
    make_runtime: Callable[..., tuple[Runtime, MockGateway]], handler: Callable[..., Any]
) -> tuple[Runtime, _Listener]:
    base, _ = make_runtime(handler)
    listener = _Listener()
    settings = base.settings.model_copy(update={"node_timeout_s": 0.2})
    local = LocalKit(overtime=Overtime(30.0, 4))
    rt = replace(base, settings=settings, listener=listener, local=local,
                 catalog=as_local(base.catalog))  # fmt: skip
    new_job(rt, 1)
    return rt, listener


def _request(rt: Runtime) -> CallRequest:
    model = rt.catalog.model(MODEL)
    return CallRequest.of("j1", "n0", model, [{"role": "user", "content": "hi"}], 32)


def _ledger_calls(rt: Runtime, calls: int) -> Usage:
    """The job's ledger usage once it counts ``calls`` calls (polled)."""
    deadline = time.monotonic() + WAIT_S
    while (line := rt.store.ledger("j1").get(MODEL)) is None or line.calls < calls:
        assert time.monotonic() < deadline, rt.store.ledger("j1")
        time.sleep(0.01)
    return line.usage


def test_a_late_answer_is_billed_and_told_but_neither_paced_nor_the_calls_answer(
    make_runtime: Callable[..., tuple[Runtime, MockGateway]],
) -> None:
    release = threading.Event()
    late = completion("too late", prompt=10, completion_tokens=300)
    rt, listener = _runtime(make_runtime, _first_held(release, late))

    result = run_call(rt, _request(rt))

    assert result.ok and result.attempts == 2  # timed out, retried, answered
    assert result.answer is not None and result.answer.content == "in time"
    assert listener.attempts == [ErrorKind.TIMEOUT, None]
    assert rt.store.ledger("j1")[MODEL].calls == 1
    release.set()
    usage = _ledger_calls(rt, 2)
    assert usage == Usage(prompt_tokens=20, completion_tokens=302)
    assert listener.late == [Usage(prompt_tokens=10, completion_tokens=300)]
    assert (
        kit_of(rt).pacing.pace(MODEL, "").weight < 1.5
    )  # only the answer in time observed (weight 1)
    stored = rt.store.answer("j1", _request(rt).key)
    assert stored is not None and stored.content == "in time"


def test_a_late_unusable_answer_is_billed_what_it_carries(
    make_runtime: Callable[..., tuple[Runtime, MockGateway]],
) -> None:
    release = threading.Event()
    no_choices = httpx2.Response(200, json={"choices": [], "usage": {"prompt_tokens": 10}})
    rt, listener = _runtime(make_runtime, _first_held(release, no_choices))

    assert run_call(rt, _request(rt)).ok
    release.set()
    assert _ledger_calls(rt, 2) == Usage(prompt_tokens=20, completion_tokens=2)
    assert listener.late == [Usage(prompt_tokens=10)]


def test_a_late_answer_that_comes_while_the_call_retries_is_its_answer(
    make_runtime: Callable[..., tuple[Runtime, MockGateway]],
) -> None:
    # One call in flight: the retry waits for the permit the abandoned request holds, so
    # the late answer comes first and the retry takes it instead of asking again.
    release = threading.Event()
    late = completion("late but whole", prompt=10, completion_tokens=300)
    rt, listener = _runtime(make_runtime, _first_held(release, late))
    rt = replace(rt, admission=MemoryAdmission(AdmissionPolicy()))
    one_slot = rt.catalog.model(MODEL).model_copy(update={"max_inflight": 1})
    request = replace(_request(rt), model=one_slot)
    threading.Timer(0.5, release.set).start()

    result = run_call(rt, request)

    assert result.ok and result.attempts == 2  # timed out, then took the late answer
    assert result.answer is not None and result.answer.content == "late but whole"
    assert listener.attempts == [ErrorKind.TIMEOUT, None] and listener.late == []
    line = rt.store.ledger("j1")[MODEL]
    assert (line.calls, line.usage) == (1, Usage(prompt_tokens=10, completion_tokens=300))
    stored = rt.store.answer("j1", request.key)
    assert stored is not None and stored.content == "late but whole"
    assert rt.admission.counters(one_slot).inflight == 0


def test_a_late_answer_after_the_call_ended_is_billed_as_unused(
    make_runtime: Callable[..., tuple[Runtime, MockGateway]],
) -> None:
    release = threading.Event()
    rt, listener = _runtime(make_runtime, _first_held(release, completion("late", prompt=10)))
    gate = HoldingGate(rt.admission, rt.catalog.model(MODEL), "j1", 10, max_wait_s=1.0,
                       max_countdown_s=1.0, may_requeue=False)  # fmt: skip
    call = CallContext(rt, CallSession(rt, _request(rt)), gate)
    assert gate.late.close() is None  # the call ended
    late_answer(call, _request(rt), Answer("late", Usage(prompt_tokens=10), "stop"), 1.5)
    assert listener.late == [Usage(prompt_tokens=10)]
    assert rt.store.ledger("j1")[MODEL].calls == 1
