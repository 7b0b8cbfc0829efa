"""Probing a gateway: what it serves and how it behaves, before writing its catalog.

Every request is small (a few tokens of answer): the latency at 1, 2, 4 and 8 in flight
(do more at once finish sooner, or queue?), whether JSON mode and tool calls work, and the
context window from the error a request with an impossible ``max_tokens`` draws (servers
refuse it before computing anything, and state the window).
"""

from __future__ import annotations

import ipaddress
import statistics
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import openai
from openai.types.chat import ChatCompletion

from swarm.backends import BackendKind
from swarm.calls.context_window import parse_overflow

LEVELS = (1, 2, 4, 8)
ROUNDS = 3
"""Rounds of requests at each level (the first request of a level may warm a cache; the
fastest round gives the level's throughput)."""
RISE = 1.25
"""More in flight is worth it while it raises throughput by at least this factor."""
HUGE_MAX_TOKENS = 10_000_000
LONG_PROMPT_TOKENS = 40_000
"""A prompt longer than a local server's usual window (llama.cpp: 4096 to 32768)."""
PING = [{"role": "user", "content": "Reply with the single word: ok"}]
TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "The current time",
        "parameters": {"type": "object", "properties": {}, "required": []},
    },
}


@dataclass(frozen=True)
class Level:
    """Requests at one level of in-flight."""

    inflight: int
    latency_s: float
    """Median latency of one request."""
    throughput: float
    """Requests answered per second."""


@dataclass(frozen=True)
class ProbeResult:
    """What ``probe`` found."""

    base_url: str
    models: tuple[str, ...]
    model: str
    levels: tuple[Level, ...]
    inflight: int
    """Suggested in-flight limit: where throughput stopped rising."""
    json_mode: bool
    tool_calls: bool
    context_window: int | None
    """From the overflow error, None when the server stated none."""
    kind: BackendKind = "hosted"
    """What the server looks like (``looks_like``): the catalog's ``[backends] kind``."""
    kind_reason: str = ""
    """Why, in words."""


def _post(client: openai.OpenAI, body: dict[str, Any]) -> ChatCompletion:
    return client.post("/chat/completions", body=body, cast_to=ChatCompletion)


def _ping(client: openai.OpenAI, model: str) -> float:
    started = time.perf_counter()
    _post(client, {"model": model, "messages": PING, "max_tokens": 8, "temperature": 0})
    return time.perf_counter() - started


def measure_level(client: openai.OpenAI, model: str, inflight: int) -> Level:
    """``ROUNDS`` rounds of ``inflight`` requests sent together."""
    rounds: list[Round] = []
    with ThreadPoolExecutor(inflight) as pool:
        for _ in range(ROUNDS):
            started = time.perf_counter()
            latencies = list(pool.map(lambda _: _ping(client, model), range(inflight)))
            rounds.append(Round(tuple(latencies), time.perf_counter() - started))
    return level_of(inflight, rounds)


@dataclass(frozen=True)
class Round:
    """One round of requests sent together: each one's latency, and the round's wall time
    (until its slowest answer)."""

    latencies: tuple[float, ...]
    wall_s: float


def level_of(inflight: int, rounds: Sequence[Round]) -> Level:
    """A level's median latency, and its throughput from its fastest round: a stall of the
    client (a busy machine, a slow thread start) only slows a round down, so the fastest
    round is the closest to what the server can do; a server that queues requests makes
    every round slow."""
    latencies = [latency for one in rounds for latency in one.latencies]
    best = max(len(one.latencies) / one.wall_s for one in rounds)
    return Level(inflight, statistics.median(latencies), best)


def suggest_inflight(levels: tuple[Level, ...]) -> int:
    """The fewest in flight whose throughput is within ``RISE`` of the best measured: where
    more at once stopped paying. Judged on every level, not on the first doubling that did
    not rise: one stalled level (a slow answer of a hosted gateway, a busy client machine)
    reads as a dip that a later level recovers from, not as the server's limit."""
    best = max(level.throughput for level in levels)
    return next(level.inflight for level in levels if level.throughput * RISE >= best)


