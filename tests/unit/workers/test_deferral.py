"""workers.deferral.retry_later: the next run deferred in the store, or, the store down
since the run, a broker countdown as Celery's own retry sends it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import redis
from celery import Celery
from celery.exceptions import Retry

from swarm.store.leases import task_lease
from workers import deferral, process
from workers.leases import RUN_LEASE

app = Celery("test-deferral", set_as_current=False)


@app.task(bind=True, name="test.deferral")  # type: ignore[misc]
def node(self: Any, job_id: str, node_id: str) -> None:
    """A stand-in for the sub-agent task."""


class Store:
    def __init__(self, down: bool) -> None:
        self.down = down
        self.deferred: list[tuple[str, float]] = []

    def defer_task(self, lease: Any, delay_s: float, signature: str) -> None:
        if self.down:
            raise redis.ConnectionError("Redis is down")
        self.deferred.append((lease.member, delay_s))

    def cancelled(self, job_id: str) -> bool:
        return False


@pytest.fixture
def store(request: pytest.FixtureRequest) -> Any:
    found = Store(down=request.param)
    leases = SimpleNamespace(drop=lambda lease: None)
    process.install(SimpleNamespace(leases=leases, store=found))  # type: ignore[arg-type]
    yield found
    process.install(None)


def run_in_task(retried: list[dict[str, Any]]) -> Any:
    """``node`` with a request as a worker's run of it has, its own retry recorded."""
    node.push_request(
        id="job-n1",
        args=["job", "n1"],
        kwargs={},
        retries=0,
        delivery_info={},
        called_directly=False,
    )
    setattr(node.request, RUN_LEASE, task_lease("job", "job-n1"))
    node.retry = lambda **kw: retried.append(kw) or Retry("broker countdown")
    return node


@pytest.mark.parametrize("store", [False], indirect=True)
def test_the_next_run_is_deferred_in_the_store(store: Store) -> None:
    retried: list[dict[str, Any]] = []
    task = run_in_task(retried)
    try:
        raised = deferral.retry_later(task, "job", 3.0, ("job", "n1"))
    finally:
        task.pop_request()
    assert isinstance(raised, Retry) and retried == []
    assert store.deferred == [("job|task:job-n1", 3.0)]


@pytest.mark.parametrize("store", [True], indirect=True)
def test_redis_down_since_the_run_sends_a_broker_countdown(store: Store) -> None:
    retried: list[dict[str, Any]] = []
    task = run_in_task(retried)
    try:
        raised = deferral.retry_later(task, "job", 3.0, ("job", "n1"))
    finally:
        task.pop_request()
    assert isinstance(raised, Retry)
    assert retried == [{"args": ("job", "n1"), "countdown": 3.0, "throw": False}]


class CancelledStore(Store):
    def cancelled(self, job_id: str) -> bool:
        return True


@pytest.fixture
def cancelled_store() -> Any:
    found = CancelledStore(down=False)
    leases = SimpleNamespace(drop=lambda lease: None)
    process.install(SimpleNamespace(leases=leases, store=found))  # type: ignore[arg-type]
    yield found
    process.install(None)


@pytest.mark.parametrize(("hasten", "due_s"), [(True, [3.0, 0.0]), (False, [3.0])])
def test_a_cancelled_job_makes_a_run_due_at_once_unless_told_not_to(
    cancelled_store: CancelledStore, hasten: bool, due_s: list[float]
) -> None:
    """A node's next run in a cancelled job is due at once (it ends cancelled); the watch's
    is not (it would check again at once, again and again, while the nodes cannot end)."""
    task = run_in_task([])
    try:
        deferral.retry_later(task, "job", 3.0, ("job", "n1"), hasten=hasten)
    finally:
        task.pop_request()
    assert [delay for _, delay in cancelled_store.deferred] == due_s
