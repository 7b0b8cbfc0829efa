"""A report aggregated in pages (SWARM_REPORT_PAGE_NODES far below the job's size) on real
workers: its counts, tokens, cost and nodes are the ledger's and the envelopes'."""

from __future__ import annotations

import pytest
from stack import Stack, Worker, stack_fixture

from swarm.catalog import load_catalog
from swarm.cost.pricing import cost_usd
from swarm.jobs.tally import complete_page
from swarm.records import InputItem

pytestmark = pytest.mark.integration

PAGE = 7

stack = stack_fixture(
    ["--latency-p50-ms", "20", "--latency-p99-ms", "60", "--seed", "5"],
    Worker("w1"),
    Worker("w2", "llm.kimi-k2.5"),
    env={"SWARM_REPORT_PAGE_NODES": str(PAGE)},
)


def test_a_report_aggregated_in_pages_matches_the_ledger_and_the_envelopes(stack: Stack) -> None:
    bad = {3, 17, 18, 40}
    items = [
        InputItem(ref=f"f{i}.py", text=f"x = {i}\n" + ("[[sim:status=400]]" if i in bad else ""))
        for i in range(50)
    ]
    client = stack.client()
    handle = client.submit(items, "Review this")
    report = handle.wait(timeout=120).to_dict()
    assert report["status"] == "partial", report.get("error")
    assert (report["total"], report["succeeded"], report["failed"]) == (50, 46, 4)
    assert report["failures_by_kind"] == {"bad_request": 4}
    assert "results=46" in report["final"]  # the simulator echoes the merged result count
    ledger = client.store.ledger(handle.id)
    line = ledger["kimi-k2.5"]
    # 46 answers and the merge (a 400 bills nothing)
    assert report["models"]["kimi-k2.5"]["calls"] == line.calls == 47
    assert report["usage"] == line.usage.model_dump(mode="json")
    model = load_catalog().model("kimi-k2.5")
    assert report["cost_usd"] == pytest.approx(cost_usd(model, line.usage), abs=1e-6)
    spec = client.store.spec(handle.id)
    by_id = {env.node_id: env for env in client.store.envelopes(handle.id)}
    stored = complete_page(spec, zip(spec.node_ids, spec.input_refs, strict=True), by_id)
    assert report["nodes"] == [env.model_dump(mode="json") for env in stored]
    failed = client.store.report_nodes(handle.id, failed=True)
    assert [node["input_ref"] for node in failed] == [f"f{i}.py" for i in sorted(bad)]
