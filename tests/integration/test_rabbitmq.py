"""RabbitMQ as the broker: the queues swarm declares (in the session's own vhost)."""

from __future__ import annotations

from typing import Any

import pytest
import rabbit
from kombu import Connection

from swarm.catalog import load_catalog
from swarm.jobs.queueing import declared_queues, make_celery
from swarm.settings import Settings

pytestmark = pytest.mark.integration


def settings(url: str, **more: Any) -> Settings:
    return Settings(broker_url=url, result_url="redis://127.0.0.1:1/1", **more)


def test_each_queue_is_bound_only_to_its_own_routing_key(rabbit_url: str) -> None:
    app = make_celery(settings(rabbit_url), load_catalog(None))
    with app.connection_for_write() as conn:
        for queue in app.amqp.queues.values():  # as a worker declares them
            queue.bind(conn.default_channel).declare()
    names = list(app.amqp.queues)
    bindings = [b for b in rabbit.bindings(rabbit_url) if b[1] in names]
    assert len(names) > 1
    assert sorted(bindings) == sorted((name, name, name) for name in names)


def test_quorum_queues_are_an_option(rabbit_url: str) -> None:
    names = ["test.quorum-a", "test.quorum-b"]
    with Connection(rabbit_url) as conn:  # type: ignore[no-untyped-call]
        for queue in declared_queues(settings(rabbit_url, quorum_queues=True), names):
            queue.bind(conn.default_channel).declare()
    listed = rabbit.ctl("list_queues", "-p", rabbit_url.rsplit("/", 1)[1], "-q", "name", "type")
    types = dict(line.split("\t") for line in listed.splitlines() if "\t" in line)
    assert {types[name] for name in names} == {"quorum"}
