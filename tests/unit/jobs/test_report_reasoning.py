"""Reasoning tokens from the ledger to the report (usage, models, late billing) and the
CLI's table; priced as the completion tokens they are part of."""

from __future__ import annotations

from io import StringIO

from rich.console import Console

from swarm.catalog import load_catalog
from swarm.cli.render import print_report
from swarm.cost.batch import batch_ledger_name
from swarm.cost.pricing import cost_usd
from swarm.jobs.report import build_report, with_late_billing
from swarm.records import JobSpec, NodeEnvelope, Usage
from swarm.store.base import LedgerLine

MODEL = "kimi-k2.5"
LIVE = Usage(prompt_tokens=1000, completion_tokens=300, cached_tokens=600, reasoning_tokens=200)
BATCH = Usage(prompt_tokens=100, completion_tokens=50, reasoning_tokens=20)


def report_of(ledger: dict[str, LedgerLine]) -> dict[str, object]:
    spec = JobSpec(
        job_id="j1", instruction="i", aggregate_instruction="a", model=MODEL,
        aggregate_model=MODEL, node_ids=("n0",), input_refs=("r0",), submitted_at=0.0,
    )  # fmt: skip
    node = NodeEnvelope(node_id="n0", input_ref="r0", model=MODEL, status="ok", content="x")
    report = build_report(
        spec, [node], ledger, load_catalog(), status="succeeded", final="f", wall_s=1.0
    )
    return report.model_dump(mode="json")


def test_the_report_carries_the_ledgers_reasoning_tokens() -> None:
    report = report_of({MODEL: LedgerLine(calls=2, usage=LIVE)})
    assert report["usage"]["reasoning_tokens"] == 200  # type: ignore[index]
    line = report["models"][MODEL]  # type: ignore[index]
    assert line["reasoning_tokens"] == 200
    without = LIVE.model_copy(update={"reasoning_tokens": 0})
    assert line["cost_usd"] == round(cost_usd(load_catalog().model(MODEL), without), 6)


def test_batch_lines_and_late_billing_keep_the_reasoning_tokens() -> None:
    batched = {MODEL: LedgerLine(calls=1, usage=LIVE),
               batch_ledger_name(MODEL): LedgerLine(calls=1, usage=BATCH)}  # fmt: skip
    assert report_of(batched)["models"][MODEL]["reasoning_tokens"] == 220  # type: ignore[index]
    written = report_of({MODEL: LedgerLine(calls=1, usage=LIVE)})
    later = {MODEL: LedgerLine(calls=2, usage=LIVE + LIVE)}
    settled = with_late_billing(written, later, load_catalog())
    assert settled["models"][MODEL]["reasoning_tokens"] == 400
    assert settled["usage"]["reasoning_tokens"] == 400


def test_the_cli_table_shows_a_reasoning_column() -> None:
    out = StringIO()
    print_report(report_of({MODEL: LedgerLine(calls=2, usage=LIVE)}), Console(file=out, width=160))
    text = out.getvalue()
    assert "reasoning" in text
    row = next(line for line in text.splitlines() if MODEL in line and "600" in line)
    cells = [cell.strip() for cell in row.strip().strip("│").split("│")]
    assert cells[:6] == [MODEL, "2", "1000", "600", "300", "200"]  # ..., completion, reasoning
