"""A chord member that ends while the result backend's Redis is down is counted once Redis
is back (swarm.jobs.chord_backend), instead of raising outside the task's body (which the
threads pool drops, leaving the message unacknowledged for good)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import SimpleNamespace

import procs
import pytest
from celery import states

from swarm.catalog import load_catalog
from swarm.jobs.queueing import make_celery
from swarm.settings import Settings

pytestmark = pytest.mark.integration

GROUP = "chord-outage-group"


def member(index: int) -> SimpleNamespace:
    """What ``on_chord_part_return`` reads of a header task's request."""
    return SimpleNamespace(id=f"task-{index}", group=GROUP, group_index=index, chord=None)


def test_a_chord_part_ending_in_an_outage_is_counted_when_redis_is_back(
    redis_factory: Callable[..., procs.RedisServer],
) -> None:
    srv = redis_factory(appendonly=True)  # the first part survives the restart
    settings = Settings(
        broker_url="memory://localhost/", result_url=srv.url_for(1), store_outage_s=20
    )
    app = make_celery(settings, load_catalog(None))
    backend = app.backend
    backend.set_chord_size(GROUP, 3)  # never complete: no aggregation to send
    backend.on_chord_part_return(member(0), states.SUCCESS, None)  # connected before the stop
    srv.stop()
    restart = threading.Timer(1.5, srv.restart)
    restart.start()
    try:
        backend.on_chord_part_return(member(1), states.SUCCESS, None)  # Redis down: waits
    finally:
        restart.join()
    members = srv.client(db=1).smembers(backend.get_key_for_group(GROUP, ".d"))
    assert members == {"task-0:0", "task-1:1"}


def test_another_backend_is_left_as_it_is() -> None:
    settings = Settings(embedded=True)
    app = make_celery(settings, load_catalog(None))
    assert type(app.backend).__name__ == "CacheBackend"
