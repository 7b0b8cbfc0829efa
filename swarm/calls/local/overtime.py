"""A local backend's requests read past their node's deadline, so a late answer is billed.

A local server (llama.cpp) finishes computing a non-streaming request after its client
stopped waiting; closed at the node timeout, that computed answer would go unbilled and
the ledger would count less than the server served.

So a local call's request works overtime: the node's thread hands it to an overtime thread
and waits for it until the node's deadline (``deadline_s``). An answer or error in time is
the node's. At the deadline the node raises the timeout error (``openai.APITimeoutError``),
so retries, pacing's ``timed_out`` and admission see a timeout; the request itself keeps
reading for up to ``grace_s`` more (its HTTP read timeout is the deadline plus the grace),
and an answer that arrives is handed to ``late`` (swarm.calls.local_steps: the call's next
answer, or billed in the ledger as unused). The timeout error raised at the deadline is a
``StillReading``: the local gate (swarm.calls.local.gate) keeps the call's permits until the
request has ended, since the server is still computing it (nothing is sent to queue behind
it), or until it shows it hangs (swarm.calls.local.abandoned).

Bounded: at most ``max_requests`` requests per process are sent this way (each takes a
thread and a connection while in flight, a late one for up to ``grace_s``); beyond that,
and with ``grace_s`` 0, a request runs on the node's thread and closes at the deadline. The
overtime threads are daemon threads, started when needed and kept: a process that exits
does not wait for its late requests.

Cost: a thread hand-off per call (the request's HTTP work is the same); its figure is in
ops/bench/results/README.md.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx2
import openai

from swarm.calls.request import Answer
from swarm.settings import Settings

log = logging.getLogger(__name__)

GRACE_TIMEOUTS = 40
"""Default overtime grace, in node timeouts (30 min at 45 s): on a one-slot server
(llama.cpp) the first wave of a job, sent before any answer told its speed, is computed one
after the other, and an abandoned request is reached only when those ahead of it are done,
which for a wave of 20 can take well over ten node timeouts. A hosted gateway ends a request
long before (its own request timeout), so the bound only matters against one that never
answers: there it holds a thread and a connection that long (not its permits:
swarm.calls.local.abandoned gives them back).
"""

SendRequest = Callable[[float | None], Answer]
"""The request: sends it with this HTTP read timeout (seconds; None: the client's own, the
node timeout) and returns its answer."""
OnLate = Callable[[Answer | BaseException, float], None]
"""Told how a request ended after its node's deadline (its answer, or why it failed) and
its latency in seconds; runs on the overtime thread."""
Ended = Callable[[Answer | BaseException], None]
"""Told how a request the node stopped waiting for ended (``StillReading.when_ended``)."""


def _held_lock() -> threading.Lock:
    lock = threading.Lock()
    lock.acquire()
    return lock


@dataclass(eq=False)
class _Pending:
    """One request handed to an overtime thread."""

    send: SendRequest
    timeout_s: float
    late: OnLate
    started: float = field(default_factory=time.perf_counter)
    done: threading.Lock = field(default_factory=_held_lock)
    """Released when the request has ended (the node waits by acquiring it)."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    outcome: Answer | BaseException | None = None
    abandoned: bool = False
    """Set by the node when it stopped waiting (under ``lock``)."""
    on_end: list[Ended] = field(default_factory=list)
    """Told how the request ended, once it has (``StillReading.when_ended``; under ``lock``)."""


class StillReading(openai.APITimeoutError):
    """The node's timeout for a request that goes on in overtime (an ``APITimeoutError``
    like any other to retries and pacing); ``when_ended`` says when the request ends."""

    def __init__(self, pending: _Pending) -> None:
        super().__init__(request=_REQUEST)
        self._pending = pending

    def when_ended(self, ended: Ended) -> None:
        """``ended`` is called with the request's answer or error once it has ended: on the
        overtime thread, or now when it already has."""
        pending = self._pending
        with pending.lock:
            if pending.outcome is None:
                pending.on_end.append(ended)
                return
            outcome = pending.outcome
        _tell(ended, outcome)


