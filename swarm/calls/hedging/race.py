"""A hedged attempt: the request, then after the hedge delay one duplicate; the first
answer wins and the other request is withdrawn.

The hedge step runs each request (a leg) down the rest of the call's path (admit, fence,
http) on a thread of its own, and the calling thread (the node's) waits for the first
answer. A leg's http step sends on the hedger's event loop thread through an async client
made by swarm.calls.gateway.make_async_client (the main client's timeouts, headers and kept
URLs): the sync client cannot withdraw a request it is blocked in, while cancelling the
losing request's task closes its HTTP connection at once (the gateway sees the client go
away, as a real provider does, and a simulator counts it as not completed).

- admission: the original is admitted like any attempt (it may wait or requeue, and
  starts from the permit asked with the claim); the duplicate never waits: it asks
  (``Gate.try_acquire``) up to HEDGE_TRIES times and is not sent when the model stays at a
  limit, so hedges count against RPM, TPM and in-flight like any request; a withdrawn
  request's permit goes back unsent;
- the per-job cap (``JobStore.take_hedge``) and no hedging for jobs with a budget;
- billing: the winner is recorded by the call's session like any answer (ledger,
  idempotency); a loser that the gateway completed before its withdrawal took effect (both
  answered at about the same time) is billed too (``CallSession.bill``), so the ledger bills
  what the gateway served. A request cancelled before its answer is not billed: the
  simulator does not count it; a real gateway that still bills a withdrawn request cannot
  tell us.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import openai

from swarm.calls.admission.gate import Gate
from swarm.calls.gateway import make_async_client, send_async
from swarm.calls.hedging.policy import HedgePolicy
from swarm.calls.hedging.sketch import LatencySketch
from swarm.calls.request import Answer, CallRequest, Withdrawn
from swarm.calls.retry_policy import BadResponseError
from swarm.records import Usage
from swarm.settings import Settings

log = logging.getLogger(__name__)

CAPPED_MAX = 10_000
"""Jobs remembered as capped per process (forgotten all at once, then asked again)."""
HEDGE_TRIES = 5
HEDGE_RETRY_S = 0.05
"""A refused hedge asks admission again after this long, at most HEDGE_TRIES times."""
SETTLE_TIMEOUT_S = 5.0
"""How long a withdrawn request may take to end (the loop closes it at once)."""

Bill = Callable[[Usage], None]
Attempt = Callable[[CallRequest], Answer]


@dataclass
class HedgedCall:
    """One hedge-enabled call: whom to ask and whom to tell."""

    job_id: str
    model: str
    """Catalog name of the model (the sketch's key)."""
    gate: Gate
    """Admission for this call's requests."""
    bill: Bill
    """Records a loser's usage in the ledger (CallSession.bill)."""
    on_hedge_won: Callable[[], None]
    """Counts a hedge that won (JobStore.hedge_won)."""
    take_hedge: Callable[[], bool]
    """Counts a hedge against the job's cap; False when the cap is reached."""


class _Leg:
    """One request of a race (swarm.calls.request.Leg): run down the path by its thread."""

    def __init__(
        self, hedger: Hedger, call: HedgedCall, notify: threading.Event, rival: _Leg | None
    ) -> None:
        self.duplicate = rival is not None
        self.notify = notify
        """The race's event, set whenever one of its legs ends."""
        self.rival = rival
        """The original, for a duplicate: it stops asking for a permit once that ended."""
        self.started = time.perf_counter()
        """When the request went out."""
        self.answer: Answer | None = None
        self.error: BaseException | None = None
        """Why the leg has no answer (Withdrawn when it was withdrawn first)."""
        self.done = threading.Event()
        """The leg's path returned or raised (its permit finished)."""
        self.out = threading.Event()
        """The request went out, or the leg ended before it did."""
        self._hedger, self._call = hedger, call
        self._lock = threading.Lock()
        self._withdrawn = False
        self._task: asyncio.Task[Answer] | None = None
        self._response: Answer | None = None
        """(loop thread) The gateway's answer, set as soon as it came."""
        self._failure: BaseException | None = None
        self._ended = threading.Event()
        """(loop thread) The request ended: answered, failed or cancelled."""

    # -- the leg's thread: its path, from the hedge step's ``next`` on --
    def run(self, next: Attempt, request: CallRequest) -> None:
        try:
            self.answer = next(replace(request, leg=self))
        except BaseException as exc:
            self.error = exc
        finally:
            self.done.set()
            self.out.set()
            self.notify.set()

    def admit(self, attempt: Callable[[], Answer]) -> Answer:
        """The duplicate's admission: a permit if the model has room within a few short
        tries while the original runs, and room under the job's cap; Withdrawn if not."""
        gate, call = self._call.gate, self._call
        permit = None
        for _ in range(HEDGE_TRIES):
            permit = gate.try_acquire()
            if permit is not None or self._original_ended(HEDGE_RETRY_S):
                break
        if permit is None:
            raise Withdrawn("hedge not admitted: the model stayed at its limits")
        if not call.take_hedge():
            gate.settle(permit, requeue=False)  # refund: never sent
            self._hedger.capped(call.job_id)
            raise Withdrawn("hedge not sent: the job's cap is reached")
        try:
            answer = attempt()
        except BaseException as exc:  # withdrawn: its permit goes back unsent
            gate.settle(permit, error=exc, requeue=False)
            raise
        gate.settle(permit, answer=answer, requeue=False)
        return answer

    def _original_ended(self, wait_s: float) -> bool:
        return self.rival is not None and self.rival.done.wait(wait_s)

    def send(self, request: CallRequest) -> Answer:
        """(the http step) The request on the loop thread; its answer, its error, or
        Withdrawn when the other leg answered first."""
        with self._lock:
            if self._withdrawn:
                raise Withdrawn("withdrawn before it was sent")
            self.started = time.perf_counter()
            self._hedger.launch(self, request)
        self.out.set()
        self._ended.wait()
        if self._response is not None:
            return self._response
        if self._failure is not None:
            raise self._failure
        raise Withdrawn("withdrawn: the other request answered first")

    # -- the calling thread --
    def withdraw(self) -> None:
        """Withdraw the request: not sent if it is not out yet, else cancelled."""
        with self._lock:
            self._withdrawn = True
            task = self._task
        if task is not None:
            self._hedger.cancel(task)

    # -- the loop thread --
    def spawn(self, request: CallRequest, client: Callable[[], Any]) -> None:
        """(loop thread) Start the request; a withdrawal scheduled later finds its task."""
        task = asyncio.ensure_future(self._request(request, client))
        task.add_done_callback(self._end)
        with self._lock:
            self._task = task
            if self._withdrawn:
                task.cancel()

    async def _request(self, request: CallRequest, client: Callable[[], Any]) -> Answer:
        self._response = await send_async(await client(), request)
        return self._response

    def _end(self, task: asyncio.Task[Answer]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self._failure = task.exception()
        self._ended.set()


class Hedger:
    """Per process: the event loop thread, its async clients, the latency sketch."""

    def __init__(
        self,
        settings: Settings,
        base_url: str,
        api_key: str,
        sketch: LatencySketch,
        endpoints: Mapping[str, tuple[str, str]] | None = None,
    ) -> None:
        self.policy = HedgePolicy.from_settings(settings)
        self.sketch = sketch
        self._settings = settings
        self._endpoints = {"": (base_url, api_key), **(endpoints or {})}
        """Base URL and key of the process's client ("") and of each backend with a base
        URL of its own."""
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._clients: dict[str, openai.AsyncOpenAI] = {}
        """(loop thread) Clients by ``_endpoints`` name, made on first use."""
        self._capped: set[str] = set()
        """Jobs whose cap this process saw reached (no more tries)."""

    # -- the event loop thread: requests as tasks, withdrawn by cancelling them --
    def _start_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="hedge-loop", daemon=True).start()
                self._loop = loop
            return self._loop

    def launch(self, leg: _Leg, request: CallRequest) -> None:
        """Send ``leg``'s request on the loop thread."""
        backend = request.model.backend
        client = lambda: self._client_for(backend)  # noqa: E731 - run on the loop thread
        self._start_loop().call_soon_threadsafe(leg.spawn, request, client)

    async def _client_for(self, backend: str) -> openai.AsyncOpenAI:
        """(loop thread) The client of ``backend``: its own base URL's, else the process's."""
        name = backend if backend in self._endpoints else ""
        if name not in self._clients:
            self._clients[name] = make_async_client(self._settings, *self._endpoints[name])
        return self._clients[name]

    def cancel(self, task: asyncio.Task[Answer]) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(task.cancel)

    def capped(self, job_id: str) -> None:
        """Remember that ``job_id``'s cap is reached: its calls are not hedged any more."""
        if len(self._capped) >= CAPPED_MAX:
            self._capped.clear()
        self._capped.add(job_id)

    # -- one attempt --
    def delay_s(self, model: str) -> float | None:
        """The hedge delay of ``model`` now (None: this call is not hedged)."""
        policy = self.policy
        observed = None
        if policy.quantile is not None:
            observed = self.sketch.quantile(model, policy.quantile, policy.min_samples)
        return policy.delay_s(observed)

    def attempt(self, call: HedgedCall, request: CallRequest, next: Attempt) -> Answer:
        """One attempt of ``call``: hedged when a delay applies, else ``next`` (the rest of
        the path); the latency of an answer feeds the sketch."""
        delay = self.delay_s(call.model)
        if delay is None:
            started = time.perf_counter()
            answer = next(request)
            self.sketch.observe(call.model, time.perf_counter() - started)
            return answer
        notify = threading.Event()
        primary = self._run(_Leg(self, call, notify, None), next, request)
        primary.out.wait()  # admitted (or ended): the delay runs from its request on
        hedge = None
        if not primary.done.wait(delay) and call.job_id not in self._capped:
            hedge = self._run(_Leg(self, call, notify, primary), next, request)
        return self._finish(call, primary, hedge)

    def _run(self, leg: _Leg, next: Attempt, request: CallRequest) -> _Leg:
        """Run ``leg`` down the path on a thread of its own (in the caller's context: its
        span, its tracing)."""
        context = contextvars.copy_context()
        name = "hedge-leg" if leg.duplicate else "hedged-original"
        thread = threading.Thread(target=context.run, args=(leg.run, next, request), name=name,
                                  daemon=True)  # fmt: skip
        thread.start()
        return leg

    def _finish(self, call: HedgedCall, primary: _Leg, hedge: _Leg | None) -> Answer:
        legs = [primary] if hedge is None else [primary, hedge]
        winner = _first_answer(legs, primary.notify)
        if winner is None:  # every request failed: the original's error decides
            assert primary.error is not None
            if hedge is not None:
                self._end_loser(call, hedge)
            raise primary.error
        for leg in legs:
            if leg is not winner:
                self._end_loser(call, leg)
        self.sketch.observe(call.model, time.perf_counter() - winner.started)
        if winner is hedge:
            call.on_hedge_won()
        assert winner.answer is not None
        return winner.answer

    def _end_loser(self, call: HedgedCall, leg: _Leg) -> None:
        """Withdraw a request that lost (one that failed has ended already), and bill it
        if the gateway answered it anyway."""
        leg.withdraw()
        if not leg.done.wait(SETTLE_TIMEOUT_S):
            log.debug("hedging: a withdrawn request of %s has not ended; its permit lapses",
                      call.model)  # fmt: skip
            return
        if leg.answer is not None:
            call.bill(leg.answer.usage)
        elif isinstance(leg.error, BadResponseError) and leg.error.usage:
            call.bill(leg.error.usage)


def _first_answer(legs: list[_Leg], notify: threading.Event) -> _Leg | None:
    """The first leg (the original first on a tie) that answered, waiting past failures;
    None when every request failed."""
    while True:
        notify.clear()
        for leg in legs:
            if leg.done.is_set() and leg.answer is not None:
                return leg
        if all(leg.done.is_set() for leg in legs):
            return None
        notify.wait()
