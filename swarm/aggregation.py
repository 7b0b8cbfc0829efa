"""The chord callback's work: aggregate the successful results and write the report once."""

from __future__ import annotations

import time
from typing import Any

from swarm.llm import call_once, call_with_retries
from swarm.prompts import aggregate_messages
from swarm.records import JobSpec, NodeEnvelope
from swarm.report import (
    JobStatus,
    build_report,
    complete_nodes,
    decide_status,
    enough_succeeded,
)
from swarm.runtime import Runtime
from swarm.subagent import attempt_hook


def run_aggregation(rt: Runtime, job_id: str) -> dict[str, Any]:
    """Aggregate (when enough nodes succeeded), store the report, and return the stored one."""
    existing = rt.store.report(job_id)
    if existing is not None:
        return existing
    spec = rt.store.spec(job_id)
    nodes = complete_nodes(spec, rt.store.envelopes(job_id))
    ok = [env for env in nodes if env.ok]
    final, error = "", None
    cancelled = rt.store.cancelled(job_id)
    if cancelled:
        error = "job cancelled"
    elif not enough_succeeded(len(nodes), len(ok), spec.min_success_ratio):
        error = (
            f"only {len(ok)} of {len(nodes)} sub-agents succeeded (aggregation needs "
            f"{spec.min_success_ratio:.0%}); no aggregation call was made"
        )
    else:
        final, error = _aggregate(rt, spec, ok)
    status: JobStatus = decide_status(
        len(nodes), len(ok), spec.min_success_ratio, cancelled=cancelled, aggregated=bool(final)
    )
    report = build_report(
        spec,
        nodes,
        rt.store.ledger(job_id),
        rt.catalog,
        status=status,
        final=final,
        wall_s=time.time() - spec.submitted_at,
        error=error,
    )
    rt.store.save_report(job_id, report.model_dump(mode="json"))
    return rt.store.report(job_id) or report.model_dump(mode="json")


def _aggregate(rt: Runtime, spec: JobSpec, ok: list[NodeEnvelope]) -> tuple[str, str | None]:
    model = rt.catalog.model(spec.aggregate_model)
    messages = aggregate_messages(
        spec.aggregate_instruction, ok, model.context_window, model.max_tokens
    )
    result = call_with_retries(
        lambda: call_once(rt.client, model, messages, model.max_tokens),
        rt.settings,
        on_attempt=attempt_hook(rt, model.name),
    )
    for usage in result.billed:
        rt.store.add_usage(spec.job_id, model.name, usage)
    if result.answer is None:
        return "", f"aggregation on {model.name} failed: {result.error_kind}: {result.error}"
    return result.answer.content, None
