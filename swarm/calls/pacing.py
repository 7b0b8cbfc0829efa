"""Completion budgets that fit the node timeout, from each model's measured speed.

A call asks for up to ``max_tokens`` of completion, and the HTTP client gives it
``node_timeout_s``. On a hosted gateway generating a hundred tokens a second that never
matters; a local server on a laptop's CPU generates fifteen, so a 2048-token answer (a
small model repeating itself runs to max_tokens) takes over two minutes: the call times
out, its retries time out the same way, and the server keeps computing each abandoned
answer while the next requests queue behind it.

So the completion budget sent with each request is capped to what the model can generate
within the deadline, learned per model from its own answers: each answered call is a point
``latency = p x prompt_tokens + c x completion_tokens`` (prefill and generation seconds per
token, both learned, because a long prompt takes long to read before the first token on a
CPU), fitted by exponentially weighted least squares. The cap is the completion that the
line says ends at ``DEADLINE_SHARE`` of the node timeout for this request's prompt (the
rest is room for queueing behind another call and for the spread of the rates). A call
that timed out anyway halves the model's cap (as TCP halves its window on a loss), which
answers that end in time let grow back.

Why a cap rather than streaming and keeping the partial text at the deadline: a stream cut
at the deadline still leaves the server computing (non-streaming servers often finish an
abandoned request), its usage is unknown to us although the gateway bills it (OpenAI-style
streams report usage only at the end), so the ledger would stop matching the gateway's
counts; and every answer would become a partial one at a slow server. A capped request
ends on its own with ``finish_reason`` ``length`` and full usage, billed like any answer.

The cap changes only the request's body: its idempotency key and the tokens admission
reserves keep the caller's max_tokens. Paces are kept per model and per backend (a model
not answered yet starts from its backend's), shared by the workers through Redis.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

import redis

from swarm.store.shared_hash import SharedHash

log = logging.getLogger(__name__)

DEADLINE_SHARE = 0.6
"""Share of the node timeout a capped answer is planned to take."""
DECAY = 0.8
"""Weight left to earlier answers per new one (about the last five count)."""
MIN_BUDGET = 32
"""No cap goes below this many tokens (an answer needs room to say anything)."""
LOSS_FACTOR = 0.5
"""A timed-out call multiplies the model's cap by this."""
RECOVERY = 1.5
"""An answer in time multiplies a loss cap by this (until the line's own cap takes over)."""
RECOVERED = 1_000_000
"""A loss cap grown past this many tokens is dropped."""


@dataclass(frozen=True)
class Pace:
    """One model's weighted sums of (prompt, completion, latency) and its loss cap."""

    w: float = 0.0
    pp: float = 0.0
    pc: float = 0.0
    cc: float = 0.0
    pl: float = 0.0
    cl: float = 0.0
    loss_cap: float | None = None
    """Tokens allowed after timeouts (None: no timeout since the cap recovered)."""

    def observe(self, prompt: int, completion: int, latency_s: float, deadline_s: float) -> Pace:
        """After an answered call."""
        p, c, lat = float(prompt), float(completion), max(latency_s, 0.0)
        cap = self.loss_cap
        if cap is not None and lat < DEADLINE_SHARE * deadline_s:
            cap = cap * RECOVERY if cap < RECOVERED else None
        return Pace(
            w=self.w * DECAY + 1.0,
            pp=self.pp * DECAY + p * p,
            pc=self.pc * DECAY + p * c,
            cc=self.cc * DECAY + c * c,
            pl=self.pl * DECAY + p * lat,
            cl=self.cl * DECAY + c * lat,
            loss_cap=cap,
        )

    def timed_out(self, sent_max_tokens: int) -> Pace:
        """After a call that asked for ``sent_max_tokens`` and got no answer in time: the
        cap is half of what that call asked (calls sent together and timing out together
        halve it once, as TCP halves its window once per window of losses)."""
        halved = max(float(MIN_BUDGET), sent_max_tokens * LOSS_FACTOR)
        return replace(self, loss_cap=min(halved, self.loss_cap or math.inf))

    def rates(self) -> tuple[float, float] | None:
        """Seconds per prompt token and per completion token (None: no answer yet).

        The two-variable fit, when the answers varied enough to separate them and both
        rates are positive; else all of the time is put on the completion (the cautious
        reading: it gives the smallest cap)."""
        if self.w <= 0 or self.cc <= 0:
            return None
        det = self.pp * self.cc - self.pc * self.pc
        if det > 1e-6 * self.pp * self.cc:
            p = (self.pl * self.cc - self.cl * self.pc) / det
            c = (self.cl * self.pp - self.pl * self.pc) / det
            if p >= 0 and c > 0:
                return p, c
        return 0.0, self.cl / self.cc

    def budget(self, prompt: int, max_tokens: int, deadline_s: float) -> int:
        """Completion tokens to ask for: ``max_tokens``, or fewer when the model would not
        finish them within ``DEADLINE_SHARE`` of ``deadline_s`` after reading ``prompt``."""
        cap = self.loss_cap if self.loss_cap is not None else math.inf
        rates = self.rates()
        if rates is not None:
            p, c = rates
            cap = min(cap, (DEADLINE_SHARE * deadline_s - p * prompt) / c)
        if cap >= max_tokens:
            return max_tokens
        return max(MIN_BUDGET, min(max_tokens, int(cap)))


