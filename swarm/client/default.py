"""The module-level helpers ``swarm.submit()`` and ``swarm.attach()``: one client, built
from the environment on first use and shared by every call of the process (thread-safe),
closed at exit or by ``swarm.client.close_default()``, as Celery's default app and openai's
module client are. Calls given ``settings`` share one client per distinct settings."""

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
_clients: dict[Settings | None, SwarmClient] = {}
"""The shared clients: None for the environment's, else by their settings."""
_closed_at_exit = False


def default_client(settings: Settings | None = None) -> SwarmClient:
    """The process's shared client for ``settings`` (default: the environment), built on
    first use."""
    global _closed_at_exit
    with _lock:
        client = _clients.get(settings)
        if client is None:
            client = _clients[settings] = SwarmClient(settings)
            if not _closed_at_exit:
                atexit.register(close_default)
                _closed_at_exit = True
        return client


def close_default() -> None:
    """Close the shared clients; the next helper call builds a new one."""
    with _lock:
        clients = list(_clients.values())
        _clients.clear()
    for client in clients:
        client.close()


def submit(
    inputs: Sequence[InputItem | str],
    instruction: str = DEFAULT_INSTRUCTION,
    *,
    settings: Settings | None = None,
    **options: Any,
) -> SwarmHandle:
    """Submit a job with the shared client (``options``: SwarmClient.submit's keywords)."""
    return default_client(settings).submit(inputs, instruction, **options)


def attach(job_id: str, *, settings: Settings | None = None) -> SwarmHandle:
    """A handle on an existing job, from any process, with the shared client."""
    return default_client(settings).attach(job_id)
