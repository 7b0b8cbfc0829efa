"""Completion budgets that fit the node timeout, from a local server's measured speed.

A call asks for up to ``max_tokens`` of completion, and the HTTP client gives it
``node_timeout_s``. A local server on a laptop's CPU can generate so slowly that an answer
of ``max_tokens`` (a small model repeating itself runs to max_tokens) does not end within
that timeout: the call times out, its retries time out the same way, and the server keeps
computing each abandoned answer while the next requests queue behind it. Only local
backends are paced (swarm.calls.local); a hosted gateway's requests go as asked.

Each answered call is a point ``latency = a + p x prompt_tokens + c x completion_tokens``
(a fixed time per request, such as the time to the first token; prefill and generation
seconds per token), fitted by exponentially weighted least squares. The generation rate
``c`` is known only once answers of different lengths were seen: answers all of one length
cannot tell the fixed time from the time per token, and then nothing is capped. A request
is capped only when the line says its asked ``max_tokens`` would not end within the node
timeout; it is then sent the completion that ends at ``DEADLINE_SHARE`` of the timeout
(the rest is room for queueing behind another call and for the spread of the rates). A
call that timed out halves the model's cap (as TCP halves its window on a loss), which
answers that end in time let grow back. Every cap is logged at WARNING with the numbers
(``Pace.explain``) and recorded in the node's ``max_tokens_sent``.

Why a cap rather than streaming and keeping the partial text at the deadline: a stream cut
at the deadline still leaves the server computing, its usage is unknown to us although the
server counts it (OpenAI-style streams report usage only at the end), so the ledger would
stop matching; and every answer would become a partial one at a slow server. A capped
request ends on its own with ``finish_reason`` ``length`` and full usage, billed like any
answer.

The cap changes only the request's body: its idempotency key and the tokens admission
reserves keep the caller's max_tokens. Paces are kept per model and per backend (a model
not answered yet starts from its backend's), shared by the workers through Redis.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from dataclasses import asdict, dataclass, replace

from swarm.calls.shared_learning import SharedLearning

log = logging.getLogger(__name__)

DEADLINE_SHARE = 0.6
"""Share of the node timeout a capped answer is planned to take."""
MIN_WEIGHT = 2.4
"""Answers (decayed) needed before the line says anything (three answers)."""
MIN_SPREAD = 0.1
"""Relative spread (standard deviation over mean) of the answers' lengths needed to tell
the generation rate from the fixed time per request."""
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
class Rates:
    """A model's fitted line: seconds per request, per prompt token, per completion token."""

    fixed_s: float
    per_prompt_s: float
    per_completion_s: float

    def latency_s(self, prompt: int, completion: int) -> float:
        """The line's latency of a request."""
        return self.fixed_s + self.per_prompt_s * prompt + self.per_completion_s * completion


