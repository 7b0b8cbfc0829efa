"""The gate: short waits sleep in the task, long ones go back to the queue; outcomes."""

from __future__ import annotations

import httpx2
import openai
import pytest
import redis

from swarm.calls.admission import (
    AdmissionPolicy,
    Decision,
    MemoryAdmission,
    Outcome,
    Permit,
    Refusal,
    Verdict,
)
from swarm.calls.admission.base import Ask
from swarm.calls.admission.gate import SHARE_COUNTDOWN_S, Gate, outcome_of_error, wait_or_requeue
from swarm.calls.admission.shares import Tenant
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
    other = ctl.acquire(model, Ask("job", 10)).permit
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


def test_a_tenant_far_over_its_share_gives_its_thread_back_when_it_may_requeue() -> None:
    far = {"rpm": 6_000_000, "tpm": 100_000_000, "max_inflight": 1, "rps": None}
    model = load_catalog().model("kimi-k2.5").model_copy(update=far)
    now = [1_000_000.0]
    ctl = MemoryAdmission(AdmissionPolicy(), lambda: now[0])
    a, b = Tenant("a"), Tenant("b")
    held = ctl.acquire(model, Ask("ja", 100, tenant=a)).permit
    assert held is not None
    now[0] += 1
    assert ctl.acquire(model, Ask("jb", 10, tenant=b)).permit is None  # b waits now
    ctl.finish(model, held, Outcome(used_tokens=100))
    slept: list[float] = []
    gate = Gate(ctl, model, "ja", 100, max_wait_s=2.0, max_countdown_s=60.0,
                may_requeue=True, tenant=a, sleep=slept.append)  # fmt: skip
    with pytest.raises(RetryLater) as later:  # b had nothing lately: a long wait, back to
        gate.acquire()  # the queue, asking again within SHARE_COUNTDOWN_S
    assert later.value.reason == "tenant_share" and 0 < later.value.delay_s <= SHARE_COUNTDOWN_S
    assert slept == []


def test_a_tenant_just_over_its_share_waits_in_its_task() -> None:
    """Tenants a little apart cross the share line many times a second: the one just over
    it waits in its task for the permit it gets once the other has caught up, instead of
    going back to the queue (where its next run comes seconds later)."""
    far = {"rpm": 6_000_000, "tpm": 100_000_000, "max_inflight": 2, "rps": None}
    model = load_catalog().model("kimi-k2.5").model_copy(update=far)
    now = [1_000_000.0]

    def clock() -> float:  # 1 ms per reading: the request rate's spacing is far less
        now[0] += 1
        return now[0]

    ctl = MemoryAdmission(AdmissionPolicy(), clock)
    a, b = Tenant("a"), Tenant("b")
    for tenant, job, used in ((a, "ja", 10_100), (b, "jb", 10_000)):
        permit = ctl.acquire(model, Ask(job, 100, tenant=tenant)).permit
        assert permit is not None
        ctl.finish(model, permit, Outcome(used_tokens=used))
    held = ctl.acquire(model, Ask("jb", 100, tenant=b)).permit  # a waits while b catches up
    assert held is not None and ctl.acquire(model, Ask("ja", 100, tenant=a)).permit is not None
    assert ctl.acquire(model, Ask("jb", 100, tenant=b)).reason is Refusal.INFLIGHT  # b waits
    ctl.finish(model, held, Outcome(used_tokens=100))
    slept: list[float] = []

    def sleep(seconds: float) -> None:  # b catches up meanwhile
        slept.append(seconds)
        other = ctl.acquire(model, Ask("jb", 100, tenant=b)).permit
        assert other is not None
        ctl.finish(model, other, Outcome(used_tokens=300))

    gate = Gate(ctl, model, "ja", 100, max_wait_s=2.0, max_countdown_s=60.0,
                may_requeue=True, tenant=a, sleep=sleep, rand=lambda: 0.5)  # fmt: skip
    permit = gate.acquire()  # over b by 200 of 20,000 recent tokens: no RetryLater
    assert permit.tenant == "a" and len(slept) == 1 and 0 < slept[0] <= 2.0


class Asked(Exception):
    """Stops a waiter at its first sleep."""


def test_waiters_for_a_full_model_ask_again_spread_over_the_hint() -> None:
    """Waiters refused together (a job's nodes arriving at once) sleep from none to twice the
    hint, the hint on average: they do not all come back together once per hint while the
    permits given back meanwhile stay unused."""
    model = load_catalog().model("kimi-k2.5").model_copy(update={"max_inflight": 1})
    ctl = MemoryAdmission(AdmissionPolicy())
    assert ctl.acquire(model, Ask("big", 10)).permit is not None  # the model is full
    hints: list[float] = []
    asked = ctl.acquire

    def acquire(*args: object, **kwargs: object) -> Decision:
        decision = asked(*args, **kwargs)  # type: ignore[arg-type]
        hints.append(decision.retry_after_s)
        return decision

    ctl.acquire = acquire  # type: ignore[method-assign]

    def first_sleep(rand: float) -> float:
        slept: list[float] = []

        def sleep(seconds: float) -> None:
            slept.append(seconds)
            raise Asked

        gate = Gate(ctl, model, "small", 10, max_wait_s=2.0, max_countdown_s=60.0,
                    may_requeue=True, sleep=sleep, rand=lambda: rand)  # fmt: skip
        with pytest.raises(Asked):
            gate.acquire()
        assert ctl.acquire is acquire and hints[-1] > 0
        return slept[0] / hints[-1]

    early, middle, late = first_sleep(0.05), first_sleep(0.5), first_sleep(0.95)
    assert early < 0.5 < 1.5 < late  # some ask again long before the hint, some after it
    assert middle == pytest.approx(1.0)  # on average at the hint: the same asks per second
