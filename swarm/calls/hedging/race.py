"""A hedged attempt: the request, then after the hedge delay one duplicate; the first
answer wins and the other request is cancelled.

The sync openai client cannot withdraw a request it is blocked in, so the requests of a
hedge-enabled call run on the process's event loop thread with the async openai client:
cancelling the losing task closes its HTTP connection at once (the gateway sees the
client go away, as a real provider does, and a simulator counts it as not completed).
The calling thread (the node's) only waits, and keeps everything else as it is for an
unhedged attempt:

- admission: the original request holds the attempt's permit (``Gate.acquire``, which may
  wait or requeue); the hedge never waits: it asks (``Gate.try_acquire``) up to five times
  50 ms apart and is not sent when the model stays at a limit, so hedges count against
  RPM, TPM and in-flight like any request;
- the per-job cap (``JobStore.take_hedge``) and no hedging for jobs with a budget;
- billing: the winner is recorded by the CallGuard like any answer (ledger, idempotency);
  a loser that the gateway completed before the cancel took effect (both answered at about
  the same time) is billed too (``CallGuard.bill``), so the ledger bills what the gateway
  served. A request cancelled before its answer is not billed: the simulator does not
  count it; a real gateway that still bills a withdrawn request cannot tell us.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx2
import openai

from swarm.calls.admission.base import Permit
from swarm.calls.admission.gate import Gate
from swarm.calls.gateway import parse_answer
from swarm.calls.hedging.policy import HedgePolicy
from swarm.calls.hedging.sketch import LatencySketch
from swarm.calls.request import Answer
from swarm.calls.retry_policy import BadResponseError
from swarm.records import Usage
from swarm.settings import Settings

CAPPED_MAX = 10_000
"""Jobs remembered as capped per process (forgotten all at once, then asked again)."""
HEDGE_TRIES = 5
HEDGE_RETRY_S = 0.05
"""A refused hedge asks admission again after this long, at most HEDGE_TRIES times."""
SETTLE_TIMEOUT_S = 5.0
"""How long a cancelled request may take to end (the loop closes it at once)."""

Bill = Callable[[Usage], None]


@dataclass
class HedgedCall:
    """One hedge-enabled call: what to send and whom to tell."""

    job_id: str
    model: str
    """Catalog name of the model (the sketch's key)."""
    body: dict[str, Any]
    """The chat completion request body (swarm.calls.gateway.request_body)."""
    gate: Gate
    """Admission for this call's requests."""
    bill: Bill
    """Records a loser's usage in the ledger (CallGuard.bill)."""
    on_hedge_won: Callable[[], None]
    """Counts a hedge that won (JobStore.hedge_won)."""
    take_hedge: Callable[[], bool]
    """Counts a hedge against the job's cap; False when the cap is reached."""
    backend: str = ""
    """The model's backend: its requests go to that backend's base URL when it has one."""


@dataclass
class _Leg:
    """One request of a race; its fields are written by the event loop thread."""

    permit: Permit
    notify: threading.Event
    """The race's event, set whenever one of its requests ends."""
    started: float = field(default_factory=time.perf_counter)
    task: asyncio.Task[None] | None = None
    answer: Answer | None = None
    """Set as soon as the gateway answered."""
    error: BaseException | None = None
    """Why the request failed (not set when cancelled)."""
    billed: Usage | None = None
    """Usage of an answer that was not usable (BadResponseError), if the gateway billed it."""
    ended: threading.Event = field(default_factory=threading.Event)


class Hedger:
    """Per process: the event loop thread, the async openai client, the latency sketch."""

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
        self._base_url = base_url
        self._api_key = api_key
        self._endpoints = dict(endpoints or {})
        """Base URL and key of each backend with a base URL of its own."""
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: openai.AsyncOpenAI | None = None
        self._backend_clients: dict[str, openai.AsyncOpenAI] = {}
        """(loop thread) Clients of the backends in ``_endpoints``, made on first use."""
        self._capped: set[str] = set()
        """Jobs whose cap this process saw reached (no more tries)."""

    # -- the event loop thread: requests as tasks, cancelled by closing them --
    def _start_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="hedge-loop", daemon=True).start()
                made = self._make_client(self._base_url, self._api_key)
                self._client = asyncio.run_coroutine_threadsafe(made, loop).result()
                self._loop = loop
            return self._loop

    async def _make_client(self, base_url: str, api_key: str) -> openai.AsyncOpenAI:
        settings = self._settings
        timeout = httpx2.Timeout(settings.node_timeout_s, connect=settings.connect_timeout_s)
        size = settings.http_pool_size
        http = openai.DefaultAsyncHttpxClient(
            timeout=timeout,
            verify=settings.verify_tls,
            limits=httpx2.Limits(max_connections=size, max_keepalive_connections=size),
        )
        return openai.AsyncOpenAI(
            base_url=base_url,
            api_key=api_key,
            max_retries=0,
            timeout=timeout,
            http_client=http,
        )

    def _launch(self, leg: _Leg, call: HedgedCall) -> _Leg:
        self._start_loop().call_soon_threadsafe(self._spawn, leg, call.body, call.backend)
        return leg

    def _spawn(self, leg: _Leg, body: dict[str, Any], backend: str) -> None:
        """(loop thread) Start the request; a cancel scheduled later finds its task."""
        leg.task = asyncio.ensure_future(self._request(leg, body, backend))
        leg.task.add_done_callback(lambda task: _ended(leg, task))

    async def _client_for(self, backend: str) -> openai.AsyncOpenAI:
        """(loop thread) The client of ``backend``: its own base URL's, else the process's."""
        if backend not in self._endpoints:
            assert self._client is not None
            return self._client
        if backend not in self._backend_clients:
            self._backend_clients[backend] = await self._make_client(*self._endpoints[backend])
        return self._backend_clients[backend]

    async def _request(self, leg: _Leg, body: dict[str, Any], backend: str) -> None:
        client = await self._client_for(backend)
        response = await client.post("/chat/completions", body=body, cast_to=httpx2.Response)
        try:
            leg.answer = parse_answer(response.content, response.headers)
        except BadResponseError as exc:
            leg.billed = exc.usage
            raise

    def _cancel(self, leg: _Leg) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(_cancel_task, leg)

    # -- one attempt --
    def delay_s(self, model: str) -> float | None:
        """The hedge delay of ``model`` now (None: this call is not hedged)."""
        policy = self.policy
        observed = None
        if policy.quantile is not None:
            observed = self.sketch.quantile(model, policy.quantile, policy.min_samples)
        return policy.delay_s(observed)

    def attempt(self, call: HedgedCall, plain: Callable[[], Answer]) -> Answer:
        """One attempt of ``call``: hedged when a delay applies, else ``plain`` (the
        unhedged admitted attempt); the latency of an answer feeds the sketch."""
        delay = self.delay_s(call.model)
        if delay is None:
            started = time.perf_counter()
            answer = plain()
            self.sketch.observe(call.model, time.perf_counter() - started)
            return answer
        notify = threading.Event()
        primary = self._launch(_Leg(call.gate.acquire(), notify), call)
        hedge = None
        if not primary.ended.wait(delay):
            hedge = self._hedge_when_admitted(call, primary)
        return self._finish(call, primary, hedge)

    def _hedge_when_admitted(self, call: HedgedCall, primary: _Leg) -> _Leg | None:
        """The hedge, if admission lets it go within a few short tries (calls that pass
        the delay together are spaced by the model's rate limits) while the original is
        still running; None when the model stays at its limits or the cap is reached."""
        for _ in range(HEDGE_TRIES):
            permit = None if call.job_id in self._capped else call.gate.try_acquire()
            if permit is not None:
                return self._send_hedge(call, permit, primary.notify)
            if call.job_id in self._capped or primary.ended.wait(HEDGE_RETRY_S):
                return None
        return None

    def _send_hedge(self, call: HedgedCall, permit: Permit, notify: threading.Event) -> _Leg | None:
        """Count the hedge against the job's cap and send it (refund if capped)."""
        if not call.take_hedge():
            call.gate.settle(permit, requeue=False)  # refund: never sent
            if len(self._capped) >= CAPPED_MAX:
                self._capped.clear()
            self._capped.add(call.job_id)
            return None
        return self._launch(_Leg(permit, notify), call)

    def _finish(self, call: HedgedCall, primary: _Leg, hedge: _Leg | None) -> Answer:
        legs = [primary] if hedge is None else [primary, hedge]
        winner = _first_answer(legs, primary.notify)
        if winner is None:  # every request failed: the original's error decides
            if hedge is not None:
                self._settle_loser(call, hedge)
            error = primary.error or RuntimeError("hedged request ended without an answer")
            # The CallGuard bills a BadResponseError's usage as it passes (as unhedged).
            call.gate.settle(primary.permit, error=error)
            raise error
        for leg in legs:
            if leg is not winner:
                self._settle_loser(call, leg)
        assert winner.answer is not None
        call.gate.settle(winner.permit, answer=winner.answer, requeue=False)
        self.sketch.observe(call.model, time.perf_counter() - winner.started)
        if winner is hedge:
            call.on_hedge_won()
        return winner.answer

    def _settle_loser(self, call: HedgedCall, leg: _Leg) -> None:
        """Cancel a request that lost (one that failed has ended already): close it, give
        its permit back, and bill it if the gateway answered it anyway."""
        self._cancel(leg)
        if not leg.ended.wait(SETTLE_TIMEOUT_S):
            return  # its lease expires by itself
        if leg.answer is not None:
            call.bill(leg.answer.usage)
            call.gate.settle(leg.permit, answer=leg.answer, requeue=False)
            return
        if leg.billed is not None:
            call.bill(leg.billed)
        call.gate.settle(leg.permit, error=leg.error, requeue=False)


def _ended(leg: _Leg, task: asyncio.Task[None]) -> None:
    """(loop thread) Record how a request ended and wake the race."""
    if not task.cancelled() and task.exception() is not None:
        leg.error = task.exception()
    leg.ended.set()
    leg.notify.set()


def _cancel_task(leg: _Leg) -> None:
    if leg.task is not None:
        leg.task.cancel()


def _first_answer(legs: list[_Leg], notify: threading.Event) -> _Leg | None:
    """The first leg (the original first on a tie) that answered, waiting past failures;
    None when every request failed."""
    while True:
        notify.clear()
        for leg in legs:
            if leg.ended.is_set() and leg.answer is not None:
                return leg
        if all(leg.ended.is_set() for leg in legs):
            return None
        notify.wait()
