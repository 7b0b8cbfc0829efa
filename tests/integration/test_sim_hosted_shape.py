"""The simulator's hosted shape over real HTTP: answers that take a time to first token plus
their tokens at a steady rate, cut at max_tokens, errors that come back at once, and a
gateway that serves only the completion path."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import openai
import procs
import pytest

from swarm.sim import RunningSim, SimConfig, start_in_thread

MODEL = "kimi-k2.5"
WAIT_S = 60.0
"""A generous deadline for an answer the simulator gives at once (never a timing bound)."""
FOREVER_MS = 3_600_000.0
"""A time to first token no test waits for: an answer still in flight when an error of the
same run has come back shows the error skipped the answer latency."""


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


@pytest.fixture
def fast_generation() -> Iterator[RunningSim]:
    with start_in_thread(SimConfig(ttft_ms=0, tokens_per_s=1_000_000)) as sim:
        yield sim


def _client(sim: RunningSim) -> openai.OpenAI:
    return openai.OpenAI(base_url=sim.base_url, api_key="k", max_retries=0, timeout=WAIT_S)


def test_the_answer_length_comes_from_the_directive_and_is_cut_at_max_tokens(
    fast_generation: RunningSim,
) -> None:
    with _client(fast_generation) as client:
        whole = client.chat.completions.create(
            model=MODEL, messages=_user("review [[sim:answer_tokens=1500]]"), max_tokens=2048
        )
        cut = client.chat.completions.create(
            model=MODEL, messages=_user("review [[sim:answer_tokens=1500]]"), max_tokens=247
        )
        natural = client.chat.completions.create(model=MODEL, messages=_user("review"))
    assert (whole.choices[0].finish_reason, whole.usage.completion_tokens) == ("stop", 1500)
    assert (cut.choices[0].finish_reason, cut.usage.completion_tokens) == ("length", 247)
    assert natural.choices[0].finish_reason == "stop"
    assert natural.usage.completion_tokens < 1500
    stats = fast_generation.stats()
    assert stats["truncated"] == 1 and stats["models"][MODEL]["truncated"] == 1
    assert stats["max_tokens_seen"] == {"2048": 1, "247": 1, "none": 1}
    assert stats["models"][MODEL]["max_tokens_seen"] == {"2048": 1, "247": 1, "none": 1}
    assert stats["completion_tokens"] == 1500 + 247 + natural.usage.completion_tokens


async def _errors_while_an_answer_is_generated(sim: RunningSim) -> tuple[list[int], int, bool]:
    """Start an answer, wait until the simulator computes it, then send a 503 and a 429:
    their statuses, the requests still in flight after them, whether the answer is done."""
    body: dict[str, Any] = {"model": MODEL, "messages": _user("a long review")}
    timeout = aiohttp.ClientTimeout(total=WAIT_S)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        answer = asyncio.ensure_future(session.post(f"{sim.base_url}/chat/completions", json=body))
        await _until(lambda: sim.stats()["inflight"] == 1)
        statuses = []
        for marker in ("[[sim:status=503]]", "[[sim:status=429]]"):
            failing = {"model": MODEL, "messages": _user(f"x {marker}")}
            async with session.post(f"{sim.base_url}/chat/completions", json=failing) as resp:
                statuses.append(resp.status)
        still = sim.stats()["inflight"]
        done = answer.done()
        answer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await answer
    return statuses, still, done


async def _until(condition: Any) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while not condition():
        assert loop.time() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


def test_errors_come_back_while_an_answer_of_the_same_run_is_still_generated() -> None:
    with start_in_thread(SimConfig(ttft_ms=FOREVER_MS, tokens_per_s=80)) as sim:
        statuses, still_in_flight, answered = asyncio.run(_errors_while_an_answer_is_generated(sim))
        stats = sim.stats()
    assert statuses == [503, 429]
    assert still_in_flight == 1 and not answered
    assert (stats["errors"], stats["rate_limited"], stats["completed"]) == (1, 1, 0)


def test_random_server_errors_skip_the_answer_latency_in_generation_mode() -> None:
    config = SimConfig(ttft_ms=FOREVER_MS, tokens_per_s=80, error_rate=1.0)
    with start_in_thread(config) as sim, _client(sim) as client:
        for _ in range(3):
            with pytest.raises(openai.InternalServerError):
                client.chat.completions.create(model=MODEL, messages=_user("review"))
        assert sim.stats()["errors"] == 3


def test_without_models_the_list_is_404_and_an_empty_body_is_a_400_never_billed() -> None:
    with start_in_thread(SimConfig(no_models=True)) as sim, _client(sim) as client:
        with pytest.raises(openai.NotFoundError):
            client.models.list()
        with pytest.raises(openai.NotFoundError):
            client.models.retrieve(MODEL)
        with pytest.raises(openai.BadRequestError):
            client.post("/chat/completions", body={}, cast_to=object)
        answer = client.chat.completions.create(model=MODEL, messages=_user("review"))
        stats = sim.stats()
    assert answer.choices[0].finish_reason == "stop"
    assert (stats["requests"], stats["completed"], stats["client_errors"]) == (2, 1, 1)
    assert stats["completion_tokens"] == answer.usage.completion_tokens
    assert list(stats["models"]) == [MODEL]


def test_the_command_serves_the_generation_flags(tmp_path: Path) -> None:
    args = ["--ttft-ms", "0", "--tokens-per-s", "1000000", "--no-models"]
    proc, base_url = procs.start_sim(args, tmp_path)
    with proc, openai.OpenAI(base_url=base_url, api_key="k", max_retries=0, timeout=WAIT_S) as c:
        with pytest.raises(openai.NotFoundError):
            c.models.list()
        cut = c.chat.completions.create(
            model=MODEL, messages=_user("x [[sim:answer_tokens=900]]"), max_tokens=300
        )
    assert (cut.choices[0].finish_reason, cut.usage.completion_tokens) == ("length", 300)
