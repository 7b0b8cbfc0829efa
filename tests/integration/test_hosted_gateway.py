"""A hosted-like gateway, through Redis and a real worker process: retries save what the
plain script saves.

The simulator answers 30% of requests 429 and 30% 5xx, the rest after 200 ms, with limits
far above the load (the catalog's). A node is given up only after all of its
SWARM_MAX_ATTEMPTS attempts: no job-wide retry budget judges the gateway by the first
fast errors of a wave (one that did gave 20 of 36 failed nodes a single attempt).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from faults import FaultStack, fault_stack, inputs

pytestmark = pytest.mark.integration

NODES = 100
ATTEMPTS = 5
WAIT_S = 240.0
"""A generous deadline for the job (never a timing bound)."""
FAULTS = [
    "--fast-errors",  # 429s and 5xx come back at once, answers after 200 ms
    "--rate-limit-rate", "0.3",
    "--error-rate", "0.3",
    "--spurious-retry-after-s", "0.2",
]  # fmt: skip


@pytest.fixture(scope="module")
def fs(redis_server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultStack]:  # type: ignore[no-untyped-def]
    logs = tmp_path_factory.mktemp("hosted-gateway")
    sim_args = ["--latency-ms", "200", "--seed", "23", *FAULTS]
    env = {"SWARM_MAX_ATTEMPTS": str(ATTEMPTS), "SWARM_BACKOFF_MAX_S": "0.5"}
    with fault_stack(redis_server, logs, sim_args, env) as stack:
        yield stack


def test_every_node_given_up_made_all_its_attempts(fs: FaultStack) -> None:
    fs.ensure_workers(["w1"], 50)
    fs.stack.reset_stats()
    report = (
        fs.client().submit(inputs(NODES), "Summarise this document").wait(timeout=WAIT_S).to_dict()
    )
    nodes = report["nodes"]
    failed = [node for node in nodes if node["status"] != "ok"]
    assert len(nodes) == NODES
    assert all(node["attempts"] == ATTEMPTS for node in failed), [
        (node["node_id"], node["attempts"], node["error_kind"]) for node in failed
    ]
    assert all(1 <= node["attempts"] <= ATTEMPTS for node in nodes)
    stats = fs.stack.stats()
    assert stats["rate_limited"] and stats["errors"], stats  # both faults happened
    billed = sum(line["calls"] for line in report["models"].values())
    assert billed == stats["completed"]  # 429s and 5xx are not billed
    print(
        f"\nFIGURE hosted-gateway: {report['succeeded']}/{NODES} saved, "
        f"{sum(n['attempts'] for n in nodes)} attempts, {stats['rate_limited']} x 429, "
        f"{stats['errors']} x 5xx, wall {report['wall_s']:.1f} s"
    )
