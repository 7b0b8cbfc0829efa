"""The worker app factory: swarm's Celery configuration plus the registered tasks."""

from __future__ import annotations

import logging

from celery import Celery

from swarm.catalog import Catalog
from swarm.jobs.queueing import make_celery
from swarm.settings import Settings
from workers import batch, signals, tasks
from workers.intake import NodeIntakeStep
from workers.leases import SweeperStep

QUIET_LOGGERS = ("httpx2", "httpcore2")
"""The HTTP client logs one INFO line per gateway call: at hundreds of calls per second
that is a measurable share of a worker's CPU, and the job store, the ledger
and the metrics already record every call. Warnings and errors still show."""


def create_app(settings: Settings, catalog: Catalog) -> Celery:
    """A worker-capable app for this deployment."""
    app = make_celery(settings, catalog, name="workers")
    # Every message a worker sends (a task's retry, the watchdog's next check, a re-sent
    # node) keeps trying through a broker failover for about SWARM_STORE_OUTAGE_S: with
    # kombu's default (three tries in 0.4 s) a retry sent while Sentinel promoted a replica
    # failed, and Celery then rejects the running message without requeue, so the
    # watchdog's chain (or a requeued node) was gone for good.
    app.conf.task_publish_retry_policy = tasks.outage_retry_policy(settings.store_outage_s)
    tasks.register(app)
    batch.register(app)
    app.steps["consumer"].add(NodeIntakeStep)
    app.steps["worker"].add(SweeperStep)
    signals.connect()
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    return app
