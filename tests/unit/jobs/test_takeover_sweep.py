"""The take-over sweep (swarm.jobs.takeover) on the memory store: a sweeper that dies
between a take and its send leaves the lapse to another sweep a hold later; one that sent
the message settles it, and a run that received the message meanwhile keeps its lease; a
kept task's message stays held once sent, and goes again unless a run leased it."""

from __future__ import annotations

import time

import pytest
from celery import Celery
from celery.canvas import Signature

from swarm.jobs.takeover import resend_signature, sweep
from swarm.records import JobSpec
from swarm.store.leases import task_lease
from swarm.store.memory import MemoryJobStore

APP = Celery("takeover-test", set_as_current=False)
MEMBER = task_lease("j1", "t1", "").member
WATCH = "swarm.watch"


class Died(Exception):
    """The sweeper's process died (SIGKILL) here: nothing after it runs."""


def die(_: Signature) -> None:
    raise Died


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Task ids of the messages the sweeps sent (the broker)."""
    ids: list[str] = []
    monkeypatch.setattr(Signature, "apply_async", lambda sig, *_, **__: ids.append(sig.id))
    return ids


def deferred_store(task: str = "swarm.subagent") -> MemoryJobStore:
    """A job with task t1 (named ``task``) deferred and due now (workers.deferral)."""
    store = MemoryJobStore()
    spec = JobSpec(
        job_id="j1", instruction="i", aggregate_instruction="a", model="m",
        aggregate_model="m", node_ids=("n0",), input_refs=("r0",), submitted_at=0.0,
    )  # fmt: skip
    store.create_job(spec, ["a"])
    signature = APP.signature(task, args=("j1", "n0"), task_id="t1")
    store.defer_task(task_lease("j1", "t1", ""), 0.0, resend_signature(signature))
    return store


def test_a_sweeper_killed_between_its_take_and_its_send_leaves_the_lapse_to_another(
    sent: list[str],
) -> None:
    store = deferred_store()
    with pytest.raises(Died):
        sweep(store, APP, hold_s=0.2, before_send=die)
    assert sent == []
    assert sweep(store, APP, hold_s=0.2) == 0  # held: no second sender meanwhile
    assert store.held_tasks("j1", ["t1"]) == {"t1"}  # in flight, not lost to the watch
    deadline = time.monotonic() + 30
    while store.lapsed_tasks(10) != [MEMBER]:  # the hold of the dead sweeper lapses
        assert time.monotonic() < deadline, "the held lapse never fell due again"
        time.sleep(0.02)
    assert sweep(store, APP, hold_s=5) == 1
    assert sent == ["t1"]
    assert store.lapsed_tasks(10) == [] and store.held_tasks("j1", ["t1"]) == set()  # settled


def test_a_run_that_received_the_message_before_the_settle_keeps_its_lease(
    sent: list[str],
) -> None:
    store = deferred_store()
    run = task_lease("j1", "t1")
    received = lambda _: store.take_task_lease(run, 5, "{}")  # noqa: E731
    assert sweep(store, APP, hold_s=5, before_send=received) == 1
    assert sent == ["t1"]
    assert store.renew_leases([run], 5) == set()  # the settle left the run's lease alone
    assert store.held_tasks("j1", ["t1"]) == {"t1"}


def test_a_kept_message_the_broker_lost_is_sent_again_once_its_hold_lapses(
    sent: list[str],
) -> None:
    # The broker lost the message (kombu's Redis transport: taken off its queue, never
    # recorded as unacked): no run leases it, so the hold lapses and the next sweep sends it.
    store = deferred_store(WATCH)
    assert sweep(store, APP, hold_s=0.0, kept=frozenset({WATCH})) == 1
    assert store.held_tasks("j1", ["t1"]) == {"t1"}  # held, not settled
    assert store.lapsed_tasks(10) == [MEMBER]
    assert sweep(store, APP, hold_s=5, kept=frozenset({WATCH})) == 1
    assert sent == ["t1", "t1"]


def test_a_kept_message_a_run_received_is_not_sent_again(sent: list[str]) -> None:
    store = deferred_store(WATCH)
    run = task_lease("j1", "t1")
    assert sweep(store, APP, hold_s=0.0, kept=frozenset({WATCH})) == 1
    assert store.take_task_lease(run, 5, "{}")  # received: the run's lease takes the hold over
    assert sweep(store, APP, hold_s=5, kept=frozenset({WATCH})) == 0
    assert sent == ["t1"]
    store.release_lease(run)  # the run ended
    assert store.held_tasks("j1", ["t1"]) == set()


def test_a_message_not_kept_is_settled_once_sent(sent: list[str]) -> None:
    store = deferred_store(WATCH)
    assert sweep(store, APP, hold_s=0.0) == 1
    assert store.held_tasks("j1", ["t1"]) == set()
    assert sweep(store, APP, hold_s=5) == 0
    assert sent == ["t1"]
