"""The worker app factory: swarm's Celery configuration plus the registered tasks."""

from __future__ import annotations

from celery import Celery

from swarm.catalog import Catalog
from swarm.queueing import make_celery
from swarm.settings import Settings
from workers import signals, tasks


def create_app(settings: Settings, catalog: Catalog) -> Celery:
    """A worker-capable app for this deployment."""
    app = make_celery(settings, catalog, name="workers")
    tasks.register(app)
    signals.connect()
    return app
