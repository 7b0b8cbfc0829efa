"""workers.pool: a run that raises outside the tracer reaches the request's error callback."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any
from unittest.mock import Mock

from billiard.einfo import ExceptionInfo
from billiard.exceptions import WorkerLostError
from celery.concurrency import thread

from workers.pool import TaskPool, use_for


class Calls:
    """What the pool called back, and an event once it did."""

    def __init__(self) -> None:
        self.success: list[Any] = []
        self.errors: list[ExceptionInfo] = []
        self.called = threading.Event()

    def on_success(self, result: Any) -> None:
        self.success.append(result)
        self.called.set()

    def on_failure(self, exc_info: ExceptionInfo) -> None:
        self.errors.append(exc_info)
        self.called.set()


def run(target: Any) -> Calls:
    pool = TaskPool(limit=1)
    pool.start()
    calls = Calls()
    try:
        pool.apply_async(target, callback=calls.on_success, error_callback=calls.on_failure)
        assert calls.called.wait(10)
    finally:
        pool.stop()
    return calls


def test_a_run_that_raises_outside_the_tracer_reaches_the_error_callback() -> None:
    def storing_fails() -> None:
        raise ConnectionError("Connection closed by server.")

    calls = run(storing_fails)
    assert calls.success == []
    [info] = calls.errors
    exc = getattr(info.exception, "exc", info.exception)  # as Request.on_failure unwraps it
    assert isinstance(exc, WorkerLostError)  # requeued with task_reject_on_worker_lost
    assert "Connection closed by server." in str(exc)


def test_a_run_that_returns_reaches_only_the_success_callback() -> None:
    calls = run(lambda: (False, "ok", 0.1))
    assert calls.success == [(False, "ok", 0.1)]
    assert calls.errors == []


def test_the_worker_gets_this_pool_instead_of_celerys_threads_pool() -> None:
    for given in (thread.TaskPool, "threads"):
        worker = SimpleNamespace(pool_cls=given)
        use_for(sender=worker)
        assert worker.pool_cls is TaskPool
    prefork = SimpleNamespace(pool_cls="prefork")
    use_for(sender=prefork)
    assert prefork.pool_cls == "prefork"


def noop() -> None:
    """A task body."""


def test_celery_sends_such_a_task_back_to_its_queue() -> None:
    """What the hand-back relies on: a late-acked task's request, given a WorkerLostError,
    rejects its message with requeue (task_reject_on_worker_lost, as swarm configures)."""
    from celery import Celery
    from celery.contrib.testing.mocks import TaskMessage
    from celery.worker.request import Request

    app = Celery(set_as_current=False, broker="memory://", backend="cache+memory://")
    app.conf.update(task_acks_late=True, task_reject_on_worker_lost=True)
    app.task(name="t", ignore_result=True)(noop)
    message = TaskMessage("t", id="tid")
    ack, reject = Mock(), Mock()  # what the worker's strategy passes: the message's own
    request = Request(message, on_ack=ack, on_reject=reject, app=app, task=app.tasks["t"])
    try:
        raise WorkerLostError("the task raised outside its body")
    except WorkerLostError:
        request.on_failure(ExceptionInfo())
    [(_, _, requeue)] = [call.args for call in reject.call_args_list]
    assert requeue is True
    ack.assert_not_called()


def test_a_run_that_raised_after_its_ack_is_not_rejected() -> None:
    """Celery's ack after a broker reconnection also restores the prefetch count, which can
    raise on the dead connection once the ack went out: rejecting that message as well
    raises MessageStateError in the consumer's loop and stops the worker (seen in CI)."""
    from celery import Celery
    from celery.contrib.testing.mocks import TaskMessage
    from celery.worker.request import Request

    app = Celery(set_as_current=False, broker="memory://", backend="cache+memory://")
    app.conf.update(task_acks_late=True, task_reject_on_worker_lost=True)
    app.task(name="t", ignore_result=True)(noop)
    message = TaskMessage("t", id="tid")
    message.acknowledged = False

    def ack_then_restore_prefetch_fails(*_: Any) -> None:
        message.acknowledged = True
        raise ConnectionResetError(104, "Connection reset by peer")

    reject = Mock()
    request = Request(message, on_ack=ack_then_restore_prefetch_fails, on_reject=reject,
                      app=app, task=app.tasks["t"])  # fmt: skip
    pool = TaskPool(limit=1)
    pool.start()
    try:
        pool.apply_async(request.acknowledge, error_callback=request.on_failure)
    finally:
        pool.stop()  # joins the thread: its done-callbacks have run
    assert message.acknowledged is True
    reject.assert_not_called()
