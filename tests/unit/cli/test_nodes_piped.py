"""`swarm status JOB --nodes` piped: the table is as wide as the other piped output, so an
input path and an error message are not cut or wrapped mid-word."""

from __future__ import annotations

import pytest
from doubles import job_spec

from swarm.catalog import load_catalog
from swarm.cli.nodes_view import NodePage, show_nodes
from swarm.jobs.report import build_report
from swarm.records import NodeEnvelope
from swarm.store import MemoryJobStore

ERROR = "BadRequestError: Error code: 400 - Simulated error 400 for kimi-k2.5"


def test_a_piped_page_of_nodes_keeps_paths_and_errors_whole(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    store = MemoryJobStore()
    spec = job_spec(1).model_copy(update={"input_refs": ("docs/concepts/simulator.md",)})
    store.create_job(spec, ["text"])
    failed = NodeEnvelope(
        node_id="n00", input_ref="docs/concepts/simulator.md", model="kimi-k2.5",
        status="error", attempts=1, error_kind="bad_request", error=ERROR,
    )  # fmt: skip
    store.finish_node("j1", failed)
    report = build_report(
        spec, [failed], store.ledger("j1"), load_catalog(), status="failed", final="", wall_s=1.0
    )
    store.save_report("j1", report.model_dump(mode="json"))
    show_nodes(store, "j1", NodePage(failed=True), "table")
    out = capsys.readouterr().out
    assert "docs/concepts/simulator.md" in out and ERROR in out, out
