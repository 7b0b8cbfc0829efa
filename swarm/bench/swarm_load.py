"""The same load through swarm: one job of N inputs on a Redis broker and worker processes."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

from swarm.client import SwarmClient
from swarm.records import InputItem
from swarm.settings import Settings

POLL_S = 0.1


@dataclass(frozen=True)
class SwarmRun:
    """Outcome of one swarm job, measured until its last node ended."""

    ok: int
    total: int
    latencies_ms: list[float]
    """Node latencies of the ok nodes (admission waits, retries and backoff included)."""
    elapsed_s: float
    """Submit to the last node's end (the aggregation is not counted)."""


def inputs(count: int) -> list[InputItem]:
    """Small review inputs like the seed's (`审查 PR #i 的 diff`)."""
    return [
        InputItem(ref=f"pr-{i}.diff", text=f"diff --git a/f{i}.py\n+x = {i}\n")
        for i in range(count)
    ]


def run_job(settings: Settings, count: int, timeout_s: float = 900.0) -> SwarmRun:
    """Submit ``count`` inputs, wait until every node ended, then cancel the aggregation."""
    client = SwarmClient.from_settings(settings)
    started = time.perf_counter()
    handle = client.submit(inputs(count), "Review this diff")
    deadline = time.monotonic() + timeout_s
    while True:
        progress = handle.progress()
        ended = progress.nodes_done + progress.failed + progress.cancelled >= progress.nodes_total
        if ended or time.monotonic() > deadline:
            break
        time.sleep(POLL_S)
    elapsed = time.perf_counter() - started
    handle.cancel()  # the benchmark measures the sub-agents; skip the aggregation call
    envelopes = client.store.envelopes(handle.id)
    close_client(client)
    latencies = [float(env.latency_ms) for env in envelopes if env.ok]
    return SwarmRun(len(latencies), count, latencies, elapsed)


def close_client(client: SwarmClient) -> None:
    """Stop the client's result listener, so stopping Redis afterwards is quiet."""
    with contextlib.suppress(Exception):
        client.app.backend.result_consumer.stop()
