"""A request answered after its node's deadline, while its call's retry waits for the
permit that request holds, is the call's answer (swarm.calls.local.late): the gateway
computes it once.

One slot: the model allows 1 call in flight on a local backend, so the retry can only wait
for the permit of its own first request, which the overtime thread hands back after it
has offered the late answer. (With two slots and two such nodes, the answer that came
first freed a permit the other node's retry could take before its own answer came: a
fourth request, depending on how far apart the two first requests were sent.)
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

ENV = {"SWARM_NODE_TIMEOUT_S": "3", "SWARM_BACKOFF_MAX_S": "0.5", "SWARM_ABANDONED_GRACE_S": "600"}
WAIT_S = 120.0


def one_slot_catalog(path: Path) -> Path:
    """The packaged catalog, its backend local, 1 call in flight per model, rates far above
    the load."""
    text = resources.files("swarm.data").joinpath("catalog.toml").read_text("utf-8")
    text = re.sub(r"(?m)^(rpm|tpm|rps) = .*$", r"\1 = 10_000_000", text)
    return local_catalog(path, re.sub(r"(?m)^max_inflight = .*$", "max_inflight = 1", text))


@dataclass(frozen=True)
class OneSlot:
    stack: Stack
    client: SwarmClient


@pytest.fixture(scope="module")
def one_slot(redis_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OneSlot]:
    logs = tmp_path_factory.mktemp("late-logs")
    config = one_slot_catalog(logs / "catalog.toml")
    env = {**ENV, "SWARM_CONFIG": str(config)}
    worker = Worker("w1", "llm.kimi-k2.5", c=4)
    with running_stack(redis_server, logs, ["--latency-ms", "20"], [worker], env) as st:
        yield OneSlot(st, SwarmClient.from_settings(st.settings(config=config)))


def test_an_answer_that_comes_while_its_call_waits_for_a_permit_is_its_answer(
    one_slot: OneSlot,
) -> None:
    # The first request takes 3.5 s (past the 3 s timeout) and holds the only permit; the
    # retry waits for it, and takes the late answer instead of asking again.
    one_slot.stack.reset_stats()
    late = [InputItem(ref="s0", text="page 0 [[sim:straggle_ms=3500]]")]
    handle = one_slot.client.submit(late, "Review", aggregate_instruction="Merge.")
    report = handle.wait(timeout=WAIT_S).to_dict()
    assert report["status"] == "succeeded", report["failures_by_kind"]
    assert [node["attempts"] for node in report["nodes"]] == [2]  # timed out, took it
    stats = one_slot.stack.stats()
    assert (stats["requests"], stats["completed"]) == (2, 2)  # the first, the aggregation
    ledger = one_slot.client.store.ledger(handle.id)
    assert sum(line.calls for line in ledger.values()) == 2
    assert usage_pair(report["usage"]) == usage_pair(stats)


def usage_pair(counts: dict[str, Any]) -> tuple[int, int]:
    return counts["prompt_tokens"], counts["completion_tokens"]
