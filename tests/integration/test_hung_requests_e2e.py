"""Requests the gateway never answers do not hold a small in-flight limit shut.

A request past its node's deadline goes on in overtime and keeps its admission permits
until it ends (swarm.calls.local.overtime, swarm.calls.local.abandoned). Here the kimi model
allows 2 calls in flight, the workers read abandoned requests for 600 s, and the first
request of each straggler takes 10 minutes (``[[sim:straggle_ms=600000]]``; its retry
answers in 20 ms). Held until they end, two stragglers would hold both permits for the
whole 600 s and nothing else could be sent: the job would not end. Their permits go back
when a request sent after them is answered (overtaken), or when the backend ends nothing
for a node timeout while calls wait (starved).

(A late answer taken by its call's next attempt: tests/integration/test_late_answer_e2e.py.)
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from stack import Stack, Worker, local_catalog, running_stack

from swarm.client import SwarmClient
from swarm.records import InputItem

pytestmark = pytest.mark.integration

ENV = {
    "SWARM_NODE_TIMEOUT_S": "3", "SWARM_BACKOFF_MAX_S": "0.5", "SWARM_ABANDONED_GRACE_S": "600",
    # every request here hangs: without this, the timeouts of several calls with no answer
    # in between read as a gateway outage, waited out without spending the node's attempt
    "SWARM_OUTAGE_MIN_CALLS": "1000",
}  # fmt: skip
STRAGGLERS, OTHERS = 4, 8
WAIT_S = 120.0
"""A generous deadline (held to their end, the stragglers' permits would stall the job 600 s)."""


def narrow_catalog(path: Path) -> Path:
    """The packaged catalog, its backend local, with 2 calls in flight per model, rates far
    above the load."""
    text = resources.files("swarm.data").joinpath("catalog.toml").read_text("utf-8")
    text = re.sub(r"(?m)^(rpm|tpm|rps) = .*$", r"\1 = 10_000_000", text)
    return local_catalog(path, re.sub(r"(?m)^max_inflight = .*$", "max_inflight = 2", text))


@dataclass(frozen=True)
class Narrow:
    """The stack and a producer with the narrow catalog."""

    stack: Stack
    client: SwarmClient


@pytest.fixture(scope="module")
def narrow(redis_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Narrow]:
    logs = tmp_path_factory.mktemp("hung-logs")
    config = narrow_catalog(logs / "catalog.toml")
    env = {**ENV, "SWARM_CONFIG": str(config)}
    worker = Worker("w1", "llm.kimi-k2.5", c=8)
    with running_stack(redis_server, logs, ["--latency-ms", "20"], [worker], env) as st:
        yield Narrow(st, SwarmClient.from_settings(st.settings(config=config)))


def inputs() -> list[InputItem]:
    slow = [f"diff {i} [[sim:straggle_ms=600000]]" for i in range(STRAGGLERS)]
    fast = [f"diff {STRAGGLERS + i}" for i in range(OTHERS)]
    return [InputItem(ref=f"d{i}", text=text) for i, text in enumerate(slow + fast)]


def test_hung_requests_give_their_permits_back_and_the_job_ends(narrow: Narrow) -> None:
    handle = narrow.client.submit(inputs(), "Review", aggregate_instruction="Merge.")
    report = handle.wait(timeout=WAIT_S).to_dict()
    assert report["status"] == "succeeded", report["failures_by_kind"]
    attempts = {node["input_ref"]: node["attempts"] for node in report["nodes"]}
    assert [attempts[f"d{i}"] for i in range(STRAGGLERS)] == [2] * STRAGGLERS  # timed out once
    assert all(attempts[f"d{STRAGGLERS + i}"] == 1 for i in range(OTHERS))
