"""The module-level helpers ``swarm.submit()`` and ``swarm.attach()``: one client, built
from the environment on first use and shared by every call of the process (thread-safe),
closed at exit or by ``swarm.client.close_default()``; as Celery's default app and
openai's module client do."""

from __future__ import annotations

import atexit
import threading
from collections.abc import Sequence
from typing import Any

from swarm.client.core import SwarmClient
from swarm.client.handle import SwarmHandle
from swarm.jobs.defaults import DEFAULT_INSTRUCTION
from swarm.records import InputItem
from swarm.settings import Settings

_lock = threading.Lock()
_default: SwarmClient | None = None


def default_client() -> SwarmClient:
    """The process's shared client (built on first use from the environment)."""
    global _default
    with _lock:
        if _default is None:
            _default = SwarmClient()
            atexit.register(close_default)
        return _default


def close_default() -> None:
    """Close the shared client, if one was built; the next helper call builds a new one."""
    global _default
    with _lock:
        client, _default = _default, None
    if client is not None:
        client.close()


def submit(
    inputs: Sequence[InputItem | str],
    instruction: str = DEFAULT_INSTRUCTION,
    *,
    settings: Settings | None = None,
    **options: Any,
) -> SwarmHandle:
    """Submit a job with the shared client (``options``: SwarmClient.submit's keywords).

    With ``settings``, a client of its own for those settings submits, and stays open as
    long as the handle needs it (use a SwarmClient to close it when you are done)."""
    client = default_client() if settings is None else SwarmClient(settings)
    return client.submit(inputs, instruction, **options)


def attach(job_id: str, *, settings: Settings | None = None) -> SwarmHandle:
    """A handle on an existing job, from any process (the shared client, or one for
    ``settings``)."""
    client = default_client() if settings is None else SwarmClient(settings)
    return client.attach(job_id)
