"""Admission on the call path: run_node and the aggregation ask the runtime's controller."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import httpx2
import pytest
from doubles import MockGateway, completion, new_job

from swarm.calls.admission import AdmissionPolicy, MemoryAdmission
from swarm.calls.runtime import Runtime
from swarm.errors import RetryLater
from swarm.jobs.aggregation import run_aggregation
from swarm.jobs.subagent import NodeCall, run_node

MakeRuntime = Callable[..., tuple[Runtime, MockGateway]]


def limited_once(body: dict[str, Any], n: int) -> httpx2.Response:
    if n == 1:
        return httpx2.Response(429, headers={"Retry-After": "0.01"}, json={"error": {}})
    return completion("fine", prompt=50, completion_tokens=10)


def test_429s_are_fed_back_and_reported_per_model(make_runtime: MakeRuntime) -> None:
    rt, _ = make_runtime(limited_once)
    ctl = MemoryAdmission(AdmissionPolicy())
    rt = dataclasses.replace(rt, admission=ctl)
    new_job(rt, 1)
    envelope = run_node(rt, "j1", "n0")
    assert envelope.ok and envelope.attempts == 2
    model = rt.catalog.model("kimi-k2.5")
    counters = ctl.counters(model)
    assert counters.admitted == 2 and counters.rate_limited == 1 and counters.inflight == 0
    assert counters.factor == 1.0 and counters.pauses == 0  # an isolated 429
    report = run_aggregation(rt, "j1")
    assert report["models"]["kimi-k2.5"]["rate_limited"] == 1
    assert report["models"]["kimi-k2.5"]["calls"] == 2


def test_a_long_retry_after_sends_only_its_node_back_to_the_queue(
    make_runtime: MakeRuntime,
) -> None:
    def always_limited(body: dict[str, Any], n: int) -> httpx2.Response:
        return httpx2.Response(429, headers={"Retry-After": "30"}, json={"error": {}})

    rt, gw = make_runtime(always_limited)
    rt = dataclasses.replace(rt, admission=MemoryAdmission(AdmissionPolicy()))
    new_job(rt, 2)
    for node in ("n0", "n1"):  # an isolated 429 pauses nobody else: n1 calls too
        with pytest.raises(RetryLater) as info:
            run_node(rt, "j1", node, NodeCall(may_requeue=True))
        assert info.value.attempted and 25 < info.value.delay_s <= 30
    assert len(gw.requests) == 2


def test_a_long_pause_sends_the_node_back_to_the_queue(make_runtime: MakeRuntime) -> None:
    def always_limited(body: dict[str, Any], n: int) -> httpx2.Response:
        headers = {"Retry-After": "30", "x-ratelimit-remaining-requests": "0"}
        return httpx2.Response(429, headers=headers, json={"error": {}})

    rt, gw = make_runtime(always_limited)
    rt = dataclasses.replace(rt, admission=MemoryAdmission(AdmissionPolicy()))
    new_job(rt, 2)
    with pytest.raises(RetryLater) as info:  # first attempt 429 -> the model pauses 30 s
        run_node(rt, "j1", "n0", NodeCall(may_requeue=True))
    assert info.value.reason == "paused" and 25 < info.value.delay_s <= 30
    with pytest.raises(RetryLater):  # another node of the model does not call at all
        run_node(rt, "j1", "n1", NodeCall(may_requeue=True))
    assert len(gw.requests) == 1
    assert rt.store.envelope("j1", "n1") is None  # nothing final was stored
