"""A message a worker sends while its broker's Redis is down (a Sentinel failover) goes out
once Redis is back (workers.factory's publish retry policy), instead of failing after
kombu's default three tries: Celery then rejects the running task's message without
requeue, and a watchdog's next check or a requeued node was lost for good."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

import procs
import pytest

from swarm.catalog import load_catalog
from swarm.jobs.queueing import WATCH_TASK
from swarm.settings import Settings
from workers.factory import create_app

pytestmark = pytest.mark.integration


def test_a_retry_sent_while_the_broker_restarts_goes_out_when_it_is_back(
    redis_factory: Callable[..., procs.RedisServer],
) -> None:
    srv = redis_factory()
    catalog = load_catalog(None)
    settings = Settings(broker_url=srv.url_for(0), result_url=srv.url_for(1), store_outage_s=20)
    app = create_app(settings, catalog)
    queue = catalog.queues()[0]
    app.send_task(WATCH_TASK, args=("job-a", None), queue=queue)  # connected before the stop
    srv.stop()
    restart = threading.Timer(1.5, srv.restart)
    restart.start()
    try:  # the next check, as the watchdog's retry sends it: the broker is down
        app.send_task(WATCH_TASK, args=("job-b", None), queue=queue, countdown=2)
    finally:
        restart.join()
    sent = [json.loads(raw)["headers"]["argsrepr"] for raw in srv.client(db=0).lrange(queue, 0, -1)]
    assert "('job-b', None)" in sent  # the message sent through the outage
