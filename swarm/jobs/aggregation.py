"""The chord callback's work: aggregate the successful results and write the report once."""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from swarm.calls.context_window import parse_overflow
from swarm.calls.pipeline import run_call
from swarm.calls.request import CallRequest, CallResult, Message
from swarm.calls.runtime import Runtime
from swarm.catalog import ModelSpec
from swarm.cost.budget import messages_bound_nusd
from swarm.cost.pricing import usd_of_nusd, usd_text
from swarm.jobs.prompts import aggregate_messages
from swarm.jobs.reduce import levels_after, needs_reduction, pack
from swarm.jobs.report import (
    JobStatus,
    build_report,
    complete_nodes,
    decide_status,
    enough_succeeded,
)
from swarm.records import ErrorKind, JobSpec, NodeEnvelope
from swarm.tokens import estimate_messages, estimate_tokens

log = logging.getLogger(__name__)

MAX_REDUCE_LEVELS = 6
REDUCE_PARALLELISM = 8
REDUCE_INSTRUCTION = (
    "Condense these sub-agent results for a later merge: keep every distinct finding, "
    "each with the inputs (input refs) it concerns; drop repetition."
)


def run_aggregation(rt: Runtime, job_id: str) -> dict[str, Any]:
    """Aggregate (when enough nodes succeeded), store the report, and return the stored
    one's summary (its nodes are read in pages: JobStore.report_nodes)."""
    existing = rt.store.report_summary(job_id)
    if existing is not None:
        return existing
    spec = rt.store.spec(job_id)
    rt.store.set_phase(job_id, "aggregating")
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
        rate_limited=rt.store.rate_limited(job_id),
        hedges=rt.store.hedges(job_id),
    )
    summary = report.model_dump(mode="json", exclude={"nodes"})
    # Each node's JSON is made as the store writes it: never the whole report at once.
    rt.store.save_report_parts(job_id, summary, (env.model_dump_json() for env in nodes))
    return rt.store.report_summary(job_id) or summary


def _aggregate(rt: Runtime, spec: JobSpec, ok: list[NodeEnvelope]) -> tuple[str, str | None, bool]:
    """The final text, or an error; the flag is True when the budget refused the call.

    A context-length 400 that states the window (a server smaller than the catalog says)
    teaches the model's window; the results are then reduced and merged again for it, once
    (the refused request was not billed)."""
    model = rt.catalog.model(spec.aggregate_model)
    messages, outcome = _merge(rt, spec, model, ok, "")
    if isinstance(outcome, str):
        return "", outcome, False
    overflow = parse_overflow(outcome.error or "")
    if outcome.error_kind is ErrorKind.CONTEXT_OVERFLOW and overflow is not None:
        rt.windows.learn(model.name, overflow.window)
        sent = estimate_messages(m["content"] for m in messages) + model.max_tokens
        rt.windows.calibrate(model.name, sent, overflow.requested or 0)
        log.debug("aggregation: %s has a window of %d tokens, merging again", model.name,
                  overflow.window)  # fmt: skip
        messages, outcome = _merge(rt, spec, model, ok, "refit:")
        if isinstance(outcome, str):
            return "", outcome, False
    if outcome.error_kind is ErrorKind.BUDGET_EXCEEDED:
        left = usd_of_nusd(rt.store.budget(spec.job_id).left_nusd or 0)
        bound = usd_of_nusd(messages_bound_nusd(model, messages, model.max_tokens))
        short = (
            f"the budget left ({usd_text(left)}) does not cover the aggregation (up to "
            f"{usd_text(bound)}); no aggregation call was made"
        )
        return "", short, True
    if outcome.answer is None:
        failed = f"aggregation on {model.name} failed: {outcome.error_kind}: {outcome.error}"
        return "", failed, False
    return outcome.answer.content, None, False


