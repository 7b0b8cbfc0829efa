"""A call that admission sends back to the queue keeps its attempts, its latency and its
attempt bound across the requeues; the job's 429s are counted whatever admission does."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx2
import pytest
from doubles import MockGateway, completion, new_job

from swarm.calls.admission import AdmissionPolicy, MemoryAdmission, Unlimited
from swarm.calls.admission.base import Ask
from swarm.calls.request import CallProgress, pack_progress, unpack_progress
from swarm.calls.runtime import Runtime
from swarm.catalog import load_catalog
from swarm.errors import RetryLater
from swarm.jobs.aggregation import run_aggregation
from swarm.jobs.batch import progress_of
from swarm.jobs.subagent import NodeCall, run_node
from swarm.records import ErrorKind
from swarm.settings import Settings
from swarm.store import MemoryJobStore


def always_429(body: dict[str, Any], n: int) -> httpx2.Response:
    return httpx2.Response(429, headers={"Retry-After": "3"}, json={"error": {"message": "slow"}})


def runtime(handler: Callable[[dict[str, Any], int], httpx2.Response], **settings: Any) -> Any:
    gw = MockGateway(handler)
    values = {"max_attempts": 2, "backoff_max_s": 0.01, "admission_max_wait_s": 0.5}
    config = Settings(**{**values, **settings})
    admission = MemoryAdmission(AdmissionPolicy(max_wait_s=0.5))
    rt = Runtime(config, load_catalog(), MemoryJobStore(), gw.client(), admission=admission)
    return rt, gw


def test_the_attempt_bound_holds_across_requeues() -> None:
    rt, gw = runtime(always_429)
    new_job(rt, n=1)
    with pytest.raises(RetryLater) as first:
        run_node(rt, "j1", "n0", NodeCall(may_requeue=True))
    assert first.value.attempted and first.value.attempts == 1 and first.value.slot == "n0"
    carried = unpack_progress(pack_progress(progress_of(first.value)))  # as a task message
    earlier = CallProgress(carried["n0"].attempts, time.time() - 5.0)
    envelope = run_node(rt, "j1", "n0", NodeCall(may_requeue=True, progress={"n0": earlier}))
    assert envelope.error_kind is ErrorKind.RATE_LIMITED
    assert envelope.attempts == 2 == len(gw.requests)  # SWARM_MAX_ATTEMPTS, not 1 per run
    assert envelope.latency_ms >= 5000  # from the first run's start, queue time included


def test_an_admission_wait_before_the_request_is_not_an_attempt() -> None:
    rt, gw = runtime(lambda body, n: completion("ok"))
    spec = new_job(rt, n=1)
    model = rt.catalog.model(spec.model)
    rt.admission.finish(  # another call's 429 paused the model for 3 s
        model, rt.admission.acquire(model, Ask("other", 1)).permit, _limited(3.0)
    )
    with pytest.raises(RetryLater) as refused:
        run_node(rt, "j1", "n0", NodeCall(may_requeue=True))
    assert not refused.value.attempted and refused.value.attempts == 0 and gw.requests == []


def _limited(retry_after_s: float) -> Any:
    from swarm.calls.admission import Outcome

    return Outcome(used_tokens=0, rate_limited=True, retry_after_s=retry_after_s, exhausted=True)


@pytest.mark.parametrize("admission", ["memory", "off"])
def test_the_report_counts_every_429(admission: str) -> None:
    def handler(body: dict[str, Any], n: int) -> httpx2.Response:
        if n % 2 == 1:  # every other request: 429, then the retry answers
            return httpx2.Response(429, headers={"Retry-After": "0"}, json={"error": {}})
        return completion("ok")

    rt, gw = runtime(handler, max_attempts=3)
    if admission == "off":
        rt = Runtime(rt.settings, rt.catalog, rt.store, rt.client, admission=Unlimited())
    spec = new_job(rt, n=3)
    for node in spec.node_ids:
        assert run_node(rt, "j1", node).ok
    report = run_aggregation(rt, "j1")
    limited = sum(1 for i in range(1, len(gw.requests) + 1) if i % 2 == 1)
    assert report["models"]["kimi-k2.5"]["rate_limited"] == limited == 4


def test_every_node_keeps_its_attempts_whatever_the_others_got() -> None:
    """No retry budget shared by a job's calls: the first fast errors of a wave never cost
    a later node its retries (a gateway answering a third of its requests saves them)."""

    def down(body: dict[str, Any], n: int) -> httpx2.Response:
        return httpx2.Response(503, json={"error": {"message": "down"}})

    rt, gw = runtime(down, max_attempts=5)
    spec = new_job(rt, n=12)
    envelopes = [run_node(rt, "j1", node) for node in spec.node_ids]
    assert all(env.error_kind is ErrorKind.SERVER_ERROR for env in envelopes)
    assert [env.attempts for env in envelopes] == [5] * 12
    assert len(gw.requests) == 12 * 5


def test_each_retry_is_counted_for_the_job_and_model() -> None:
    def flaky(body: dict[str, Any], n: int) -> httpx2.Response:
        if n <= 2:
            return httpx2.Response(503, json={"error": {"message": "busy"}})
        return completion("ok", prompt=10, completion_tokens=2)

    rt, _ = runtime(flaky, max_attempts=5)
    spec = new_job(rt, n=1)
    envelope = run_node(rt, "j1", spec.node_ids[0])
    assert envelope.status == "ok" and envelope.attempts == 3
    assert rt.store.retries("j1") == {"kimi-k2.5": 2}  # two attempts after a failed one