def json_mode_works(client: openai.OpenAI, model: str) -> bool:
    """A JSON-mode request is accepted (the answer's quality is the model's business)."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": 'Answer with the JSON object {"ok": true}'}],
        "max_tokens": 16,
        "response_format": {"type": "json_object"},
    }
    try:
        _post(client, body)
    except openai.BadRequestError:
        return False
    return True


def tool_calls_work(client: openai.OpenAI, model: str) -> bool:
    """A request that requires a tool call comes back with one."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "What time is it? Use the tool."}],
        "max_tokens": 64,
        "tools": [TOOL],
        "tool_choice": {"type": "function", "function": {"name": "get_time"}},
    }
    try:
        completion = _post(client, body)
    except openai.BadRequestError:
        return False
    message = completion.choices[0].message if completion.choices else None
    return bool(message is not None and message.tool_calls)


def _stated_window(client: openai.OpenAI, body: dict[str, Any]) -> int | None:
    try:
        _post(client, body)
    except openai.BadRequestError as exc:
        overflow = parse_overflow(str(exc))
        return overflow.window if overflow else None
    return None


def context_window(client: openai.OpenAI, model: str, long_prompt: bool) -> int | None:
    """The window the server states when asked for an impossible completion (refused
    before any computing: nothing billed); servers that clamp max_tokens instead
    (llama-cpp-python) are sent, with ``long_prompt``, a prompt of LONG_PROMPT_TOKENS."""
    body = {"model": model, "messages": PING, "max_tokens": HUGE_MAX_TOKENS}
    window = _stated_window(client, body)
    if window is not None or not long_prompt:
        return window
    words = [{"role": "user", "content": "ok " * LONG_PROMPT_TOKENS}]
    return _stated_window(client, {"model": model, "messages": words, "max_tokens": 1})


def is_local(base_url: str) -> bool:
    """True for a server on this machine or a private network (free to send a long
    prompt to, and priced at zero in the snippet)."""
    host = urlsplit(base_url).hostname or ""
    if host in ("localhost", ""):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host.endswith((".local", ".internal", ".lan"))
    return address.is_loopback or address.is_private


def looks_like(levels: tuple[Level, ...], inflight: int) -> tuple[BackendKind, str]:
    """``local`` when throughput stopped rising before the highest level (the server
    computes a few requests at a time and queues the rest), else ``hosted``."""
    top = levels[-1]
    if inflight < top.inflight:
        return "local", (
            f"throughput stopped rising at {inflight} in flight ({top.inflight} in flight: "
            f"{top.throughput:.2f} requests/s): a server with few slots, requests queue"
        )
    return "hosted", (
        f"throughput rose with every doubling up to {top.inflight} in flight "
        f"({top.throughput:.2f} requests/s): answers do not wait for each other"
    )


def list_models(client: openai.OpenAI) -> tuple[str, ...]:
    """The ids of ``GET /models``; none when the gateway does not serve it (a proxy that
    allows only the completion path)."""
    try:
        return tuple(model.id for model in client.models.list())
    except openai.NotFoundError:
        return ()


def probe(client: openai.OpenAI, base_url: str, model: str | None = None) -> ProbeResult:
    """Everything above, on ``model`` (default: the first the server lists)."""
    models = list_models(client)
    name = model or (models[0] if models else "default")
    levels = tuple(measure_level(client, name, n) for n in LEVELS)
    inflight = suggest_inflight(levels)
    kind, why = looks_like(levels, inflight)
    return ProbeResult(
        base_url=base_url,
        models=models,
        model=name,
        levels=levels,
        inflight=inflight,
        kind=kind,
        kind_reason=why,
        json_mode=json_mode_works(client, name),
        tool_calls=tool_calls_work(client, name),
        context_window=context_window(client, name, long_prompt=is_local(base_url)),
    )
