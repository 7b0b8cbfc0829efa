"""A submit streamed in small chunks on real workers: every node runs and is accounted for,
and a submit cut off half way (the broker gone) is left resumable and resumes whole."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from stack import Stack, Worker, stack_fixture

from swarm.client.core import SwarmClient
from swarm.errors import BrokerUnavailableError
from swarm.jobs.queueing import SUBAGENTS_TASK
from swarm.sources.spool import SpooledLines, StreamedInputs

pytestmark = pytest.mark.integration

stack = stack_fixture(
    ["--latency-p50-ms", "5", "--latency-p99-ms", "20", "--seed", "3"],
    Worker("w1", c=32),
)
NODES = 300


def lines() -> StreamedInputs:
    """NODES stdin lines, every tenth one blank (refs keep their line numbers)."""
    text = (f"x = {i}\n" if i % 10 else "\n" for i in range(NODES + NODES // 9 + 1))
    inputs = StreamedInputs([SpooledLines(text)])
    return StreamedInputs([SpooledLines(item.text + "\n" for item in list(inputs)[:NODES])])


def client(stack: Stack, **settings: Any) -> SwarmClient:
    return SwarmClient(stack.settings(submit_chunk_nodes=7, nodes_per_task=3, **settings))


def test_a_job_submitted_in_small_chunks_accounts_for_every_node(stack: Stack) -> None:
    with client(stack) as swarm:
        handle = swarm.submit(lines(), "Review this")
        report = handle.wait(timeout=180).to_dict()
        assert report["status"] == "succeeded", report.get("error")
        assert (report["total"], report["succeeded"]) == (NODES, NODES)
        nodes = swarm.store.report_nodes(handle.id)
        assert [n["node_id"] for n in nodes] == [f"n{i:04d}" for i in range(NODES)]
        assert [n["input_ref"] for n in nodes] == [f"stdin:{i + 1}" for i in range(NODES)]
        assert swarm.store.progress(handle.id).sent is None


class CutOff(SwarmClient):
    """A client whose broker goes away after ``messages`` task messages."""

    def __init__(self, *args: Any, messages: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        made, count = self.app.signature, [0]

        def signature(name: str, *a: Any, **kw: Any) -> Any:
            if name == SUBAGENTS_TASK:
                count[0] += 1
                if count[0] > messages:
                    raise redis.ConnectionError("the broker went away")
            return made(name, *a, **kw)

        self.app.signature = signature


def test_a_submit_cut_off_half_way_is_seen_and_resumes_whole(stack: Stack) -> None:
    settings = stack.settings(submit_chunk_nodes=7, nodes_per_task=3)
    with CutOff(settings, messages=40) as cut, pytest.raises(BrokerUnavailableError):
        cut.submit(lines(), "Review this", job_id="cutoff")
    with client(stack) as swarm:
        sent = swarm.store.progress("cutoff").sent
        assert sent is not None and 0 < sent < NODES
        report = swarm.resume("cutoff").wait(timeout=180).to_dict()
        assert (report["status"], report["total"], report["succeeded"]) == (
            "succeeded", NODES, NODES,
        )  # fmt: skip
        assert swarm.store.progress("cutoff").sent is None
