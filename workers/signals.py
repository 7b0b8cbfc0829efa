"""Signal listeners: build the Runtime as soon as a worker process starts, so a bad
configuration fails at start-up instead of at the first task."""

from __future__ import annotations

from typing import Any

from celery import signals

from workers import runtime

_connected = False


def _warm_runtime(**_: Any) -> None:
    runtime.get()


def connect() -> None:
    """Connect the listeners once per process."""
    global _connected
    if not _connected:
        signals.worker_init.connect(_warm_runtime, weak=False)
        signals.worker_process_init.connect(_warm_runtime, weak=False)
        _connected = True
