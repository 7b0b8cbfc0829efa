"""Lifecycle hooks of gateway calls, with no-op defaults (metrics, logging, counters).

Subclass CallListener and override what you need; combine several with Listeners. Hooks
run on the calling thread and must be quick and must not raise.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import ParamSpec

from swarm.records import ErrorKind, Usage

log = logging.getLogger(__name__)
P = ParamSpec("P")


class CallListener:
    """Hooks called around gateway calls; every method is a no-op here."""

    def attempt_finished(
        self, model: str, error_kind: ErrorKind | None, usage: Usage, latency_s: float
    ) -> None:
        """One HTTP attempt ended: ``error_kind`` None means answered (and billed ``usage``)."""

    def node_finished(self, model: str, ok: bool, attempts: int, latency_s: float) -> None:
        """A sub-agent node ended (after its retries), ok or with an error envelope."""

    def late_answer(self, model: str, usage: Usage, latency_s: float) -> None:
        """A request that had timed out at its node's deadline was answered after all
        (swarm.calls.local.overtime): billed ``usage``, ``latency_s`` after it was sent. Its
        attempt was told as a timeout already."""


class Listeners(CallListener):
    """Fan one event out to several listeners."""

    def __init__(self, listeners: Sequence[CallListener]) -> None:
        self.listeners = tuple(listeners)

    def attempt_finished(
        self, model: str, error_kind: ErrorKind | None, usage: Usage, latency_s: float
    ) -> None:
        for listener in self.listeners:
            listener.attempt_finished(model, error_kind, usage, latency_s)

    def node_finished(self, model: str, ok: bool, attempts: int, latency_s: float) -> None:
        for listener in self.listeners:
            listener.node_finished(model, ok, attempts, latency_s)

    def late_answer(self, model: str, usage: Usage, latency_s: float) -> None:
        for listener in self.listeners:
            listener.late_answer(model, usage, latency_s)


def safely(hook: Callable[P, None], *args: P.args, **kwargs: P.kwargs) -> None:
    """Call a listener hook; one that raises is logged and changes nothing (metrics must
    never fail a call or a node)."""
    try:
        hook(*args, **kwargs)
    except Exception:
        log.warning("call listener %s failed (ignored)", getattr(hook, "__qualname__", hook),
                    exc_info=True)  # fmt: skip
