"""The gate: short waits sleep in the task, long ones go back to the queue; outcomes."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import httpx2
import openai
import pytest
import redis

from swarm.calls.admission import AdmissionPolicy, MemoryAdmission, Outcome, Permit, Verdict
from swarm.calls.admission.abandoned import AbandonedPermits
from swarm.calls.admission.gate import MAX_JITTER_S, Gate, outcome_of_error, wait_or_requeue
from swarm.calls.late import LateAnswers
from swarm.calls.overtime import Overtime
from swarm.calls.request import Answer
from swarm.catalog import ModelSpec, load_catalog
from swarm.errors import RetryLater, SwarmError
from swarm.jobs.queueing import job_priority
from swarm.records import Usage


@pytest.mark.parametrize(
    ("wait", "may_requeue", "sleeps"),
    [(0.5, True, 0.5), (2.0, True, 2.0), (0.5, False, 0.5), (30.0, False, 30.0)],
)
def test_short_waits_sleep_in_the_task(wait: float, may_requeue: bool, sleeps: float) -> None:
    assert wait_or_requeue(wait, "rpm", 2.0, 60.0, may_requeue) == sleeps


@pytest.mark.parametrize(("wait", "countdown"), [(2.5, 2.5), (45.0, 45.0), (600.0, 60.0)])
def test_long_waits_go_back_to_the_queue(wait: float, countdown: float) -> None:
    with pytest.raises(RetryLater) as info:
        wait_or_requeue(wait, "paused", 2.0, 60.0, True)
    assert info.value.delay_s == countdown and info.value.reason == "paused"
    assert isinstance(info.value, SwarmError)


def status_error(status: int, headers: dict[str, str]) -> openai.APIStatusError:
    request = httpx2.Request("POST", "http://gw/v1/chat/completions")
    response = httpx2.Response(status, headers=headers, request=request)
    cls = openai.RateLimitError if status == 429 else openai.InternalServerError
    return cls("limited", response=response, body=None)


def test_outcomes_of_errors() -> None:
    limited = outcome_of_error(status_error(429, {"Retry-After": "4"}), 0.0)
    assert limited == Outcome(used_tokens=0, rate_limited=True, retry_after_s=4.0, failed=True)
    at_limit = {"Retry-After": "4", "x-ratelimit-remaining-requests": "0"}
    exhausted = outcome_of_error(status_error(429, at_limit), 0.0)
    assert exhausted == Outcome(
        used_tokens=0, rate_limited=True, retry_after_s=4.0, exhausted=True, failed=True
    )
    assert outcome_of_error(status_error(503, {}), 0.0) == Outcome(used_tokens=0, failed=True)


def test_gate_waits_then_requeues_and_feeds_back_429s() -> None:
    model = load_catalog().model("kimi-k2.5").model_copy(update={"rps": 5})
    ctl = MemoryAdmission(AdmissionPolicy())
    slept: list[float] = []
    gate = Gate(ctl, model, "job", 10, max_wait_s=2.0, max_countdown_s=60.0,
                may_requeue=True, sleep=slept.append, rand=lambda: 0.0)  # fmt: skip
    answer = Answer("ok", Usage(prompt_tokens=3, completion_tokens=4), "stop")
    assert gate.call(lambda: answer) == answer
    assert gate.call(lambda: answer) == answer
    assert slept and 0.2 < slept[0] <= 0.3  # the second waited one rps interval in the task

    def limited() -> Answer:
        raise status_error(429, {"Retry-After": "9", "x-ratelimit-remaining-requests": "0"})

    with pytest.raises(RetryLater) as info:  # a 9 s pause: back to the queue at once
        gate.call(limited)
    assert info.value.delay_s == 9.0 and isinstance(info.value.__cause__, openai.RateLimitError)
    assert info.value.attempted and ctl.counters(model).rate_limited == 1
    with pytest.raises(RetryLater) as info:  # the limit is used up: every caller is paused
        gate.call(lambda: answer)
    assert 8.0 < info.value.delay_s <= 9.0
    fresh = MemoryAdmission(AdmissionPolicy())
    short = Gate(fresh, model, "job", 10, max_wait_s=2.0, max_countdown_s=60.0,
                 may_requeue=False, sleep=slept.append)  # fmt: skip
    with pytest.raises(openai.RateLimitError):  # may not requeue: the 429 goes to the retries
        short.call(limited)


def test_a_booked_slot_is_slept_before_the_call() -> None:
    model = load_catalog().model("kimi-k2.5").model_copy(update={"rps": 5})
    ctl = MemoryAdmission(AdmissionPolicy())
    slept: list[float] = []
    gate = Gate(ctl, model, "job", 10, max_wait_s=2.0, max_countdown_s=60.0,
                may_requeue=True, reserve_s=1.0, sleep=slept.append)  # fmt: skip
    answer = Answer("ok", Usage(prompt_tokens=3, completion_tokens=4), "stop")
    for _ in range(3):
        gate.call(lambda: answer)
    assert len(slept) == 2  # no refusal, no second ask: one sleep per booked call
    assert 0.2 < slept[0] < slept[1] <= 0.6
    assert ctl.counters(model).refused == 0


@pytest.mark.parametrize(
    ("nodes", "priority"), [(1, 0), (10, 0), (100, 0), (101, 3), (1000, 3), (5000, 6), (10**5, 9)]
)
def test_smaller_jobs_are_queued_first(nodes: int, priority: int) -> None:
    assert job_priority(nodes) == priority


def test_a_429_while_waiting_for_a_booked_slot_pauses_the_booked_call_too() -> None:
    model = load_catalog().model("kimi-k2.5").model_copy(update={"rps": 5})
    ctl = MemoryAdmission(AdmissionPolicy())
    other = ctl.acquire(model, "job", 10).permit
    assert other is not None

    def sleep_while_a_429_arrives(seconds: float) -> None:
        assert other is not None
        limited = Outcome(used_tokens=0, rate_limited=True, retry_after_s=9.0, exhausted=True)
        ctl.finish(model, other, limited)

    gate = Gate(ctl, model, "job", 10, max_wait_s=2.0, max_countdown_s=60.0,
                may_requeue=True, reserve_s=1.0, sleep=sleep_while_a_429_arrives)  # fmt: skip
    with pytest.raises(RetryLater) as info:  # not sent into the pause: back to the queue
        gate.acquire()
    assert info.value.reason == "paused" and 8.0 < info.value.delay_s <= 9.0
    assert ctl.counters(model).inflight == 0  # the booked lease was given back


def test_a_429_pauses_every_caller_when_its_call_was_admitted_at_the_limit() -> None:
    window = {"rpm": 2, "limit_window": "sliding"}
    model = load_catalog().model("kimi-k2.5").model_copy(update=window)
    ctl = MemoryAdmission(AdmissionPolicy())
    gate = Gate(ctl, model, "job", 10, max_wait_s=2.0, max_countdown_s=60.0,
                may_requeue=False, sleep=lambda s: None)  # fmt: skip

    def limited() -> Answer:
        raise status_error(429, {"Retry-After": "3"})

    with pytest.raises(openai.RateLimitError):  # the first of 2 in the window: isolated
        gate.call(limited)
    assert ctl.pause_left_s(model) == 0.0
    with pytest.raises(openai.RateLimitError):  # it filled the window: the tenant's limit
        gate.call(limited)
    assert 2.0 < ctl.pause_left_s(model) <= 3.0
    assert ctl.counters(model).factor == 1.0  # the spacing was right: no rate cut


def test_an_answer_saying_a_limit_is_used_up_holds_every_caller_until_its_reset() -> None:
    model = load_catalog().model("kimi-k2.5")
    ctl = MemoryAdmission(AdmissionPolicy())
    gate = Gate(ctl, model, "job", 10, max_wait_s=2.0, max_countdown_s=60.0,
                may_requeue=True, sleep=lambda s: None)  # fmt: skip
    usage = Usage(prompt_tokens=3, completion_tokens=4)
    assert gate.call(lambda: Answer("ok", usage, "stop", limit_reset_s=None)).content == "ok"
    assert ctl.pause_left_s(model) == 0.0
    gate.call(lambda: Answer("ok", usage, "stop", limit_reset_s=7.0))
    assert 6.0 < ctl.pause_left_s(model) <= 7.0
    counters = ctl.counters(model)
    assert counters.rate_limited == 0 and counters.factor == 1.0


def test_a_call_that_waited_for_a_rate_limits_slot_is_at_the_limit() -> None:
    model = load_catalog().model("kimi-k2.5").model_copy(update={"rps": 5})
    ctl = MemoryAdmission(AdmissionPolicy())
    gate = Gate(ctl, model, "job", 10, max_wait_s=2.0, max_countdown_s=60.0,
                may_requeue=False, sleep=lambda s: None)  # fmt: skip
    assert not gate.acquire().at_limit  # the bucket had room
    assert gate.acquire().at_limit  # refused for rps (no reserve), then admitted


def test_a_request_read_past_its_deadline_keeps_its_permit_until_it_ends() -> None:
    model = load_catalog().model("kimi-k2.5").model_copy(update={"max_inflight": 1})
    ctl = MemoryAdmission(AdmissionPolicy())
    gate = Gate(ctl, model, "job", 10, max_wait_s=0.0, max_countdown_s=60.0,
                may_requeue=True, sleep=lambda _: None)  # fmt: skip
    overtime, release = Overtime(grace_s=30, max_requests=1), threading.Event()
    late = Answer("late", Usage(prompt_tokens=30, completion_tokens=20), "stop")

    def request(read_timeout_s: float | None) -> Answer:
        assert release.wait(10.0)
        return late

    with pytest.raises(openai.APITimeoutError):  # the node times out as before
        gate.call(lambda: overtime.send(request, 0.05, lambda outcome, latency_s: None))
    assert ctl.counters(model).inflight == 1  # the one-slot gateway is still computing it
    with pytest.raises(RetryLater) as info:  # waits for it, back in the queue
        gate.call(lambda: late)
    assert info.value.reason == "inflight"
    release.set()
    deadline = time.monotonic() + 10.0
    while ctl.counters(model).inflight and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ctl.counters(model).inflight == 0
    assert gate.call(lambda: late) == late


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
    gate = Gate(ctl, model, "job", 10, max_wait_s=60.0, max_countdown_s=60.0,
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
    late, sleeps = LateAnswers(), []
    late.expect()

    def sleep(seconds: float) -> None:  # the answer comes on the third wait
        sleeps.append(seconds)
        if len(sleeps) == 3:
            assert late.offer(LATE, 2.0)

    gate = Gate(h.ctl, h.model, "job", 10, max_wait_s=0.0, max_countdown_s=60.0,
                may_requeue=True, sleep=sleep, abandoned=h.abandoned)  # fmt: skip
    assert gate.call(lambda: pytest.fail("no request: the late answer came"), late) == LATE
    assert len(sleeps) == 3 and max(sleeps) <= 1.0 + MAX_JITTER_S
    assert h.ctl.counters(h.model).inflight == 1  # only the abandoned request's permit
    with pytest.raises(RetryLater):  # nothing coming any more: a long wait goes to the queue
        gate.call(lambda: LATE, late)
    h.hang.set()


class FinishDown(MemoryAdmission):
    """Admits, then cannot finish a permit: Redis went away while the call ran."""

    def finish(self, spec: ModelSpec, permit: Permit, outcome: Outcome) -> Verdict:
        raise redis.exceptions.ConnectionError("failover under way")


def test_an_answer_whose_permit_cannot_be_finished_is_still_the_calls() -> None:
    model = load_catalog().model("kimi-k2.5")
    gate = Gate(FinishDown(AdmissionPolicy()), model, "job", 10, max_wait_s=2.0,
                max_countdown_s=60.0, may_requeue=True, sleep=lambda s: None)  # fmt: skip
    answer = Answer("ok", Usage(prompt_tokens=3, completion_tokens=4), "stop")
    assert gate.call(lambda: answer) == answer  # billed: it goes on to the ledger

    def failed() -> Answer:
        raise SwarmError("the gateway's own error")

    with pytest.raises(SwarmError, match="own error"):  # not hidden by the outage
        gate.call(failed)