def _merge(
    rt: Runtime, spec: JobSpec, model: ModelSpec, ok: list[NodeEnvelope], prefix: str
) -> tuple[list[Message], CallResult | str]:
    """The results reduced to fit the model's window, and the aggregation call on them (or
    the reduction's error)."""
    results, error = reduce_results(rt, spec, model, ok, prefix)
    if error is not None:
        return [], error
    window = fitting_window(rt, model)
    messages = aggregate_messages(spec.aggregate_instruction, results, window, model.max_tokens)
    rt.store.set_phase(spec.job_id, f"final merge of {len(results)} results on {model.name}")
    return messages, _call(rt, spec, model, f"{prefix}aggregate", messages)


def fitting_window(rt: Runtime, model: ModelSpec) -> int:
    """The model's window in estimated tokens: the one the gateway stated when smaller than
    the catalog's, divided by how many of its tokens one estimated token is."""
    window = rt.windows.window(model.name, model.context_window)
    return int(window / rt.windows.scale(model.name))


def _call(
    rt: Runtime, spec: JobSpec, model: ModelSpec, slot: str, messages: list[Message]
) -> CallResult:
    request = CallRequest.of(spec.job_id, slot, model, messages, model.max_tokens,
                             budgeted=spec.budget_usd is not None, closing=True,
                             tenant=spec.tenant)  # fmt: skip
    return run_call(rt, request)


def reduce_results(
    rt: Runtime, spec: JobSpec, model: ModelSpec, results: list[NodeEnvelope], prefix: str = ""
) -> tuple[list[NodeEnvelope], str | None]:
    """Results that fit one aggregation call: reduced in groups, level by level, while they
    do not (a tree of intermediate summaries, each billed like any call)."""
    window = fitting_window(rt, model)
    budget = _results_budget(spec, model, window)
    for level in range(1, MAX_REDUCE_LEVELS + 1):
        sizes = [estimate_tokens(env.content) + 32 for env in results]
        if not needs_reduction(sizes, budget):
            return results, None
        groups = [[results[i] for i in group] for group in pack(sizes, budget)]
        left = levels_after(len(groups), model.max_tokens + 32, budget, MAX_REDUCE_LEVELS - level)
        phase = f"reduce level {level} of at most {level + left}: {len(groups)} calls"
        rt.store.set_phase(spec.job_id, phase)
        with ThreadPoolExecutor(max_workers=min(len(groups), REDUCE_PARALLELISM)) as pool:
            jobs = [
                pool.submit(_reduce, rt, spec, model, f"{prefix}reduce:{level}:{i}", window, g)
                for i, g in enumerate(groups)
            ]
            reduced = [job.result() for job in jobs]
        failed = [env for env in reduced if not env.ok]
        if failed:
            return results, f"reducing results (level {level}) failed: {failed[0].error}"
        results = reduced
    return results, None


def _results_budget(spec: JobSpec, model: ModelSpec, window: int) -> int:
    overhead = estimate_tokens(spec.aggregate_instruction) + 1024
    return max(window - model.max_tokens - overhead, 1024)


def _reduce(
    rt: Runtime,
    spec: JobSpec,
    model: ModelSpec,
    slot: str,
    window: int,
    group: list[NodeEnvelope],
) -> NodeEnvelope:
    messages = aggregate_messages(REDUCE_INSTRUCTION, group, window, model.max_tokens)
    outcome = _call(rt, spec, model, slot, messages)
    level, index = slot.rsplit(":", 2)[-2:]
    refs = ", ".join(env.input_ref for env in group)
    return NodeEnvelope(
        node_id=f"r{level}.{index}",
        input_ref=refs if len(refs) <= 200 else f"{group[0].input_ref} .. {group[-1].input_ref}",
        model=model.name,
        status="ok" if outcome.answer else "error",
        content=outcome.answer.content if outcome.answer else "",
        usage=outcome.usage,
        error_kind=outcome.error_kind,
        error=outcome.error,
    )
