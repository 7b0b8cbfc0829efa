"""Countdowns on RabbitMQ quorum queues (swarm.jobs.delayed_delivery): what a send carries.
The broker's side (delay exchanges, bindings, a real worker) is in
tests/integration/test_quorum_countdowns.py."""

from __future__ import annotations

from typing import Any

import pytest
from celery import Celery

from swarm.catalog import load_catalog
from swarm.jobs.delayed_delivery import (
    SwarmCelery,
    broker_countdown_s,
    origin_queue,
    pinned_to_queue,
)
from swarm.jobs.queueing import declared_queues, make_celery
from swarm.settings import Settings

DELAY_5S = "0." * 25 + "1.0.1."
QUEUES = ("llm.kimi-k2.5", "llm.gemini-2.5-flash")


@pytest.mark.parametrize(
    ("routing_key", "queue"),
    [
        ("llm.gemini-2.5-flash", "llm.gemini-2.5-flash"),
        (DELAY_5S + "llm.gemini-2.5-flash", "llm.gemini-2.5-flash"),
        ("1.0.llm.x", "1.0.llm.x"),  # fewer than 28 bits: no delay prefix
        ("", None),
        (None, None),
    ],
)
def test_the_queue_is_the_routing_key_without_its_delay(routing_key: Any, queue: Any) -> None:
    assert origin_queue(routing_key) == queue


@pytest.mark.parametrize(
    ("countdown_s", "sent_s"), [(0.01, 1.0), (0.5, 1.0), (1.0, 1.0), (1.2, 2.0), (60.0, 60.0)]
)
def test_countdowns_go_out_in_whole_seconds_rounded_up(countdown_s: float, sent_s: float) -> None:
    assert broker_countdown_s(countdown_s) == sent_s


def test_a_retry_goes_back_to_the_queue_its_delivery_came_from() -> None:
    retry = {"exchange": "celery_delayed_0", "routing_key": DELAY_5S + "llm.gemini-2.5-flash",
             "exchange_type": "topic", "priority": None, "retries": 1}  # fmt: skip
    assert pinned_to_queue(retry, QUEUES) == {
        "queue": "llm.gemini-2.5-flash",
        "priority": None,
        "retries": 1,
    }


@pytest.mark.parametrize(
    "options",
    [
        {"queue": "llm.kimi-k2.5", "routing_key": "llm.gemini-2.5-flash"},  # explicit queue
        {"exchange": "other", "routing_key": "not.a.queue"},
        {"retries": 2},
    ],
)
def test_other_sends_keep_their_options(options: dict[str, Any]) -> None:
    assert pinned_to_queue(options, QUEUES) == options


def test_quorum_queues_are_on_topic_exchanges_bound_by_their_exact_name() -> None:
    quorum = Settings(broker_url="amqp://h//", result_url="redis://h/1", quorum_queues=True)
    for queue in declared_queues(quorum, QUEUES):
        assert (queue.exchange.name, queue.exchange.type) == (queue.name, "topic")
        assert queue.routing_key == queue.name and "#" not in queue.routing_key
        assert queue.queue_arguments == {"x-queue-type": "quorum"}
    classic = Settings(broker_url="amqp://h//", result_url="redis://h/1")
    assert {q.exchange.type for q in declared_queues(classic, QUEUES)} == {"direct"}


class Sent:
    """What SwarmCelery passed on to Celery's send_task, and the delay declarations."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[dict[str, Any]] = []
        self.declared = 0

        def send_task(app: Celery, name: str, args: Any, kwargs: Any, **options: Any) -> None:
            self.calls.append(options)

        def declare(app: SwarmCelery) -> None:
            self.declared += 1

        monkeypatch.setattr(Celery, "send_task", send_task)
        monkeypatch.setattr(SwarmCelery, "_declare_delays", declare)


def app_for(broker_url: str, quorum: bool) -> Celery:
    settings = Settings(broker_url=broker_url, result_url="redis://h/1", quorum_queues=quorum)
    return make_celery(settings, load_catalog(None))


def test_on_quorum_queues_a_countdown_is_whole_seconds_after_the_delays_exist(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent = Sent(monkeypatch)
    app = app_for("amqp://guest:guest@127.0.0.1:1//", quorum=True)
    app.send_task("t", countdown=0.4, queue="llm.kimi-k2.5")
    app.send_task("t", queue="llm.kimi-k2.5")
    assert [c["countdown"] for c in sent.calls] == [1.0, None]
    assert sent.declared == 1


@pytest.mark.parametrize(
    ("broker_url", "quorum"),
    [("amqp://guest:guest@127.0.0.1:1//", False), ("redis://127.0.0.1:1/0", True)],
)
def test_elsewhere_a_countdown_is_sent_as_given(
    monkeypatch: pytest.MonkeyPatch, broker_url: str, quorum: bool
) -> None:
    sent = Sent(monkeypatch)
    app_for(broker_url, quorum).send_task("t", countdown=0.4, queue="llm.kimi-k2.5")
    assert [c["countdown"] for c in sent.calls] == [0.4]
    assert sent.declared == 0
