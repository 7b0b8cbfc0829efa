"""End to end: the ledger against the gateway's /stats under retries and 429s, the
budget cap, no double billing on redelivery, resume, prompt caching and `swarm cost`.

Real redis-server, the simulator over HTTP with random 5xx and 429s, and two
`celery -A workers worker` processes: w1 serves every queue, w2 only Kimi's.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from stack import Stack, Worker, running_stack
from test_swarm_e2e import diffs, run_cli

from swarm.catalog import load_catalog
from swarm.client import SwarmClient
from swarm.cost.budget import messages_bound_nusd
from swarm.cost.pricing import cost_usd, usd_of_nusd
from swarm.errors import BudgetExceededError, JobNotFinishedError, JobNotFoundError
from swarm.jobs.prompts import subagent_messages
from swarm.jobs.queueing import SUBAGENT_TASK
from swarm.records import InputItem, Usage

pytestmark = pytest.mark.integration

CATALOG = load_catalog()
WAVE = 8
"""Concurrency of w1, the only worker of the deepseek queue: calls in flight at once."""


def roomy_catalog(path: Path) -> Path:
    """The packaged catalog (same prices) with limits far above these tests' load, so the
    admission controller's slowdown after the simulator's random 429s does not dominate."""
    text = resources.files("swarm.data").joinpath("catalog.toml").read_text("utf-8")
    text = re.sub(r"(?m)^(rpm|tpm|max_inflight) = .*$", r"\1 = 10_000_000", text)
    path.write_text(text)
    return path


@dataclass
class CostStack:
    """The stack, the environment its processes get, and a producer client for it."""

    stack: Stack
    env: dict[str, str]
    config: Path

    def client(self) -> SwarmClient:
        return SwarmClient.from_settings(self.stack.settings(config=self.config))


@pytest.fixture(scope="module")
def cs(redis_server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CostStack]:  # type: ignore[no-untyped-def]
    logs = tmp_path_factory.mktemp("cost-logs")
    config = roomy_catalog(logs / "catalog.toml")
    sim_args = ["--latency-p50-ms", "30", "--latency-p99-ms", "120", "--seed", "3"]
    sim_args += ["--error-rate", "0.05", "--rate-limit-rate", "0.05"]
    env = {"SWARM_CONFIG": str(config), "SWARM_BACKOFF_MAX_S": "0.5", "SWARM_MAX_ATTEMPTS": "8"}
    workers = [Worker("w1", c=WAVE), Worker("w2", "llm.kimi-k2.5", c=8)]
    with running_stack(redis_server, logs, sim_args, workers, env) as st:
        yield CostStack(st, {**st.env, **env}, config)


def billed_calls(report: dict[str, Any]) -> int:
    return sum(line["calls"] for line in report["models"].values())


def test_ledger_equals_the_gateways_stats_with_retries_and_429s(cs: CostStack) -> None:
    cs.stack.reset_stats()
    report = cs.client().submit(diffs(60), "Review this diff").wait(timeout=180).to_dict()
    assert report["status"] == "succeeded", report.get("error")
    stats = cs.stack.stats()
    assert stats["rate_limited"] > 0 and stats["errors"] > 0, stats  # retries happened
    assert sum(n["attempts"] for n in report["nodes"]) > 60
    assert billed_calls(report) == stats["completed"] == 61
    for field in ("prompt_tokens", "completion_tokens", "cached_tokens"):
        assert report["usage"][field] == stats[field], field
    kimi = stats["models"]["kimi-k2.5"]
    usage = Usage(
        prompt_tokens=kimi["prompt_tokens"],
        completion_tokens=kimi["completion_tokens"],
        cached_tokens=kimi["cached_tokens"],
    )
    expected = cost_usd(CATALOG.model("kimi-k2.5"), usage)
    assert report["cost_usd"] == pytest.approx(expected, abs=1e-6)


def same_size_inputs(n: int) -> list[InputItem]:
    return [
        InputItem(ref=f"doc-{i:03d}", text=f"document {i:03d}: " + "lorem " * 40) for i in range(n)
    ]


def test_budget_cap_halfway_then_resume(cs: CostStack) -> None:
    items, deepseek = same_size_inputs(40), CATALOG.model("deepseek-v3.2")
    first = subagent_messages("Summarise", items[0].ref, items[0].text)
    bound = messages_bound_nusd(deepseek, first, 100)  # every node has this bound
    cap_usd = usd_of_nusd(20 * bound)
    client = cs.client()
    options: dict[str, Any] = {"model": "deepseek-v3.2", "max_tokens": 100}
    # Pre-flight: the bound of 40 nodes and the aggregation passes the cap: refused, and
    # nothing is stored or enqueued.
    with pytest.raises(BudgetExceededError, match="exceeds the budget"):
        client.submit(items, "Summarise", job_id="refused", budget_usd=cap_usd, **options)
    with pytest.raises(JobNotFoundError):
        client.attach("refused")
    cs.stack.reset_stats()
    handle = client.submit(items, "Summarise", budget_usd=cap_usd, force=True, **options)
    report = handle.wait(timeout=180).to_dict()
    assert report["status"] == "budget_exceeded", report.get("error")
    ok = [n for n in report["nodes"] if n["status"] == "ok"]
    cut = [n for n in report["nodes"] if n["error_kind"] == "budget_exceeded"]
    assert len(ok) + len(cut) == 40 and 10 <= len(ok) <= 30, (len(ok), len(cut))
    spent = client.store.budget(handle.id).spent_nusd
    assert 20 * bound - (WAVE + 1) * bound <= spent <= 20 * bound  # within one wave
    assert report["cost_usd"] == pytest.approx(usd_of_nusd(spent), abs=1e-6)
    stats = cs.stack.stats()
    ds = stats["models"]["deepseek-v3.2"]
    # The cut nodes never reached the gateway: every request the gateway saw is an
    # attempt of a node that ran.
    assert all(n["attempts"] == 0 for n in cut)
    assert ds["requests"] == sum(n["attempts"] for n in ok)
    assert ds["completed"] == len(ok) == report["models"]["deepseek-v3.2"]["calls"]
    assert "kimi-k2.5" not in report["models"] and "does not cover the aggregation" in (
        report["error"] or ""
    )
    # Resume with room for the rest: only the cut nodes run, then the aggregation.
    cs.stack.reset_stats()
    resumed = client.resume(handle.id, budget_usd=1.0).wait(timeout=180).to_dict()
    assert resumed["status"] == "succeeded", resumed.get("error")
    assert resumed["final"] and resumed["budget_usd"] == 1.0
    stats = cs.stack.stats()
    assert stats["models"]["deepseek-v3.2"]["completed"] == len(cut)
    assert resumed["models"]["deepseek-v3.2"]["calls"] == 40  # each node billed once
    assert resumed["models"]["kimi-k2.5"]["calls"] == stats["models"]["kimi-k2.5"]["completed"]
    before = {n["node_id"]: n["content"] for n in ok}
    assert all(
        before[n["node_id"]] == n["content"] for n in resumed["nodes"] if n["node_id"] in before
    )


def test_a_redelivered_task_reuses_the_stored_answer(cs: CostStack, redis_server) -> None:  # type: ignore[no-untyped-def]
    client = cs.client()
    handle = client.submit(diffs(3), "Review this diff")
    report = handle.wait(timeout=60).to_dict()
    original = client.store.envelope(handle.id, "n0000")
    assert original is not None and original.ok
    calls = billed_calls(report)
    # A worker that died after the gateway answered, before the envelope was written:
    # the answer is stored (with its ledger line), the envelope is not.
    r = redis_server.client(db=1)
    try:
        for part in ("env", "state"):
            r.hdel(f"swarm:{{job:{handle.id}}}:{part}", "n0000")
    finally:
        r.close()
    assert client.store.envelope(handle.id, "n0000") is None
    cs.stack.reset_stats()
    client.app.send_task(  # the same task message again, as the broker redelivers it
        SUBAGENT_TASK,
        args=(handle.id, "n0000"),
        queue="llm.kimi-k2.5",
        task_id=f"{handle.id}-n0000",
    )
    deadline = time.monotonic() + 30
    while (again := client.store.envelope(handle.id, "n0000")) is None:
        assert time.monotonic() < deadline, "the redelivered task did not finish"
        time.sleep(0.05)
    assert again.ok and again.content == original.content
    assert cs.stack.stats()["requests"] == 0  # no second call for that node
    # Resuming the succeeded job is a no-op that says so: nothing is sent, nothing billed
    # twice, and the stored report stays as it was.
    stored = client.store.report(handle.id)
    resumed = run_cli(["resume", handle.id, "--json"], cs.env)
    assert resumed.returncode == 0, resumed.stderr
    assert "nothing to resume" in resumed.stderr and resumed.stdout == ""
    assert client.store.report(handle.id) == stored and stored is not None
    assert stored["final"] == report["final"]
    assert cs.stack.stats()["requests"] == 0
    assert (
        billed_calls(
            {"models": {k: v.model_dump() for k, v in client.store.ledger(handle.id).items()}}
        )
        == calls
    )


def test_a_concurrent_duplicate_message_calls_the_gateway_once(cs: CostStack) -> None:
    client = cs.client()
    cs.stack.reset_stats()
    slow = InputItem(ref="slow.diff", text="diff --git a/s.py\n+y = 1\n[[sim:latency_ms=1500]]")
    handle = client.submit([slow, InputItem(ref="fast.diff", text="+z = 2")], "Review")
    duplicate = client.app.send_task(
        SUBAGENT_TASK,
        args=(handle.id, "n0000"),
        queue="llm.kimi-k2.5",
        task_id=f"{handle.id}-n0000-duplicate",
    )
    with pytest.raises(JobNotFinishedError):
        client.resume(handle.id)
    report = handle.wait(timeout=60).to_dict()
    assert duplicate.get(timeout=60)["status"] == "ok"
    assert report["status"] == "succeeded"
    stats = cs.stack.stats()
    assert stats["completed"] == 3 == billed_calls(report)  # 2 nodes + 1 aggregation
    assert report["usage"]["prompt_tokens"] == stats["prompt_tokens"]


LONG_INSTRUCTION = (
    "You review Python diffs for a payments team. " + "Check every rule of the style guide. " * 140
)


def test_cached_tokens_are_billed_at_the_cached_price_and_shown_by_swarm_cost(
    cs: CostStack,
) -> None:
    cs.stack.reset_stats()
    report = cs.client().submit(diffs(20), LONG_INSTRUCTION).wait(timeout=120).to_dict()
    assert report["status"] == "succeeded", report.get("error")
    stats = cs.stack.stats()
    assert stats["cached_tokens"] > 0 and report["usage"]["cached_tokens"] == stats["cached_tokens"]
    kimi = CATALOG.model("kimi-k2.5")
    usage = Usage(
        **{f: report["usage"][f] for f in ("prompt_tokens", "completion_tokens", "cached_tokens")}
    )
    assert report["cost_usd"] == pytest.approx(cost_usd(kimi, usage), abs=1e-6)
    full = cost_usd(kimi, usage.model_copy(update={"cached_tokens": 0}))
    assert report["cost_usd"] < full
    out = run_cli(["cost", report["job_id"], "--json", "--swarms-per-day", "50"], cs.env)
    assert out.returncode == 0, out.stderr
    table = json.loads(out.stdout)
    assert table["usage"]["cached_tokens"] == stats["cached_tokens"]
    assert table["job"]["per_swarm_usd"] == report["cost_usd"]
    assert table["job"]["per_month_usd"] == pytest.approx(report["cost_usd"] * 50 * 30)
    assert table["cache_saved_usd"] == pytest.approx(full - report["cost_usd"], abs=1e-6)


def test_cli_budget_refusal_is_one_line_and_enqueues_nothing(cs: CostStack, tmp_path) -> None:  # type: ignore[no-untyped-def]
    doc = tmp_path / "doc.txt"
    doc.write_text("a document")
    cs.stack.reset_stats()
    out = run_cli(["run", str(doc), "--budget-usd", "0.0000001"], cs.env)
    assert out.returncode == 2 and "exceeds the budget of $0.00000010" in out.stderr, out.stderr
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    time.sleep(0.5)
    assert cs.stack.stats()["requests"] == 0
