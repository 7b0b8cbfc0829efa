"""The take-over sweep (swarm.jobs.takeover) on the memory store: a sweeper that dies
between a take and its send leaves the lapse to another sweep a hold later; one that sent
the message settles it, and a run that received the message meanwhile keeps its lease."""

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


def deferred_store() -> MemoryJobStore:
    """A job with task t1 deferred and due now (workers.deferral)."""
    store = MemoryJobStore()
    spec = JobSpec(
        job_id="j1", instruction="i", aggregate_instruction="a", model="m",
        aggregate_model="m", node_ids=("n0",), input_refs=("r0",), submitted_at=0.0,
    )  # fmt: skip
    store.create_job(spec, ["a"])
    signature = APP.signature("swarm.subagent", args=("j1", "n0"), task_id="t1")
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
