"""Gateway faults: a gateway that misbehaves in every way at once.

The simulator answers 10% of requests 429 with Retry-After, 10% 5xx, hangs 2% past the 2 s
node timeout, sends 2% non-JSON bodies and drops 2% of connections: about 26% of attempts
fail. A `celery -A workers worker` process (32 threads) with the default 5 attempts per call.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from faults import FaultStack, fault_stack, inputs

from swarm.records import ErrorKind

pytestmark = pytest.mark.integration

NODES = 200
BOUND_S = 150
"""The swarm must end within this: each node's worst case is 5 attempts of at most 2 s plus
backoff of at most max(0.5 s, Retry-After 1 s), ~15 s, and 429s pause the model for 1 s."""
FAULTS = [
    "--rate-limit-rate", "0.1",
    "--error-rate", "0.1",
    "--hang-rate", "0.02",
    "--bad-json-rate", "0.02",
    "--drop-rate", "0.02",
]  # fmt: skip


@pytest.fixture(scope="module")
def fs(redis_server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultStack]:  # type: ignore[no-untyped-def]
    logs = tmp_path_factory.mktemp("gateway-faults")
    sim_args = ["--latency-p50-ms", "30", "--latency-p99-ms", "150", "--seed", "11", *FAULTS]
    env = {"SWARM_NODE_TIMEOUT_S": "2", "SWARM_BACKOFF_MAX_S": "0.5"}
    with fault_stack(redis_server, logs, sim_args, env) as stack:
        yield stack


def test_every_fault_at_once_ends_in_envelopes_and_99_percent_succeed(fs: FaultStack) -> None:
    workers = fs.ensure_workers(["w1"], 32)
    fs.stack.reset_stats()
    handle = fs.client().submit(inputs(NODES), "Summarise this document")
    report = handle.wait(timeout=BOUND_S).to_dict()
    nodes = report["nodes"]
    assert len(nodes) == NODES and report["total"] == NODES
    for node in nodes:  # succeeded, or an error envelope that says why
        assert node["status"] in ("ok", "error"), node
        if node["status"] == "error":
            assert ErrorKind(node["error_kind"]) and node["error"], node
        else:
            assert node["content"] and node["error_kind"] is None, node
    assert report["succeeded"] >= 0.99 * NODES, report["failures_by_kind"]
    assert report["status"] in ("succeeded", "partial") and report["final"]
    stats = fs.stack.stats()
    faults = stats["faults"]
    # Every fault happened, and the retries absorbed them.
    assert stats["rate_limited"] and stats["errors"], stats
    assert faults["hang"] and faults["bad_json"] and faults["drop"], faults
    assert sum(n["attempts"] for n in nodes) > NODES
    # Only answers bill: the ledger equals what the gateway answered.
    billed = sum(line["calls"] for line in report["models"].values())
    assert billed == stats["completed"]
    for field in ("prompt_tokens", "completion_tokens"):
        assert report["usage"][field] == stats[field], field
    # No worker crashed, none logged a traceback.
    assert all(w.alive for w in workers)
    assert "Traceback" not in fs.stack.worker_logs()
    print(
        f"\nFIGURE gateway-faults: nodes={NODES} succeeded={report['succeeded']} "
        f"attempts={sum(n['attempts'] for n in nodes)} requests={stats['requests']} "
        f"429={stats['rate_limited']} 5xx={stats['errors']} hang={faults['hang']} "
        f"bad_json={faults['bad_json']} drop={faults['drop']} wall_s={report['wall_s']:.1f} "
        f"failures={report['failures_by_kind']}"
    )
