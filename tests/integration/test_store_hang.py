"""A job store whose Redis hangs (SIGSTOP: the process is alive, its socket open, nothing
answers) fails the command after SWARM_STORE_READ_TIMEOUT_S instead of holding the caller
forever; the same store answers again once Redis does."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import procs
import pytest

from swarm.errors import BrokerUnavailableError
from swarm.settings import Settings
from swarm.store import RedisJobStore

pytestmark = pytest.mark.integration

HANG_BOUND_S = 60.0
"""How long the test waits for the command to come back: far above the 0.5 s read timeout
it sets (a loaded machine), far below forever (the behaviour without one)."""


@contextmanager
def frozen(srv: procs.RedisServer) -> Iterator[None]:
    assert srv.proc is not None
    pid = srv.proc.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def outcome(call: Callable[[], object]) -> tuple[bool, BaseException | None]:
    """Runs ``call`` in a thread: (came back within HANG_BOUND_S, what it raised)."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # the test inspects it
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG_BOUND_S)
    return not thread.is_alive(), (raised[0] if raised else None)


def test_a_hung_redis_fails_the_stores_command_instead_of_holding_it(
    redis_factory: Callable[..., procs.RedisServer],
) -> None:
    srv = redis_factory()
    settings = Settings(broker_url=srv.url, store_read_timeout_s=0.5, store_outage_s=0)
    store = RedisJobStore.from_settings(settings)  # connected: its PING answered
    # The setting, not the client library's default (redis-py 8 reads 5 s; 5 to 7 wait forever).
    assert store.redis.connection_pool.connection_kwargs["socket_timeout"] == 0.5

    with frozen(srv):
        returned, raised = outcome(store.check)

    assert returned, f"the store's PING to a hung Redis did not come back in {HANG_BOUND_S} s"
    assert isinstance(raised, BrokerUnavailableError), raised
    assert "Timeout" in str(raised), str(raised)
    store.check()  # answers again once Redis does
