"""A worker's own key checked at start, and its log: one line per node (a batched task's
too), failures and failed reports at WARNING with their error."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import httpx2
import openai
import pytest

from swarm.calls.runtime import Runtime
from swarm.catalog import load_catalog
from swarm.records import ErrorKind, NodeEnvelope, Usage
from swarm.settings import Settings
from swarm.store import MemoryJobStore
from workers import outcomes
from workers.keys import refused_keys, warn_refused_keys

URL = "https://gw.example/v1"


def gateway(answer: Callable[[httpx2.Request], httpx2.Response], key: str) -> openai.OpenAI:
    http = httpx2.Client(transport=httpx2.MockTransport(answer))
    return openai.OpenAI(base_url=URL, api_key=key, max_retries=0, http_client=http)


def runtime(client: openai.OpenAI) -> Runtime:
    return Runtime(Settings(base_url=URL), load_catalog(), MemoryJobStore(), client)


def by_key(request: httpx2.Request) -> httpx2.Response:
    """The model list for ``Bearer right``, a 401 for any other key."""
    if request.headers.get("authorization") == "Bearer right":
        return httpx2.Response(200, json={"object": "list", "data": []})
    return httpx2.Response(401, json={"error": {"message": "Incorrect API key provided"}})


def test_a_refused_key_is_a_warning_at_start(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="workers.keys"):
        warn_refused_keys(runtime(gateway(by_key, "wrong")))
    [record] = caplog.records
    assert record.levelname == "WARNING"
    line = record.getMessage()
    assert f"the gateway {URL} rejected the API key" in line and "SWARM_API_KEY" in line


def test_an_accepted_key_says_nothing() -> None:
    assert refused_keys(runtime(gateway(by_key, "right"))) == []


def test_an_unreachable_gateway_is_said_too() -> None:
    def refuse(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("connection refused")

    [line] = refused_keys(runtime(gateway(refuse, "k")))
    assert f"cannot reach the gateway {URL}" in line


def test_no_key_for_a_gateway_that_needs_one_is_not_said_twice() -> None:
    """missing_keys already named the variable; the start-up call would only repeat it."""
    assert refused_keys(runtime(gateway(by_key, "no-key"))) == []


def envelope(node_id: str, kind: ErrorKind | None = None, error: str | None = None) -> NodeEnvelope:
    return NodeEnvelope(
        node_id=node_id, input_ref=node_id, model="kimi-k2.5",
        status="error" if kind else "ok", content="" if kind else "answer", usage=Usage(),
        latency_ms=1180, attempts=1, error_kind=kind, error=error,
    )  # fmt: skip


def test_each_node_of_a_batched_task_is_one_line(caplog: pytest.LogCaptureFixture) -> None:
    nodes = [
        envelope("n0000"),
        envelope("n0001", ErrorKind.AUTH, "AuthenticationError: 401 (calling http://gw/v1)"),
        envelope("n0002", ErrorKind.CANCELLED, "job cancelled"),
    ]
    with caplog.at_level(logging.INFO, logger="workers.outcomes"):
        outcomes.log_nodes("j1", nodes)
    # one record per level (one write for a batched task), one line per node
    lines = [(r.levelname, line) for r in caplog.records for line in r.getMessage().split("\n")]
    assert lines == [
        ("INFO", "job j1 node n0000: ok on kimi-k2.5, 1 attempts, 1180 ms"),
        ("INFO", "job j1 node n0002: cancelled on kimi-k2.5, 1 attempts, 1180 ms"),
        ("WARNING", "job j1 node n0001: auth on kimi-k2.5, 1 attempts, 1180 ms: "
         "AuthenticationError: 401 (calling http://gw/v1)"),
    ]  # fmt: skip
    assert len(caplog.records) == 2


@pytest.mark.parametrize(
    ("report", "level"),
    [
        ({"status": "succeeded", "succeeded": 2, "total": 2}, "INFO"),
        ({"status": "cancelled", "succeeded": 0, "total": 2, "error": "job cancelled"}, "INFO"),
        (
            {"status": "failed", "succeeded": 2, "total": 2,
             "error": "aggregation on kimi-k2.5 failed: auth: 401 Incorrect API key"},
            "WARNING",
        ),
    ],
)  # fmt: skip
def test_a_report_that_did_not_succeed_is_a_warning(
    report: dict[str, Any], level: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="workers.outcomes"):
        outcomes.log_report("j1", report)
    [record] = caplog.records
    assert record.levelname == level
    assert record.getMessage().startswith(f"job j1: {report['status']}, ")
    if level == "WARNING":
        assert record.getMessage().endswith(report["error"])
