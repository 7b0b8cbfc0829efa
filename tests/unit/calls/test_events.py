from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import httpx2
from doubles import MockGateway, completion, new_job

from swarm.calls.listeners import CallListener, Listeners
from swarm.calls.runtime import Runtime
from swarm.jobs.subagent import run_node
from swarm.records import ErrorKind, JobSpec, Usage


class Recorder(CallListener):
    def __init__(self) -> None:
        self.attempts: list[tuple[str, ErrorKind | None, Usage]] = []
        self.nodes: list[tuple[str, bool, int]] = []

    def attempt_finished(
        self, model: str, error_kind: ErrorKind | None, usage: Usage, latency_s: float
    ) -> None:
        assert latency_s >= 0
        self.attempts.append((model, error_kind, usage))

    def node_finished(self, model: str, ok: bool, attempts: int, latency_s: float) -> None:
        self.nodes.append((model, ok, attempts))


def test_listeners_see_every_attempt_and_node(
    make_runtime: Callable[..., tuple[Runtime, MockGateway]],
) -> None:
    def handler(body: dict[str, Any], n: int) -> httpx2.Response:
        if n == 1:
            return httpx2.Response(429, headers={"Retry-After": "0"}, json={"error": {}})
        return completion("ok", prompt=7, completion_tokens=2)

    rt, _ = make_runtime(handler)
    a, b = Recorder(), Recorder()
    rt = dataclasses.replace(rt, listener=Listeners([a, b]))
    rt.store.create_job(
        JobSpec(
            job_id="j",
            instruction="i",
            aggregate_instruction="a",
            model="gpt-4.1",
            aggregate_model="kimi-k2.5",
            node_ids=("n0",),
            input_refs=("r",),
            submitted_at=time.time(),
        ),
        ["text"],
    )
    run_node(rt, "j", "n0")
    for rec in (a, b):
        assert rec.attempts == [
            ("gpt-4.1", ErrorKind.RATE_LIMITED, Usage()),
            ("gpt-4.1", None, Usage(prompt_tokens=7, completion_tokens=2)),
        ]
        assert rec.nodes == [("gpt-4.1", True, 2)]


class Broken(CallListener):
    def attempt_finished(
        self, model: str, error_kind: ErrorKind | None, usage: Usage, latency_s: float
    ) -> None:
        raise ValueError("metrics bug")

    def node_finished(self, model: str, ok: bool, attempts: int, latency_s: float) -> None:
        raise ValueError("metrics bug")


def test_a_raising_listener_fails_neither_the_call_nor_the_node(
    make_runtime: Callable[..., tuple[Runtime, MockGateway]],
) -> None:
    rt, gw = make_runtime(lambda body, n: completion("ok", prompt=7, completion_tokens=2))
    rt = dataclasses.replace(rt, listener=Broken())
    new_job(rt, 1)
    envelope = run_node(rt, "j1", "n0")
    assert envelope.ok and envelope.attempts == 1 and len(gw.requests) == 1
    assert rt.store.envelope("j1", "n0") == envelope