@dataclass(frozen=True)
class Pace:
    """One model's decayed sums of its answers and its loss cap."""

    sums: tuple[float, ...] = (0.0,) * 9
    """Weight, then the sums of prompt tokens p, completion tokens c, latency l, and of
    p*p, p*c, c*c, p*l, c*l: all a least-squares line needs."""
    loss_cap: float | None = None
    """Tokens allowed after timeouts (None: no timeout since the cap recovered)."""

    @property
    def weight(self) -> float:
        """The answers observed, decayed."""
        return self.sums[0]

    def observe(self, prompt: int, completion: int, latency_s: float, deadline_s: float) -> Pace:
        """After an answered call."""
        p, c, lat = float(prompt), float(completion), max(latency_s, 0.0)
        cap = self.loss_cap
        if cap is not None and lat < DEADLINE_SHARE * deadline_s:
            cap = cap * RECOVERY if cap < RECOVERED else None
        point = (1.0, p, c, lat, p * p, p * c, c * c, p * lat, c * lat)
        return Pace(tuple(s * DECAY + x for s, x in zip(self.sums, point, strict=True)), cap)

    def timed_out(self, sent_max_tokens: int) -> Pace:
        """After a call that asked for ``sent_max_tokens`` and got no answer in time: the
        cap is half of what that call asked (calls sent together and timing out together
        halve it once, as TCP halves its window once per window of losses)."""
        halved = max(float(MIN_BUDGET), sent_max_tokens * LOSS_FACTOR)
        return replace(self, loss_cap=min(halved, self.loss_cap or math.inf))

    def rates(self) -> Rates | None:
        """The fitted line; None while the answers' lengths did not vary enough (relative
        spread below ``MIN_SPREAD``) to tell the generation rate from the fixed time, or
        the fit finds no positive generation rate.

        The three-term fit when the prompts varied enough to separate prefill from the
        rest; else the prompt's time goes into the fixed term."""
        n, sp, sc, sl, pp, pc, cc, pl, cl = self.sums
        if n < MIN_WEIGHT:
            return None
        mp, mc, ml = sp / n, sc / n, sl / n
        vpp, vcc = pp / n - mp * mp, cc / n - mc * mc
        vpc, vpl, vcl = pc / n - mp * mc, pl / n - mp * ml, cl / n - mc * ml
        if vcc <= (MIN_SPREAD * mc) ** 2 or vcc <= 0:
            return None
        det = vpp * vcc - vpc * vpc
        if vpp > (MIN_SPREAD * mp) ** 2 and det > 1e-6 * vpp * vcc:
            p = (vpl * vcc - vcl * vpc) / det
            c = (vcl * vpp - vpl * vpc) / det
            if p >= 0 and c > 0:
                return Rates(max(ml - p * mp - c * mc, 0.0), p, c)
        c = vcl / vcc
        if c <= 0:
            return None
        return Rates(max(ml - c * mc, 0.0), 0.0, c)

    def budget(self, prompt: int, max_tokens: int, deadline_s: float) -> int:
        """Completion tokens to ask for: ``max_tokens``, unless the line says they would not
        end within ``deadline_s`` after reading ``prompt`` (then what ends at
        ``DEADLINE_SHARE`` of it), or a timeout's loss cap is lower."""
        cap = self.loss_cap if self.loss_cap is not None else math.inf
        rates = self.rates()
        if rates is not None and rates.latency_s(prompt, max_tokens) > deadline_s:
            room_s = DEADLINE_SHARE * deadline_s - rates.fixed_s - rates.per_prompt_s * prompt
            cap = min(cap, room_s / rates.per_completion_s)
        if cap >= max_tokens:
            return max_tokens
        return max(MIN_BUDGET, min(max_tokens, int(cap)))

    def explain(self, prompt: int, deadline_s: float) -> str:
        """Why ``budget`` caps: the fitted rates and the loss cap, in words."""
        parts = []
        if (rates := self.rates()) is not None:
            parts.append(f"measured {rates.fixed_s:.2f} s per request + "
                         f"{1 / rates.per_completion_s:.1f} tokens/s, a {prompt}-token "
                         f"prompt read in {rates.per_prompt_s * prompt:.2f} s; the node "
                         f"timeout is {deadline_s:.0f} s")  # fmt: skip
        if self.loss_cap is not None:
            parts.append(f"a recent timeout limits answers to {int(self.loss_cap)} tokens")
        return "; ".join(parts) or "no measurement"


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
        if own.weight > 0 or own.loss_cap is not None:
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


def _pace_of(value: str) -> Pace:
    """A pace as stored; one another version stored in another shape starts afresh."""
    stored = json.loads(value)
    sums = stored.get("sums")
    if not isinstance(sums, list) or len(sums) != len(Pace().sums):
        return Pace()
    return Pace(tuple(sums), stored.get("loss_cap"))


def _backend_key(backend: str) -> str:
    return f"backend:{backend}"


class SharedPacing(SharedLearning, Pacing):
    """Pacing shared by every worker of a deployment through Redis: one hash per gateway,
    a pace per model and per backend, read at most once a second per process. A worker
    started after others learned a server's speed caps its first calls already. Redis
    unreachable: the process's own paces serve."""

    WHAT = "pacing"

    def _apply(self, field: str, value: str) -> None:
        self._paces[field] = _pace_of(value)

    def _get(self, key: str) -> Pace:
        self._refresh()
        return super()._get(key)

    def _put(self, key: str, pace: Pace) -> None:
        super()._put(key, pace)
        self.shared.put(key, json.dumps(asdict(pace)))
