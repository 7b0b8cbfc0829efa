"""The seed 000 client: aiohttp + asyncio.Semaphore, no limiter, a few retries on 429.

Written the way the seed's "production" code and its 429 fix do it: the semaphore bounds
requests in flight; a 429 sleeps ``min(Retry-After, 30)`` while still holding the
semaphore, then ``backoff.expo``-style full-jitter waits (1, 2, 4, 8 s) outside it, at most
5 tries for 429 and 5xx. Latency of a task: from first holding the semaphore to its answer
(retries and their waits included), as the seed measures inside the semaphore.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass

import aiohttp

MAX_TRIES = 5
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
SYSTEM = "你是 Agent Swarm 子节点，独立完成分配到的代码审查片段。"


@dataclass(frozen=True)
class TaskResult:
    """One task of the baseline client."""

    ok: bool
    latency_ms: float
    """First try to answer (retries and waits included); 0 for failures."""


@dataclass(frozen=True)
class RunResult:
    """All tasks of one run."""

    results: list[TaskResult]
    elapsed_s: float


async def _try_once(
    session: aiohttp.ClientSession,
    url: str,
    payload: dict[str, object],
    sem: asyncio.Semaphore,
    started: list[float],
) -> int:
    async with sem:
        if not started:  # the task's latency starts once it first holds the semaphore
            started.append(time.perf_counter())
        return await _post(session, url, payload)


async def _post(session: aiohttp.ClientSession, url: str, payload: dict[str, object]) -> int:
    async with session.post(url, json=payload) as resp:
        if resp.status == 429:
            retry_after = float(resp.headers.get("Retry-After", "2"))
            await asyncio.sleep(min(retry_after, 30))
            return 429
        if resp.status >= 400:
            return resp.status
        data = await resp.json()
        _ = data["choices"][0]["message"]["content"]
        return 200


async def _task(
    session: aiohttp.ClientSession, url: str, model: str, i: int, sem: asyncio.Semaphore
) -> TaskResult:
    payload: dict[str, object] = {
        "model": model,
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"审查 PR #{i} 的 diff"},
        ],
        "temperature": 0.2,
        "max_tokens": 2048,
        "stream": False,
    }
    started: list[float] = []
    for tries in range(1, MAX_TRIES + 1):
        try:
            status = await _try_once(session, url, payload, sem, started)
        except (aiohttp.ClientError, TimeoutError, ValueError, KeyError):
            return TaskResult(False, 0.0)
        if status == 200:
            return TaskResult(True, (time.perf_counter() - started[0]) * 1000)
        if status not in RETRY_STATUSES or tries == MAX_TRIES:
            return TaskResult(False, 0.0)
        await asyncio.sleep(random.uniform(0, 2.0 ** (tries - 1)))
    return TaskResult(False, 0.0)


async def _run(
    base_url: str, model: str, tasks: int, concurrency: int, aggregate: bool = False
) -> RunResult:
    sem = asyncio.Semaphore(concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=concurrency)
    timeout = aiohttp.ClientTimeout(total=120)
    headers = {"Authorization": "Bearer bench-not-a-key"}
    async with aiohttp.ClientSession(
        connector=connector, timeout=timeout, headers=headers
    ) as session:
        url = f"{base_url}/chat/completions"
        started = time.perf_counter()
        results = await asyncio.gather(*(_task(session, url, model, i, sem) for i in range(tasks)))
        if aggregate:  # the seed's last step: one call over the results, retried like the others
            ok = sum(1 for r in results if r.ok)
            results.append(await _task(session, url, model, -ok, sem))
        return RunResult(list(results), time.perf_counter() - started)


def run_baseline(
    base_url: str, model: str, tasks: int, concurrency: int, aggregate: bool = False
) -> RunResult:
    """``tasks`` calls through a semaphore of ``concurrency``; with ``aggregate``, then one
    aggregation call (the last result)."""
    return asyncio.run(_run(base_url, model, tasks, concurrency, aggregate))
