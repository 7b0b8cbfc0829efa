"""A report's billing read again from the ledger: calls billed after the report was written
(a fenced run that woke up) count in the report as they count in the ledger."""

from __future__ import annotations

from swarm.catalog import load_catalog
from swarm.jobs.report import build_report, with_late_billing
from swarm.records import JobSpec, NodeEnvelope, Usage
from swarm.store.base import LedgerLine

MODEL = "kimi-k2.5"


def spec() -> JobSpec:
    return JobSpec(
        job_id="j1",
        instruction="i",
        aggregate_instruction="a",
        model=MODEL,
        aggregate_model=MODEL,
        node_ids=("n0", "n1"),
        input_refs=("r0", "r1"),
        submitted_at=0.0,
    )


def node(node_id: str) -> NodeEnvelope:
    return NodeEnvelope(node_id=node_id, input_ref="r", model=MODEL, status="ok")


def line(calls: int) -> LedgerLine:
    return LedgerLine(
        calls=calls, usage=Usage(prompt_tokens=100 * calls, completion_tokens=10 * calls)
    )


def written(calls: int) -> dict[str, object]:
    report = build_report(
        spec(), [node("n0"), node("n1")], {MODEL: line(calls)}, load_catalog(),
        status="succeeded", final="f", wall_s=1.0, rate_limited={MODEL: 2},
    )  # fmt: skip
    return report.model_dump(mode="json")


def test_calls_billed_after_the_report_count_in_it_as_in_the_ledger() -> None:
    catalog = load_catalog()
    report = written(3)
    settled = with_late_billing(report, {MODEL: line(5)}, catalog)
    assert settled["models"][MODEL]["calls"] == 5
    assert settled["models"][MODEL]["prompt_tokens"] == 500
    assert settled["models"][MODEL]["rate_limited"] == 2  # not the ledger's: kept
    assert settled["usage"]["completion_tokens"] == 50
    assert settled["late_calls"] == 2
    assert settled["cost_usd"] == written(5)["cost_usd"] > report["cost_usd"]
    assert settled["nodes"] == report["nodes"] and settled["status"] == report["status"]


def test_a_report_the_ledger_agrees_with_is_returned_as_written() -> None:
    report = written(3)
    assert with_late_billing(report, {MODEL: line(3)}, load_catalog()) is report
