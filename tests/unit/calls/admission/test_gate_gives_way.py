"""A call waiting for permits gives its worker thread away when another job's node wants it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from swarm.calls import thread_share
from swarm.calls.admission import AdmissionPolicy, Ask, MemoryAdmission
from swarm.calls.admission.gate import Gate
from swarm.catalog import load_catalog
from swarm.errors import RetryLater


@pytest.fixture
def wanted() -> Iterator[list[bool]]:
    """What ``thread_share.gives_way`` answers, one answer per ask (then False)."""
    answers: list[bool] = []
    thread_share.install(lambda: answers.pop(0) if answers else False)
    yield answers
    thread_share.install(None)


def full_model_gate(may_requeue: bool, slept: list[float]) -> Gate:
    """A gate whose model's single permit is held by another job."""
    model = load_catalog().model("kimi-k2.5").model_copy(update={"max_inflight": 1})
    ctl = MemoryAdmission(AdmissionPolicy())
    assert ctl.acquire(model, Ask("other-job", 10)).permit is not None
    return Gate(ctl, model, "job", 10, max_wait_s=2.0, max_countdown_s=60.0,
                may_requeue=may_requeue, sleep=slept.append, rand=lambda: 0.5)  # fmt: skip


def test_a_call_waiting_for_a_permit_gives_its_thread_away_when_asked(
    wanted: list[bool],
) -> None:
    slept: list[float] = []
    wanted.extend([False, False, True])
    gate = full_model_gate(True, slept)
    with pytest.raises(RetryLater) as info:
        gate.acquire()
    assert info.value.reason == "thread_wanted"
    assert info.value.delay_s == thread_share.COUNTDOWN_S
    assert len(slept) == 2  # it waited in its thread until another job's node wanted it


def test_a_call_that_may_not_requeue_keeps_its_thread(wanted: list[bool]) -> None:
    slept: list[float] = []
    wanted.extend([True, True, True])

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 3:
            raise TimeoutError("stop waiting")

    gate = full_model_gate(False, [])
    gate.sleep = sleep
    with pytest.raises(TimeoutError):
        gate.acquire()
    assert len(slept) == 3  # it waited in its thread each time
    assert wanted == [True, True, True]  # and took no thread promised to another node
