"""The chord callback's work: aggregate the successful results and write the report once."""

from __future__ import annotations

import time
from typing import Any

from swarm.admission.gate import gate_for, rate_limited_by_model
from swarm.idempotency import CallGuard
from swarm.llm import call_once, call_with_retries
from swarm.pricing import usd_of_nusd, usd_text
from swarm.prompts import aggregate_messages
from swarm.records import ErrorKind, JobSpec, NodeEnvelope
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
    cut = sum(1 for env in nodes if env.error_kind is ErrorKind.BUDGET_EXCEEDED)
    ran = len(nodes) - cut  # the success ratio counts the nodes the budget let run
    final, error, refused = "", None, False
    cancelled = rt.store.cancelled(job_id)
    if cancelled:
        error = "job cancelled"
    elif not enough_succeeded(ran, len(ok), spec.min_success_ratio):
        error = (
            f"only {len(ok)} of {ran} sub-agents succeeded (aggregation needs "
            f"{spec.min_success_ratio:.0%}); no aggregation call was made"
        )
    else:
        final, error, refused = _aggregate(rt, spec, ok)
    if cut and not cancelled:
        budget = usd_text(spec.budget_usd or 0)
        note = f"budget {budget} reached: {cut} of {len(nodes)} sub-agents never ran"
        error = f"{note}; {error}" if error else note
    status: JobStatus = decide_status(
        len(nodes),
        len(ok),
        spec.min_success_ratio,
        cancelled=cancelled,
        aggregated=bool(final),
        over_budget=cut > 0 or refused,
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
        rate_limited=rate_limited_by_model(rt, spec),
    )
    rt.store.save_report(job_id, report.model_dump(mode="json"))
    return rt.store.report(job_id) or report.model_dump(mode="json")


def _aggregate(rt: Runtime, spec: JobSpec, ok: list[NodeEnvelope]) -> tuple[str, str | None, bool]:
    """The final text, or an error; the flag is True when the budget refused the call."""
    model = rt.catalog.model(spec.aggregate_model)
    messages = aggregate_messages(
        spec.aggregate_instruction, ok, model.context_window, model.max_tokens
    )
    budgeted = spec.budget_usd is not None
    slot, limit = "aggregate", model.max_tokens
    with CallGuard(rt, spec.job_id, slot, model, messages, limit, budgeted, closing=True) as guard:
        if guard.reused is not None:
            return guard.reused.content, None, False
        if guard.refused:
            left = usd_of_nusd(rt.store.budget(spec.job_id).left_nusd or 0)
            bound = usd_of_nusd(guard.bound_nusd)
            short = (
                f"the budget left ({usd_text(left)}) does not cover the aggregation (up to "
                f"{usd_text(bound)}); no aggregation call was made"
            )
            return "", short, True
        gate = gate_for(rt, model, spec.job_id, messages, limit)
        result = call_with_retries(
            guard.recorded(gate.wrap(lambda: call_once(rt.client, model, messages, limit))),
            rt.settings,
            on_attempt=attempt_hook(rt, model.name),
        )
    if result.answer is None:
        failed = f"aggregation on {model.name} failed: {result.error_kind}: {result.error}"
        return "", failed, False
    return result.answer.content, None, False
