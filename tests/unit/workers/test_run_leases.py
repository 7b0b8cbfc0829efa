"""A run's task lease (workers/leases.py) through Celery's signals, on plain request records
and an in-memory store: each delivery's run holds its own lease, and a run releases it
only once Celery recorded how it ended."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis
from celery import states
from celery.app.task import Context
from celery.exceptions import Ignore
from doubles import job_spec

from swarm.calls.runtime import Runtime
from swarm.catalog import load_catalog
from swarm.jobs.queueing import SUBAGENT_TASK
from swarm.settings import Settings
from swarm.store import MemoryJobStore
from swarm.store.heartbeat import LeaseKeeper
from swarm.store.leases import Lease, task_lease
from workers import leases, process

TASK_ID = "job-n0"
LEASE_S = 0.3


class Outage(MemoryJobStore):
    """A store that refuses new task leases while ``down`` (Redis unreachable)."""

    down = False

    def take_task_lease(self, lease: Lease, ttl_s: float, signature: str) -> bool:
        if self.down:
            raise redis.exceptions.ConnectionError("refused")
        return super().take_task_lease(lease, ttl_s, signature)


class Task:
    """What the lease code reads of a Celery task: its run's context and its signature."""

    def __init__(self, request: Context | None = None) -> None:
        self.request = request or Context()

    def signature_from_request(self, request: Context | None = None) -> dict[str, Any]:
        return {"task": SUBAGENT_TASK, "args": ["job", "n0"], "options": {"task_id": TASK_ID}}


@dataclass
class Delivery:
    """A received message, as ``task_received`` hands it over (celery.worker.request)."""

    id: str = TASK_ID
    name: str = SUBAGENT_TASK
    args: tuple[Any, ...] = ("job", "n0")
    kwargs: dict[str, Any] = field(default_factory=dict)
    request_dict: dict[str, Any] = field(default_factory=lambda: {"id": TASK_ID})
    _payload: tuple[Any, ...] = ((), {}, None)
    task: Task = field(default_factory=Task)

    def run(self) -> Task:
        """The task as Celery runs this delivery: its request's fields on a new context."""
        return Task(Context(dict(self.request_dict), args=list(self.args), kwargs=self.kwargs))


@pytest.fixture
def rt() -> Iterator[Runtime]:
    store = Outage()
    store.create_job(job_spec(1, job_id="job"), ["input"])
    keeper = LeaseKeeper(store, LEASE_S)
    runtime = Runtime(Settings(), load_catalog(), store, client=None, leases=keeper)  # type: ignore[arg-type]
    process.install(runtime)
    yield runtime
    process.install(None)
    keeper.stop()


def received(rt: Runtime, *, store_down: bool = False) -> Delivery:
    assert isinstance(rt.store, Outage)
    rt.store.down = store_down
    delivery = Delivery()
    leases.on_received(request=delivery)
    rt.store.down = False
    return delivery


def lapses(rt: Runtime, member: str) -> bool:
    """True once the task lease ``member`` is listed as lapsed (within a few lifetimes)."""
    deadline = time.monotonic() + 5 * LEASE_S
    while member not in rt.store.lapsed_tasks(10):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_message_delivered_again_while_its_run_goes_on_leaves_that_run_its_lease(
    rt: Runtime,
) -> None:
    """The broker delivers a message again while its first run is still working and renewing
    its lease (Redis: the run took longer than the visibility timeout, a machine under load;
    RabbitMQ: the connection was lost). The live run keeps its lease and stores its work;
    the duplicate ends ignored as it starts. (Were the latest delivery to take the lease, a
    run slower than the visibility timeout would be fenced off every time and the job would
    never end: test_batch_faults_e2e's Redis restart at load 20.)"""
    assert rt.leases is not None
    first = received(rt).run()
    with leases.held(first, "job") as lease:
        assert lease is not None
        again = received(rt)  # the broker's redelivery, the first run still going
        assert leases.RECEIPT_TOKEN not in again.request_dict
        duplicate = again.run()
        with pytest.raises(Ignore), leases.held(duplicate, "job"):
            pytest.fail("a duplicate of a live run ran")
        leases.on_postrun(task=duplicate, task_id=TASK_ID, state=states.IGNORED)
        assert rt.store.renew_leases([lease], LEASE_S) == set()  # its writes are not fenced
        assert rt.leases.held() == [lease]
    leases.on_success(sender=first)
    leases.on_postrun(task=first, task_id=TASK_ID, state=states.SUCCESS)
    assert rt.leases.held() == []
    assert not lapses(rt, task_lease("job", TASK_ID).member)  # released, not lapsed


def test_a_delivery_unleased_on_receipt_leases_itself_as_it_starts(rt: Runtime) -> None:
    assert rt.leases is not None
    run = received(rt, store_down=True).run()  # arrived while Redis was unreachable
    with leases.held(run, "job") as lease:
        assert lease is not None and rt.leases.held() == [lease]
    leases.on_success(sender=run)
    leases.on_postrun(task=run, task_id=TASK_ID, state=states.SUCCESS)
    assert rt.leases.held() == []


def test_a_delivery_takes_a_lapsed_lease_over_and_fences_the_old_run_off(rt: Runtime) -> None:
    assert rt.leases is not None
    old = received(rt).run()
    with pytest.raises(Ignore), leases.held(old, "job") as lease:  # ends ignored
        assert lease is not None
        rt.leases.drop(lease)  # its process froze: no renewal
        assert lapses(rt, lease.member)
        new = received(rt)  # sent again by a sweeper
        assert leases.RECEIPT_TOKEN in new.request_dict
        assert rt.store.renew_leases([lease], LEASE_S) == {lease}


@pytest.mark.parametrize("stored", [True, False])
def test_a_run_is_released_only_once_celery_stored_its_result(rt: Runtime, stored: bool) -> None:
    assert rt.leases is not None
    run = received(rt).run()
    with leases.held(run, "job") as lease:
        assert lease is not None
    if stored:
        leases.on_success(sender=run)  # Celery stored the result and counted the chord
    leases.on_postrun(task=run, task_id=TASK_ID, state=states.SUCCESS)
    assert rt.leases.held() == []
    # Not stored (Redis unreachable right then): the lease lapses and a sweeper sends the
    # message again; stored: released, nothing to send.
    assert lapses(rt, lease.member) is not stored
