"""The simulator counts identical requests served at once (two runs of one call slot)."""

from __future__ import annotations

from swarm.sim.slots import SlotTracker


def test_overlapping_identical_requests_are_counted() -> None:
    slots = SlotTracker()
    slots.enter("a")
    slots.enter("b")  # another node: no overlap
    slots.leave("a")
    slots.enter("a")  # the same slot again, after the first ended: no overlap
    assert slots.snapshot() == {"overlaps": 0, "max_concurrent": 1}
    slots.enter("a")  # while the second is still served
    assert slots.snapshot() == {"overlaps": 1, "max_concurrent": 2}
    slots.reset()
    assert slots.snapshot() == {"overlaps": 0, "max_concurrent": 2}  # two still in service
    slots.leave("a")
    slots.leave("a")
    slots.leave("b")
    assert slots.serving == {}
