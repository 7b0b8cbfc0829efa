"""A node whose 429 asks for longer than admission lets a task wait goes back to the queue;
its attempts, latency and the attempt bound count across those requeues, and the report
counts every 429, with admission on or off (real worker, real simulator)."""

from __future__ import annotations

from pathlib import Path

import procs
import pytest
from stack import Stack, stack_fixture

from swarm.records import InputItem

pytestmark = pytest.mark.integration

MODEL = "kimi-k2.5"
LIMITED = "[[sim:status=429]]"  # the simulator answers 429 with Retry-After: 1
stack = stack_fixture(["--latency-ms", "20"], scope="function")


@pytest.mark.parametrize("admission", ["true", "false"])
def test_the_attempt_bound_holds_across_requeues(
    stack: Stack, tmp_logs: Path, admission: str
) -> None:
    env = {
        "SWARM_MAX_ATTEMPTS": "2",
        "SWARM_ADMISSION_MAX_WAIT_S": "0.3",  # Retry-After 1 s: back to the queue each time
        "SWARM_ADMISSION_MAX_REQUEUES": "8",
        "SWARM_ADMISSION": admission,
    }
    stack.workers.append(
        procs.start_celery_worker({**stack.env, **env}, None, 8, "bound@%h", tmp_logs)
    )
    stack.reset_stats()
    texts = [f"input {i} {LIMITED if i < 2 else ''}" for i in range(4)]
    inputs = [InputItem(ref=f"in-{i}", text=text) for i, text in enumerate(texts)]
    report = stack.client().submit(inputs, "Summarise").wait(timeout=120).to_dict()
    limited = [node for node in report["nodes"] if node["error_kind"] == "rate_limited"]
    assert len(limited) == 2 and report["succeeded"] == 2
    for node in limited:
        assert node["attempts"] == 2  # SWARM_MAX_ATTEMPTS, not 1 per requeue
        assert node["latency_ms"] >= 1000  # from the first run: a Retry-After was waited out
    stats = stack.stats()
    assert stats["rate_limited"] == 4  # 2 nodes x 2 attempts, never 9 each
    assert report["models"][MODEL]["rate_limited"] == 4  # counted with admission off too
