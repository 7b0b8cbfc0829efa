"""Celery configuration and task names shared by producers and workers.

Producers send tasks by registered name with this configuration; workers/ builds its app
from the same function, so serializers, queues and timeouts cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from celery import Celery
from kombu.entity import Exchange, Queue

from swarm.catalog import Catalog
from swarm.jobs import sentinel_transport
from swarm.jobs.delayed_delivery import SwarmCelery
from swarm.settings import Settings
from swarm.store.connect import SentinelOptions, is_sentinel

SUBAGENT_TASK = "swarm.subagent"
SUBAGENTS_TASK = "swarm.subagents"
"""Several nodes of one job in one message (swarm.jobs.batch)."""
AGGREGATE_TASK = "swarm.aggregate"
PLAN_TASK = "swarm.plan"
WATCH_TASK = "swarm.watch"
"""The job watchdog (swarm.jobs.watchdog): re-sends what the broker lost."""
BATCH_POLL_TASK = "swarm.batch.poll"
"""One poll step of a job's batch file (swarm.batch.poll), a member of the job's chord."""
EMBEDDED_BROKER = "memory://localhost/"
EMBEDDED_BACKEND = "cache+memory://"
UNACKED_MUTEX_EXPIRE_S = 60
"""Lifetime of kombu's restore-sweep mutex on the Redis broker (a sweep takes milliseconds)."""


HEARTBEATS_PER_LEASE = 3
"""AMQP heartbeat timeouts per lease (see make_celery's broker_heartbeat)."""


def celery_config(settings: Settings, catalog: Catalog) -> dict[str, Any]:
    """The Celery settings of a swarm deployment (producer and worker alike)."""
    embedded = settings.embedded
    queues = catalog.queues()
    return {
        "broker_url": EMBEDDED_BROKER if embedded else settings.broker_url,
        "result_backend": EMBEDDED_BACKEND if embedded else settings.backend_url(),
        # JSON only: a pickled message is refused, never executed.
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "result_accept_content": ["json"],
        # A crashed worker's task is redelivered, not lost; one message per slot.
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        # A lost broker connection lets running tasks finish (the threads pool cannot cancel
        # them); their acks are lost too, so they run again (idempotently) after the
        # visibility timeout. Explicit: Celery 6 changes the default.
        "worker_cancel_long_running_tasks_on_connection_loss": False,
        "worker_prefetch_multiplier": 1,
        # After a broker reconnection Celery lowers its prefetch and raises it again from
        # each ack's callback, in the pool thread that acks (py-amqp's channel is not
        # thread-safe: its reply read raced the consumer's, and on a dead connection it
        # raised after the ack, workers/pool.py). The node-counted prefetch
        # (workers/prefetch.py) already sets the count from the consumer thread.
        "worker_enable_prefetch_count_reduction": False,
        "broker_transport_options": _transport_options(settings),
        "result_backend_transport_options": sentinel_transport_options(
            settings, settings.backend_url()
        ),
        "result_expires": settings.result_expires_s,
        "result_extended": False,
        "result_chord_retry_interval": 0.1,
        # A result that cannot be stored while the result backend fails over is tried again
        # for about SWARM_STORE_OUTAGE_S, not dropped; so is a chord member's counted part
        # (swarm.jobs.chord_backend: Celery retries only results).
        "result_backend_always_retry": True,
        "result_backend_max_retries": max(1, round(settings.store_outage_s)),
        "result_backend_max_sleep_between_retries_ms": 1000,
        "broker_connection_retry_on_startup": True,
        # AMQP: RabbitMQ closes a frozen worker's connection once its heartbeats stop (about
        # three heartbeat timeouts here), and the messages it was sent but never took (its
        # prefetch window, where no lease covers them; a message a sweeper re-sent may land
        # there too) go to other workers. A third of a lease (whole seconds, AMQP counts in
        # seconds): about one lease, as the leases.
        "broker_heartbeat": max(1, round(settings.lease_s / HEARTBEATS_PER_LEASE)),
        "task_queues": declared_queues(settings, queues),
        "task_default_queue": queues[0],
        "task_create_missing_queues": False,
        # I/O-bound calls: threads, many per process (override with -P/-c).
        "worker_pool": "threads",
        "worker_concurrency": settings.worker_concurrency,
        "worker_soft_shutdown_timeout": settings.worker_soft_shutdown_s,
        "worker_send_task_events": True,
        "task_send_sent_event": True,
        "worker_hijack_root_logger": False,
        # Celery's rate_limit holds per worker process only (a guard); the global limits
        # are swarm.calls.admission's. Unset by default.
        "task_annotations": _rate_limit_guard(settings),
    }


