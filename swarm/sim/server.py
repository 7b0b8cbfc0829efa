"""The simulator's aiohttp application: routes and request flow (counters: swarm.sim.stats).

Flow of ``POST /v1/chat/completions``: count it, check the key, parse the body (400, never
billed: an empty ``{}`` is how a client can check that the path exists), the provider
profile's rules (its 400, swarm.sim.rules; whether the model thinks), plan the outcome
(markers, random faults, latency), spurious 429, per-model limits (429), then, holding a
concurrency slot: a 5xx at once with ``fast_errors``, else sleep the latency (in generation
mode: time to first token plus the answer's tokens at the token rate) and answer (a
thinking model's reasoning first, swarm.sim.reasoning; usage in the profile's format,
swarm.sim.usage), fail, hang or drop. Everything runs on one event loop; no locks, no
threads.
"""

from __future__ import annotations

import asyncio
import hmac
import math
import time
from dataclasses import replace
from typing import Any

from aiohttp import web

from swarm.sim.account import Account, mount_account
from swarm.sim.batch import mount_batch
from swarm.sim.config import SimConfig
from swarm.sim.content import (
    COMPLETION_MAX_TOKENS,
    ChatRequest,
    Completion,
    PrefixCache,
    RequestError,
    completion_body,
    make_completion,
    parse_chat_request,
    prompt_tokens,
)
from swarm.sim.errors import error_response
from swarm.sim.faults import Fault, FaultInjector, LatencyModel, Plan, parse_markers, plan_request
from swarm.sim.info import Info, mount_info
from swarm.sim.limits import SECOND_S, Admitted, ModelLimiter, PeakCounter, format_seconds
from swarm.sim.profiles import PROFILES
from swarm.sim.prompt_cache import Arrival, PromptCache
from swarm.sim.reasoning import reasoning_length, thinking_completion
from swarm.sim.rules import Refusal, refusal, thinking_on
from swarm.sim.stats import Stats
from swarm.sim.usage import usage_body

SEEN_MAX = 100_000
"""Distinct requests remembered for straggle markers (then forgotten all at once)."""
HANG_POLL_S = 0.05
"""How often a hung request checks whether its client went away."""
BAD_JSON_BODY = "<html><body><h1>502 Bad Gateway</h1>upstream sent garbage</body></html>"


