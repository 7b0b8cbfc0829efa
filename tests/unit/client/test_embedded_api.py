"""swarm.testing.embedded: a whole swarm in this process for a user's own tests, driven
through the public API (blocking and asyncio)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import celery.exceptions
import pytest
from click.testing import CliRunner

import swarm
import swarm.testing
from swarm import AsyncSwarmClient, Report
from swarm.cli.main import main
from workers import process

HELD_AGGREGATION = "Merge the results. [[sim:latency_ms=800]]"
"""An aggregation the simulator answers after 0.8 s: a window to see the job aggregating."""


def test_a_job_runs_in_process_and_reports_typed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWARM_BROKER_URL", "redis://127.0.0.1:9/0")  # never used: in memory
    with swarm.testing.embedded() as client:
        handle = client.submit(["def f(): pass", "x = 1", "print(2)"], "Review this code")
        report = handle.wait(timeout=60)
        progress = client.attach(handle.id).progress()
    assert isinstance(report, Report)
    assert (report.status, report.total, report.succeeded) == ("succeeded", 3, 3)
    assert report.final and all(node.status == "ok" and node.content for node in report.nodes)
    assert report.cost_usd > 0 and report.usage.completion_tokens > 0
    assert (progress.phase, progress.nodes_done, progress.cost_usd) == ("done", 3, report.cost_usd)
    assert progress.done == progress.total == 4  # three nodes and the aggregation
    assert handle.done()


def test_progress_keeps_done_below_total_while_the_aggregation_runs() -> None:
    with swarm.testing.embedded() as client:  # the marker holds the aggregation's call
        handle = client.submit(["a", "b"], "Summarise", aggregate_instruction=HELD_AGGREGATION)
        seen = []
        for _ in range(3000):  # at most a minute of polling
            if handle.done():
                break
            seen.append(handle.progress())
            time.sleep(0.02)
        report = handle.wait(timeout=60)
        final = handle.progress()
    aggregating = [p for p in seen if p.phase == "aggregating"]
    assert aggregating, "the job was never seen aggregating"
    for progress in aggregating:
        assert (progress.nodes_done, progress.nodes_total) == (2, 2)
        assert (progress.done, progress.total, progress.finished) == (2, 3, False)
    assert all(p.done < p.total for p in seen)
    assert report.status == "succeeded" and (final.done, final.total) == (3, 3)


def test_the_simulator_is_configurable() -> None:
    config = swarm.testing.SimConfig(error_rate=1.0)  # every call answers 500
    with swarm.testing.embedded(simulator=config, max_attempts=1) as client:
        report = client.submit(["a", "b"], "Summarise").wait(timeout=60)
    assert report.status == "failed" and report.failures_by_kind == {"server_error": 2}


def test_the_async_client_submits_and_waits() -> None:
    async def scenario() -> Report:
        with swarm.testing.embedded(latency_ms=50) as embedded_client:
            client = AsyncSwarmClient(client=embedded_client)
            handle = await client.submit(["a", "b"], "Summarise")
            assert (await client.attach(handle.id)).id == handle.id
            report = await handle.wait(timeout=60)
            assert await handle.done() and (await handle.progress()).phase == "done"
            return report

    report = asyncio.run(scenario())
    assert report.status == "succeeded" and report.total == 2


def test_a_job_carries_its_tenant_to_every_call() -> None:
    with swarm.testing.embedded() as client:
        handle = client.submit(["a", "b"], "Summarise", tenant="team-a")
        assert handle.wait(timeout=60).status == "succeeded"
        assert client.store.spec(handle.id).tenant == "team-a"
        spec = client.catalog.route("default")
        (row,) = process.get().admission.counters(spec).tenants  # the in-process worker's
        assert row.tenant == "team-a" and row.tokens > 0
        assert client.store.spec(client.submit(["c"], "S").id).tenant == "default"
        with pytest.raises(swarm.InputError, match="invalid tenant"):
            client.submit(["a"], "Summarise", tenant="team a")


def test_an_embedded_swarm_starts_after_a_cli_run_in_the_same_process(tmp_path: Path) -> None:
    """The CLI's embedded mode asks its worker to stop without joining it (the process exits
    next); run inside a longer-lived process, the next in-process worker still starts."""
    path = tmp_path / "in.txt"
    path.write_text("an input")
    env = {name: None for name in ("SWARM_BROKER_URL", "SWARM_BASE_URL", "SWARM_CONFIG")}
    done = CliRunner().invoke(main, ["run", str(path), "--simulate", "--json"], env=env)
    assert done.exit_code == 0, done.output
    with swarm.testing.embedded(latency_ms=10) as client:
        report = client.submit(["a"], "Summarise").wait(timeout=30)
    assert report.status == "succeeded"


def test_results_can_be_waited_for_in_the_process_after_an_embedded_run() -> None:
    """A worker's threads pool marks the process as a task's, where Celery refuses
    ``AsyncResult.get()``; once the embedded swarm stops, the process may wait for results
    again (a program, or a test, that runs an embedded job and then uses Celery itself)."""
    with swarm.testing.embedded(latency_ms=10) as client:
        assert client.submit(["a"], "Summarise").wait(timeout=30).status == "succeeded"
        app = client.app
    with pytest.raises(celery.exceptions.TimeoutError):
        app.AsyncResult("never-sent").get(timeout=0.1)