def declared_queues(settings: Settings, names: Sequence[str]) -> list[Queue]:
    """Each queue on an exchange of its own name, bound only to its own routing key.

    A bare ``Queue(name)`` would get Celery's default exchange (named after the default
    queue) and its routing key, binding every queue to the default queue's key, so that on
    RabbitMQ a message for the default queue would be copied into every queue.

    Classic queues (the default) are on direct exchanges. With ``quorum_queues`` they are
    RabbitMQ quorum queues (replicated) on topic exchanges, the key still the queue's exact
    name (no wildcard): Celery's consumers then use a per-consumer prefetch, which Celery
    cannot raise for a countdown message, so countdowns go through RabbitMQ's delay
    exchanges (swarm.jobs.delayed_delivery), which Celery binds only to topic (or fanout)
    exchanges: each worker adds the binding ``#.<queue>`` to each queue's exchange and
    binds that exchange to ``celery_delayed_delivery``.
    """
    arguments = {"x-queue-type": "quorum"} if settings.quorum_queues else None
    kind = "topic" if settings.quorum_queues else "direct"
    return [
        Queue(  # type: ignore[no-untyped-call]
            name,
            Exchange(name, type=kind),  # type: ignore[no-untyped-call]
            routing_key=name,
            queue_arguments=arguments,
        )
        for name in names
    ]


PRIORITY_BANDS: tuple[tuple[int, int], ...] = ((100, 0), (1000, 3), (10_000, 6))
"""(most nodes, priority): a job's sub-agent tasks get the priority of the first band it fits;
larger jobs get 9. On Redis, kombu serves priority 0 first (lists per step 0/3/6/9)."""


def job_priority(nodes: int) -> int:
    """Queue priority of a job's sub-agent tasks: smaller jobs first, so a small job is not
    stuck behind every queued task of a large one (admission then shares capacity fairly)."""
    return next((priority for most, priority in PRIORITY_BANDS if nodes <= most), 9)


def _rate_limit_guard(settings: Settings) -> dict[str, dict[str, str]]:
    if settings.worker_rate_limit is None:
        return {}
    return {SUBAGENT_TASK: {"rate_limit": settings.worker_rate_limit}}


def _transport_options(settings: Settings) -> dict[str, Any]:
    if settings.embedded:
        # The in-memory transport polls its queues; its 1 s default would dominate a demo.
        return {"polling_interval": 0.01}
    return {
        **sentinel_transport_options(settings, settings.broker_url),
        # A task unacked this long (its worker was killed) goes back to its queue; the
        # settings keep it above the longest task, or a running task would run twice.
        "visibility_timeout": settings.visibility_timeout_s,
        # Every worker sweeps for such tasks every interval (throttle 1: kombu's default
        # scans only every 10th tick, i.e. every 100 s).
        "unacked_restore_interval": settings.unacked_restore_interval_s,
        "unacked_restore_throttle": 1,
        # The sweep's mutex: a worker killed while holding it blocks sweeps this long
        # (kombu's default is 300 s).
        "unacked_mutex_expire": UNACKED_MUTEX_EXPIRE_S,
    }


def sentinel_transport_options(settings: Settings, url: str | None) -> dict[str, Any]:
    """Celery's and kombu's Sentinel transport options for a ``sentinel://`` URL: the
    master's name and the sentinels' password (the primary's is in the URL)."""
    if settings.embedded or not is_sentinel(url):
        return {}
    sentinel = SentinelOptions.from_settings(settings)
    options: dict[str, Any] = {"master_name": sentinel.master}
    if sentinel.password:
        options["sentinel_kwargs"] = sentinel.sentinel_kwargs()
    return options


def make_celery(settings: Settings, catalog: Catalog, name: str = "swarm") -> Celery:
    """A Celery app configured for this deployment, with no tasks registered."""
    if not settings.embedded and is_sentinel(settings.broker_url):
        sentinel_transport.install()  # kombu's, its closing channel fixed
    app: Celery = SwarmCelery(name, set_as_current=False)
    app.conf.update(celery_config(settings, catalog))
    return app
