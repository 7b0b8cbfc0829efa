"""Permits of abandoned requests go back when the request ends, is overtaken, or starves
its backend; each exactly once."""

from __future__ import annotations

from swarm.calls.local.abandoned import AbandonedPermits, Release
from swarm.calls.request import Answer
from swarm.records import Usage

LATE = Answer("late", Usage(prompt_tokens=3, completion_tokens=2), "stop")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def registry(patience_s: float = 10.0) -> tuple[AbandonedPermits, Clock, list[object]]:
    clock = Clock()
    return AbandonedPermits(patience_s, clock), clock, []


def test_a_request_that_ends_gives_its_permit_back_once() -> None:
    permits, _, settled = registry()
    held = permits.hold("local", settled.append)
    assert permits.holding("local") == 1
    held.end(LATE)
    held.end(LATE)  # told twice: settled once
    assert settled == [LATE] and held.released is Release.ENDED
    assert permits.holding("local") == 0


def test_an_answer_sent_after_an_abandonment_gives_back_the_oldest_permit_only() -> None:
    permits, clock, settled = registry()
    first = permits.hold("hosted", lambda o: settled.append(("first", o)))
    clock.now += 1
    second = permits.hold("hosted", lambda o: settled.append(("second", o)))
    other = permits.hold("local", lambda o: settled.append(("other", o)))
    permits.answered("hosted", sent_at=first.abandoned_at - 0.5)  # sent before: queued ahead
    assert settled == []
    permits.answered("hosted", sent_at=clock.now + 0.5)
    assert settled == [("first", Release.OVERTAKEN)] and first.released is Release.OVERTAKEN
    permits.answered("hosted", sent_at=clock.now + 0.5)
    assert settled == [("first", Release.OVERTAKEN), ("second", Release.OVERTAKEN)]
    first.end(LATE)  # its late end after the permit went back settles nothing more
    assert len(settled) == 2 and second.released is Release.OVERTAKEN
    assert other.released is None and permits.holding("local") == 1


def test_a_starved_backend_gets_one_permit_back_per_patience_without_progress() -> None:
    permits, clock, settled = registry(patience_s=10.0)
    first = permits.hold("local", settled.append)
    second = permits.hold("local", settled.append)
    clock.now += 9
    assert not permits.starved("local") and settled == []
    permits.ended("local")  # the backend ended a request: it is computing
    clock.now += 9
    assert not permits.starved("local")
    clock.now += 2
    assert permits.starved("local") and first.released is Release.STARVED
    assert not permits.starved("local")  # one per patience
    clock.now += 10.0
    assert permits.starved("local") and second.released is Release.STARVED
    assert settled == [Release.STARVED] * 2 and not permits.starved("local")
    assert not permits.starved("unknown")


def test_a_request_abandoned_after_a_long_quiet_gets_a_whole_patience() -> None:
    permits, clock, settled = registry(patience_s=10.0)
    permits.ended("local")  # long ago
    clock.now += 60
    held = permits.hold("local", settled.append)
    clock.now += 9
    assert not permits.starved("local")  # nothing ended for 69 s, but it was left 9 s ago
    clock.now += 1
    assert permits.starved("local") and held.released is Release.STARVED
