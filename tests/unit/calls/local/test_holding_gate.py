"""The gate of a local backend's calls: held permits and late answers."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import httpx2
import openai
import pytest

from swarm.calls.admission import AdmissionPolicy, MemoryAdmission, Outcome, Permit, Verdict
from swarm.calls.admission.gate import MAX_JITTER_S, Gate
from swarm.calls.local.abandoned import AbandonedPermits
from swarm.calls.local.gate import HoldingGate
from swarm.calls.local.overtime import Overtime
from swarm.calls.request import Answer
from swarm.catalog import ModelSpec, load_catalog
from swarm.errors import RetryLater
from swarm.records import Usage


def test_a_request_read_past_its_deadline_keeps_its_permit_until_it_ends() -> None:
    model = load_catalog().model("kimi-k2.5").model_copy(update={"max_inflight": 1})
    ctl = MemoryAdmission(AdmissionPolicy())
    gate = HoldingGate(ctl, model, "job", 10, max_wait_s=0.0, max_countdown_s=60.0,
                may_requeue=True, sleep=lambda _: None)  # fmt: skip
    overtime, release = Overtime(grace_s=30, max_requests=1), threading.Event()
    late = Answer("late", Usage(prompt_tokens=30, completion_tokens=20), "stop")

    def request(read_timeout_s: float | None) -> Answer:
        assert release.wait(10.0)
        return late

    with pytest.raises(openai.APITimeoutError):  # the node times out as before
        gate.call(lambda: overtime.send(request, 0.05, lambda outcome, latency_s: None))
    assert ctl.counters(model).inflight == 1  # the one-slot gateway is still computing it
    other = HoldingGate(ctl, model, "job", 10, max_wait_s=0.0, max_countdown_s=60.0,
                        may_requeue=True, sleep=lambda _: None)  # fmt: skip
    with pytest.raises(RetryLater) as info:  # another call waits for it, back in the queue
        other.call(lambda: late)
    assert info.value.reason == "inflight"
    release.set()
    deadline = time.monotonic() + 10.0
    while ctl.counters(model).inflight and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ctl.counters(model).inflight == 0
    assert other.call(lambda: late) == late


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def hung_call(gate: Gate, hang: threading.Event) -> Overtime:
    """A call whose request the gateway never answers (until ``hang`` is set): the node
    times out at 0.05 s and the request goes on in overtime (returned)."""
    overtime = Overtime(grace_s=30, max_requests=1)

    def request(read_timeout_s: float | None) -> Answer:
        assert hang.wait(10.0)
        raise openai.APITimeoutError(request=httpx2.Request("POST", "http://gw/v1"))

    with pytest.raises(openai.APITimeoutError):
        gate.call(lambda: overtime.send(request, 0.05, lambda outcome, latency_s: None))
    return overtime


def end_hung(h: HungSetup) -> None:
    """Let the hung request end, and wait until its end was handled (its overtime thread is
    idle again: the permit's end callbacks ran)."""
    h.hang.set()
    deadline = time.monotonic() + 10.0
    while h.overtime._idle == 0:
        assert time.monotonic() < deadline
        time.sleep(0.01)


class RecordingAdmission(MemoryAdmission):
    """Memory admission that keeps the outcome of every finished permit."""

    def __init__(self) -> None:
        super().__init__(AdmissionPolicy())
        self.outcomes: list[Outcome] = []

    def finish(self, spec: ModelSpec, permit: Permit, outcome: Outcome) -> Verdict:
        self.outcomes.append(outcome)
        return super().finish(spec, permit, outcome)


@dataclass
class HungSetup:
    """A gate on a model with ``max_inflight`` slots, a fake clock, one call hung."""

    model: ModelSpec
    ctl: RecordingAdmission
    clock: FakeClock
    hang: threading.Event
    abandoned: AbandonedPermits
    gate: Gate
    overtime: Overtime


def one_call_hung(max_inflight: int) -> HungSetup:
    limits = {"max_inflight": max_inflight, "rps": None, "rpm": 10**9, "tpm": 10**12}
    model = load_catalog().model("kimi-k2.5").model_copy(update=limits)
    ctl, clock, hang = RecordingAdmission(), FakeClock(), threading.Event()
    abandoned = AbandonedPermits(patience_s=5.0, clock=clock)
    gate = HoldingGate(ctl, model, "job", 10, max_wait_s=60.0, max_countdown_s=60.0,
                may_requeue=False, sleep=clock.sleep, abandoned=abandoned)  # fmt: skip
    overtime = hung_call(gate, hang)
    return HungSetup(model, ctl, clock, hang, abandoned, gate, overtime)


LATE = Answer("late", Usage(prompt_tokens=30, completion_tokens=20), "stop")


def test_a_hung_request_gives_its_permit_back_when_its_backend_ends_nothing() -> None:
    h = one_call_hung(max_inflight=1)
    model, ctl, clock, abandoned, gate = h.model, h.ctl, h.clock, h.abandoned, h.gate
    late = LATE
    assert ctl.counters(model).inflight == 1 and abandoned.holding(model.backend) == 1
    assert gate.call(lambda: late) == late  # waited, then the hung request's permit went back
    assert 5.0 <= clock.now < 6.0  # one patience of (fake) time: no progress, not its end
    assert abandoned.holding(model.backend) == 0
    assert ctl.counters(model).inflight == 0
    assert ctl.outcomes[0].timed_out  # nothing ended: a loss for an adaptive limit
    end_hung(h)  # the hung request ends at last: nothing is given back twice
    assert ctl.counters(model).inflight == 0 and len(ctl.outcomes) == 2
    assert gate.try_acquire() is not None and gate.try_acquire() is None  # still one slot


def test_an_answer_to_a_request_sent_after_a_hung_one_frees_its_permit() -> None:
    h = one_call_hung(max_inflight=2)
    model, ctl, clock, gate, late = h.model, h.ctl, h.clock, h.gate, LATE
    assert ctl.counters(model).inflight == 1
    clock.now += 1.0
    assert gate.call(lambda: late) == late  # answered: a newer request overtook the hung one
    assert ctl.counters(model).inflight == 0 and clock.now == 1.0
    hung = ctl.outcomes[1]  # the answer's permit, then the hung request's
    assert hung.failed and not hung.timed_out  # a newer answer: no sign of a backend at its limit
    end_hung(h)
    assert ctl.counters(model).inflight == 0 and len(ctl.outcomes) == 2


def test_a_call_whose_request_is_still_read_waits_for_its_answer_instead_of_the_queue() -> None:
    h = one_call_hung(max_inflight=1)  # the only permit is held by the call's own request
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:  # the answer comes on the third wait
        sleeps.append(seconds)
        if len(sleeps) == 3:
            assert gate.late.offer(LATE, 2.0)

    gate = HoldingGate(h.ctl, h.model, "job", 10, max_wait_s=0.0, max_countdown_s=60.0,
                       may_requeue=True, sleep=sleep, abandoned=h.abandoned)  # fmt: skip
    gate.late.expect()
    assert gate.call(lambda: pytest.fail("no request: the late answer came")) == LATE
    assert len(sleeps) == 3 and max(sleeps) <= 1.0 + MAX_JITTER_S
    assert h.ctl.counters(h.model).inflight == 1  # only the abandoned request's permit
    with pytest.raises(RetryLater):  # nothing coming any more: a long wait goes to the queue
        gate.call(lambda: LATE)
    h.hang.set()
