"""A call's late answer, kept for its next attempt instead of a new request.

A request read past its node's deadline (swarm.calls.overtime) may be answered while its
call is still retrying: waiting for the permit the abandoned request held (a one-slot
server computes it before anything else), or backing off. That answer is the one the next
attempt would ask for (same prompt), so the next attempt takes it instead of sending the
request again: the gateway computes the call once, the ledger bills it once, as the call's
answer (recorded and stored like any answer, so issue 15's fencing applies). A late answer
that no attempt takes (the call already ended, or went back to the queue) is billed as an
unused response, as before.

Hand-written: a one-slot mailbox between the overtime thread and the call's thread.
"""

from __future__ import annotations

import threading

from swarm.calls.request import Answer

Late = tuple[Answer, float]
"""A late answer and its latency in seconds (since its request was sent)."""


class LateAnswers:
    """One call's late answer, until an attempt takes it or the call ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._answer: Late | None = None
        self._closed = False

    def offer(self, answer: Answer, latency_s: float) -> bool:
        """Keep ``answer`` for the call's next attempt; False when the call has ended (or
        one is kept already): the caller bills it as unused."""
        with self._lock:
            if self._closed or self._answer is not None:
                return False
            self._answer = (answer, latency_s)
            return True

    def take(self) -> Answer | None:
        """The kept answer, once (None when there is none)."""
        with self._lock:
            kept, self._answer = self._answer, None
        return None if kept is None else kept[0]

    def close(self) -> Late | None:
        """The call has ended: offers are refused from now; an answer kept and never taken
        is returned (to bill as unused)."""
        with self._lock:
            self._closed = True
            answer, self._answer = self._answer, None
            return answer