class Simulator:
    """State of one simulated gateway and its request handlers."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.profile = PROFILES[config.provider]
        self.usage_format = config.usage_format or self.profile.usage_format
        self.stats = Stats()
        self.cache = PrefixCache(config.cache_min_tokens, config.cache_max_entries)
        self.prompt_cache = PromptCache(
            config.cache_min_tokens, config.prompt_cache_ttl_s, config.cache_max_entries
        )
        self._arrivals: dict[int, Arrival] = {}
        """Admitted requests' arrivals for the prompt cache (``config.prompt_cache``)."""
        self.injector = FaultInjector(config)
        self.latency = LatencyModel(config)
        self.account = Account(config.account)
        self.arrivals = PeakCounter(SECOND_S)
        self._limiters: dict[str, ModelLimiter] = {}
        self._slots: asyncio.Semaphore | None = None
        """The server's compute slots (``config.slots``), made on the serving loop."""
        self._seen: set[int] = set()
        """Requests seen (for ``[[sim:straggle_ms=N]]``)."""

    def _first_time(self, chat: ChatRequest) -> bool:
        """True the first time this exact request (model and messages) arrives."""
        key = hash((chat.model, chat.roles, chat.contents))
        if key in self._seen:
            return False
        if len(self._seen) >= SEEN_MAX:
            self._seen.clear()
        self._seen.add(key)
        return True

    def limiter(self, model: str) -> ModelLimiter:
        """The limiter of ``model`` (created on first use)."""
        limiter = self._limiters.get(model)
        if limiter is None:
            limiter = self._limiters[model] = ModelLimiter(model, self.config.limits_for(model))
        return limiter

    def authorized(self, request: web.Request) -> bool:
        """True if no key is configured or the request carries ``Bearer <api_key>``."""
        if self.config.api_key is None:
            return True
        given = request.headers.get("Authorization", "")
        return hmac.compare_digest(given.encode(), f"Bearer {self.config.api_key}".encode())

    def fail(
        self,
        model: str | None,
        status: int,
        message: str,
        code: str | None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> web.Response:
        """Count and build an error answer."""
        self.stats.count_status(model, status)
        return error_response(status, message, code, param=param, headers=headers)

    async def handle_chat(self, request: web.Request) -> web.StreamResponse:
        """POST /v1/chat/completions."""
        self.stats.total.requests += 1
        now = time.monotonic()
        if self.config.knee_rps is not None:
            self.arrivals.add(now)
        if not self.authorized(request):
            return self.fail(None, 401, "Incorrect API key provided", "invalid_api_key")
        try:
            body = await _read_json(request)
            chat = parse_chat_request(body)
        except RequestError as exc:
            return self.fail(None, 400, exc.message, exc.code, param=exc.param)
        self.stats.model(chat.model).requests += 1
        refused = refusal(self.profile, body)
        if refused is not None:
            return self._refuse(chat.model, refused)
        if (denied := self.account.refusal(chat.last_user_content)) is not None:
            self.stats.count_status(chat.model, denied[0])
            return web.json_response(denied[1], status=denied[0])
        chat = replace(chat, thinking=thinking_on(self.profile.rules_for(chat.model), body))
        asked = "none" if chat.max_tokens is None else str(chat.max_tokens)
        for stats in self.stats.of(chat.model):
            stats.max_tokens_seen[asked] += 1
        markers = parse_markers(chat.last_user_content)
        rate = float(self.arrivals.count(now)) if self.config.knee_rps is not None else 0.0
        inflight = self.stats.total.inflight
        plan = plan_request(markers, self.injector, self.latency, rate, inflight)
        if markers.straggle_ms is not None and self._first_time(chat):
            plan = plan.exact(markers.straggle_ms / 1000.0)
        return await self._admit_and_serve(request, chat, plan, now)

    async def _admit_and_serve(
        self, request: web.Request, chat: ChatRequest, plan: Plan, now: float
    ) -> web.StreamResponse:
        limiter = self.limiter(chat.model)
        if plan.fault is Fault.RATE_LIMIT:
            retry = self.config.spurious_retry_after_s
            message = f"Rate limit reached for {chat.model} (simulated). Please try again."
            return self._too_many(chat.model, limiter, retry, message, now)
        cost = prompt_tokens(chat) + (chat.max_tokens or COMPLETION_MAX_TOKENS)
        deadline = math.inf if plan.fault is Fault.HANG else now + plan.latency_s
        decision = limiter.admit(now, cost, deadline)
        if not isinstance(decision, Admitted):
            retry, message = decision.retry_after_s, decision.message
            return self._too_many(chat.model, limiter, retry, message, now)
        self.stats.enter(chat.model, now)
        if self.config.prompt_cache:
            self._arrivals[id(chat)] = self.prompt_cache.arrive(chat)
        slot = (chat.model, chat.roles, chat.contents)
        self.stats.slots.enter(slot)
        serving = self._serve_and_leave(request, chat, plan, limiter, (decision.ticket, slot))
        try:
            if not self.config.finish_abandoned:
                return await serving
            # computed to the end even when the client goes away (shielded from the cancel)
            return await asyncio.shield(asyncio.ensure_future(serving))
        except asyncio.CancelledError:  # the client went away (aiohttp cancels the handler)
            for stats in self.stats.of(chat.model):
                stats.cancelled += 1
            raise

    async def _serve_and_leave(
        self,
        request: web.Request,
        chat: ChatRequest,
        plan: Plan,
        limiter: ModelLimiter,
        held: tuple[int, tuple[str, Any, Any]],
    ) -> web.StreamResponse:
        """Serve an admitted request, then give back its admission ticket and slot."""
        ticket, slot = held
        try:
            return await self._serve_admitted(request, chat, plan, limiter)
        finally:
            self._arrivals.pop(id(chat), None)
            limiter.release(ticket)
            self.stats.leave(chat.model)
            self.stats.slots.leave(slot)

    def _too_many(
        self, model: str, limiter: ModelLimiter, retry_s: float, message: str, now: float
    ) -> web.Response:
        headers = limiter.headers(now)
        headers["Retry-After"] = format_seconds(retry_s)
        return self.fail(model, 429, message, "rate_limit_exceeded", headers=headers)

    async def _serve_admitted(
        self, request: web.Request, chat: ChatRequest, plan: Plan, limiter: ModelLimiter
    ) -> web.StreamResponse:
        if plan.fault is Fault.HANG:
            self.stats.faults["hang"] += 1
            await _wait_for_disconnect(request)
            return web.Response(status=499)
        if plan.fault is Fault.NONE:
            completion = self._completion(chat, plan)
            tokens = 0 if plan.empty_choices else completion.completion_tokens
            await self._compute(plan.answer_delay_s(tokens))
            return await self._answer(request, chat, plan, limiter, completion)
        if plan.fault is not Fault.STATUS or not self.config.errors_at_once:
            await self._compute(plan.latency_s)
        return self._fault_answer(request, chat, plan, limiter)

    def _completion(self, chat: ChatRequest, plan: Plan) -> Completion:
        """The answer to ``chat``: a thinking model's reasoning first (swarm.sim.reasoning)."""
        malformed, answer_tokens = self.config.tool_malformed_rate, plan.answer_tokens
        if not chat.thinking:
            return make_completion(chat, malformed, answer_tokens)
        shown = self.profile.rules_for(chat.model).reasoning_shown
        reasoning = reasoning_length(chat, self.config.reasoning_tokens)
        return thinking_completion(chat, reasoning, shown, malformed, answer_tokens)

    def _refuse(self, model: str, refused: Refusal) -> web.Response:
        """The profile's 400 for a request that breaks one of its rules."""
        self.stats.count_status(model, 400)
        return web.json_response(refused.body(self.profile), status=400)

    def _fault_answer(
        self, request: web.Request, chat: ChatRequest, plan: Plan, limiter: ModelLimiter
    ) -> web.Response:
        """A dropped connection, an HTML body or an error status, after the latency."""
        if plan.fault is Fault.DROP:
            self.stats.faults["drop"] += 1
            if request.transport is not None:
                request.transport.close()
            return web.Response(status=499)
        if plan.fault is Fault.BAD_JSON:
            self.stats.faults["bad_json"] += 1
            return web.Response(text=BAD_JSON_BODY, content_type="text/html")
        return self._status_fault(chat.model, plan.status or 500, limiter)

    async def _compute(self, latency_s: float) -> None:
        """The request's latency, in one of the server's slots when it has a number."""
        if self.config.slots is None:
            if latency_s > 0:
                await asyncio.sleep(latency_s)
            return
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.config.slots)
        async with self._slots:
            await asyncio.sleep(latency_s)

    def _status_fault(self, model: str, status: int, limiter: ModelLimiter) -> web.Response:
        if status == 429:
            return self._too_many(model, limiter, 1.0, "Rate limit (simulated)", time.monotonic())
        message = f"Simulated error {status} for {model}"
        code = "server_error" if status >= 500 else "simulated_error"
        return self.fail(model, status, message, code)

    async def _answer(
        self,
        request: web.Request,
        chat: ChatRequest,
        plan: Plan,
        limiter: ModelLimiter,
        completion: Completion,
    ) -> web.StreamResponse:
        prompt = prompt_tokens(chat)
        cached = self.cached_tokens(chat)
        completion_tokens = 0 if plan.empty_choices else completion.completion_tokens
        reasoning = 0 if plan.empty_choices else completion.reasoning_tokens
        usage = None
        if not plan.no_usage:
            usage = usage_body(self.usage_format, prompt, completion_tokens, cached, reasoning)
        body = completion_body(chat, completion, usage, plan.empty_choices)
        headers = limiter.headers(time.monotonic())
        headers["x-request-id"] = body["id"]
        response = web.json_response(body, headers=headers)
        for flag, present in (("empty_choices", plan.empty_choices), ("no_usage", plan.no_usage)):
            self.stats.faults[flag] += int(present)
        counted = (prompt, completion_tokens, cached, reasoning)
        cut = completion.finish_reason == "length" and not plan.empty_choices
        try:
            await response.prepare(request)
            await response.write_eof()
        except ConnectionError:
            if usage is not None and self.config.finish_abandoned:  # computed, so billed
                self._count_usage(chat.model, counted, cut)
                for stats in self.stats.of(chat.model):
                    stats.abandoned += 1
            return response
        if usage is not None:
            self._count_usage(chat.model, counted, cut)
        return response

    def _count_usage(self, model: str, counted: tuple[int, int, int, int], cut: bool) -> None:
        """An answer the client was sent (or, with ``finish_abandoned``, computed): the
        account's balance and the token counters."""
        self.account.answered()
        self.stats.count_usage(model, counted, cut)

    def cached_tokens(self, chat: ChatRequest) -> int:
        """The answered request's cached prompt tokens (the hook the usage is built from)."""
        arrival = self._arrivals.pop(id(chat), None)
        if arrival is not None:
            return self.prompt_cache.answered(arrival)
        return self.cache.lookup_and_store(chat)


SIM_KEY = web.AppKey("swarm_sim", Simulator)
"""Where ``build_app`` keeps the Simulator instance in the application."""


async def _read_json(request: web.Request) -> object:
    try:
        return await request.json()
    except ValueError as exc:
        raise RequestError(f"the request body is not valid JSON: {exc}") from exc


async def _wait_for_disconnect(request: web.Request) -> None:
    """Return once the client has gone (or at once if it already has)."""
    while request.transport is not None and not request.transport.is_closing():
        await asyncio.sleep(HANG_POLL_S)


def build_app(config: SimConfig | None = None) -> web.Application:
    """The simulator as an aiohttp application (its Simulator is at ``app[SIM_KEY]``)."""
    sim = Simulator(config or SimConfig())
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app[SIM_KEY] = sim
    app.router.add_post("/v1/chat/completions", sim.handle_chat)
    mount_info(app, Info(sim.config, sim.stats, sim.account, sim.authorized))
    mount_account(app, sim.account)
    mount_batch(app, sim.config.batch, sim.stats.batch, seed=sim.config.seed,
                authorized=sim.authorized)  # fmt: skip
    return app