class Overtime:
    """Per process: the overtime threads and the bound on requests sent through them."""

    def __init__(self, grace_s: float = 0.0, max_requests: int = 0) -> None:
        self.grace_s = grace_s
        self.max_requests = max_requests if grace_s > 0 else 0
        self._slots = threading.BoundedSemaphore(max(self.max_requests, 1))
        self._jobs: queue.SimpleQueue[_Pending] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0

    @classmethod
    def from_settings(cls, settings: Settings) -> Overtime:
        """SWARM_OVERTIME_GRACE_S (None: GRACE_TIMEOUTS node timeouts) and
        SWARM_OVERTIME_MAX."""
        grace_s = settings.overtime_grace_s
        if grace_s is None:
            grace_s = GRACE_TIMEOUTS * settings.node_timeout_s
        return cls(grace_s, settings.overtime_max)

    @property
    def enabled(self) -> bool:
        """True when requests may be read past their deadline."""
        return self.max_requests > 0

    def send(self, send: SendRequest, deadline_s: float, late: OnLate) -> Answer:
        """``send``'s answer if it comes within ``deadline_s``; else the node's timeout error,
        while the request goes on for ``grace_s`` and a late ending goes to ``late``."""
        if not self.enabled or not self._slots.acquire(blocking=False):
            return send(None)  # closed at the deadline by the HTTP client
        pending = _Pending(send, deadline_s + self.grace_s, late)
        self._hand_off(pending)
        if not pending.done.acquire(timeout=deadline_s):
            with pending.lock:
                pending.abandoned = pending.outcome is None
            if pending.abandoned:
                log.debug("overtime: request past its %.0f s deadline, read %.0f s more",
                          deadline_s, self.grace_s)  # fmt: skip
                raise StillReading(pending)
        outcome = pending.outcome
        if isinstance(outcome, BaseException):
            raise outcome
        assert outcome is not None
        return outcome

    def _hand_off(self, pending: _Pending) -> None:
        """Queue the request for an idle overtime thread, starting one when none is idle."""
        with self._lock:
            if self._idle > 0:
                self._idle -= 1
            else:
                self._threads += 1
                name = f"overtime-{self._threads}"
                threading.Thread(target=self._serve, name=name, daemon=True).start()
        self._jobs.put(pending)

    def _serve(self) -> None:
        while True:
            _run(self._jobs.get())
            with self._lock:
                self._idle += 1
            self._slots.release()  # after the thread is idle: never more threads than slots


def _run(pending: _Pending) -> None:
    try:
        outcome: Answer | BaseException = pending.send(pending.timeout_s)
    except Exception as exc:  # the node's to raise, or the late handler's to read
        outcome = exc
    with pending.lock:
        pending.outcome = outcome
        abandoned, on_end = pending.abandoned, list(pending.on_end)
    pending.done.release()
    if abandoned:
        _tell_late(pending, outcome)
    for ended in on_end:  # after the late answer is billed
        _tell(ended, outcome)


def _tell(ended: Ended, outcome: Answer | BaseException) -> None:
    try:
        ended(outcome)
    except Exception:
        log.warning("overtime: handling a request's end failed (ignored)", exc_info=True)


def _tell_late(pending: _Pending, outcome: Answer | BaseException) -> None:
    latency_s = time.perf_counter() - pending.started
    log.debug("overtime: request ended %.1f s after it was sent, past its deadline: %s",
              latency_s, type(outcome).__name__)  # fmt: skip
    try:
        pending.late(outcome, latency_s)
    except Exception:
        log.warning("overtime: handling a late answer failed (ignored)", exc_info=True)


_REQUEST = httpx2.Request("POST", "http://gateway/chat/completions")
"""The request an overtime timeout error names (the SDK's errors carry one)."""
