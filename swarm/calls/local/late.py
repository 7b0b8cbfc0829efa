"""A call's late answer, kept for its next attempt instead of a new request.

A request read past its node's deadline (swarm.calls.local.overtime) may be answered while its
call is still retrying: waiting for the permit the abandoned request held (a one-slot
server computes it before anything else), or backing off. That answer is the one the next
attempt would ask for (same prompt), so the next attempt takes it instead of sending the
request again: the gateway computes the call once, the ledger bills it once, as the call's
answer (recorded and stored like any answer, so the claim's fencing applies). A late answer
that no attempt takes (the call already ended) is billed as an unused response.
So that one does not go to waste, a call with a request still being read waits for a permit
in its task rather than going back to the queue (swarm.calls.local.gate), and stops
waiting when the answer comes.

Hand-written: a one-slot mailbox between the overtime thread and the call's thread.
"""

from __future__ import annotations

import threading

from swarm.calls.request import Answer

TimedAnswer = tuple[Answer, float]
"""A late answer and its latency in seconds (since its request was sent)."""


class LateAnswers:
    """One call's late answer, until an attempt takes it or the call ends; and whether a
    request of the call is still being read (one may come)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._answer: TimedAnswer | None = None
        self._closed = False
        self._reading = 0

    def expect(self) -> None:
        """An attempt stopped waiting for its request, which goes on (StillReading)."""
        with self._lock:
            self._reading += 1

    def offer(self, answer: Answer, latency_s: float) -> bool:
        """A request read past its deadline was answered: keep ``answer`` for the call's next
        attempt; False when the call has ended (or one is kept already): the caller bills
        it as unused."""
        with self._lock:
            self._reading -= 1
            if self._closed or self._answer is not None:
                return False
            self._answer = (answer, latency_s)
            return True

    def failed(self) -> None:
        """A request read past its deadline ended without an answer."""
        with self._lock:
            self._reading -= 1

    def coming(self) -> bool:
        """A request of the call is still being read: its answer may be the next one."""
        with self._lock:
            return self._reading > 0 and self._answer is None and not self._closed

    def ready(self) -> bool:
        """An answer is kept (``take`` has it)."""
        with self._lock:
            return self._answer is not None

    def take(self) -> Answer | None:
        """The kept answer, once (None when there is none)."""
        with self._lock:
            kept, self._answer = self._answer, None
        return None if kept is None else kept[0]

    def close(self) -> TimedAnswer | None:
        """The call has ended: offers are refused from now; an answer kept and never taken
        is returned (to bill as unused)."""
        with self._lock:
            self._closed = True
            kept, self._answer = self._answer, None
        return kept