class Pacing:
    """The paces of every model this process calls, and of each backend (all its models'
    answers together): a model not answered yet starts from its backend's pace (a fallback
    model or the summariser on the same local server is as slow as the model before it)."""

    def __init__(self) -> None:
        self._paces: dict[str, Pace] = {}
        self._lock = threading.Lock()

    def _get(self, key: str) -> Pace:
        with self._lock:
            return self._paces.get(key, Pace())

    def _put(self, key: str, pace: Pace) -> None:
        with self._lock:
            self._paces[key] = pace

    def pace(self, model: str, backend: str) -> Pace:
        """The model's pace, or its backend's while the model has none."""
        own = self._get(model)
        if own.w > 0 or own.loss_cap is not None:
            return own
        return self._get(_backend_key(backend))

    def budget(
        self, model: str, backend: str, prompt_tokens: int, max_tokens: int, deadline_s: float
    ) -> int:
        """The completion budget of a call to ``model`` with this prompt (server tokens)."""
        return self.pace(model, backend).budget(prompt_tokens, max_tokens, deadline_s)

    def answered(
        self,
        model: str,
        backend: str,
        prompt: int,
        completion: int,
        latency_s: float,
        deadline_s: float,
    ) -> None:
        """Fold one answer (its reported usage and latency) into the model's and backend's
        paces."""
        for key in (model, _backend_key(backend)):
            self._put(key, self._get(key).observe(prompt, completion, latency_s, deadline_s))

    def timed_out(self, model: str, backend: str, sent_max_tokens: int) -> None:
        """A call to ``model`` asking for ``sent_max_tokens`` timed out."""
        for key in (model, _backend_key(backend)):
            self._put(key, self._get(key).timed_out(sent_max_tokens))
        log.debug("pacing: %s timed out asking %d tokens", model, sent_max_tokens)


def _backend_key(backend: str) -> str:
    return f"backend:{backend}"


class SharedPacing(Pacing):
    """Pacing shared by every worker of a deployment through Redis: one hash per gateway,
    a pace per model and per backend, read at most once a second per process. A worker
    started after others learned a server's speed caps its first calls already. Redis
    unreachable: the process's own paces serve."""

    def __init__(
        self, client: redis.Redis, key: str, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self.shared = SharedHash(client, key, "pacing", clock)

    def _refresh(self) -> None:
        found = self.shared.read_due()
        if found is None:
            return
        with self._lock:
            for name, value in found.items():
                self._paces[name] = Pace(**json.loads(value))

    def _get(self, key: str) -> Pace:
        self._refresh()
        return super()._get(key)

    def _put(self, key: str, pace: Pace) -> None:
        super()._put(key, pace)
        self.shared.put(key, json.dumps(asdict(pace)))
