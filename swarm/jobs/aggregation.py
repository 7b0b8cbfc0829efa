"""The chord callback's work: aggregate the successful results and write the report once."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import redis

from swarm import tracing
from swarm.calls.context_window import parse_overflow
from swarm.calls.request import CallResult, Message
from swarm.calls.runtime import Runtime
from swarm.catalog import AGGREGATE_KIND, ModelSpec
from swarm.cost.budget import messages_bound_nusd
from swarm.cost.pricing import usd_of_nusd, usd_text
from swarm.jobs.context_fit import fitting_window
from swarm.jobs.prompts import aggregate_messages
from swarm.jobs.reduce_calls import closing_call, reduce_results
from swarm.jobs.report import JobStatus, build_report, decide_status, enough_succeeded
from swarm.jobs.tally import node_pages, ok_nodes, tally
from swarm.records import ErrorKind, JobSpec, NodeEnvelope
from swarm.store import answer_lengths
from swarm.tokens import estimate_messages, estimate_tokens

log = logging.getLogger(__name__)


def run_aggregation(rt: Runtime, job_id: str) -> dict[str, Any]:
    """Aggregate (when enough nodes succeeded), store the report, and return the stored
    one's summary (its nodes are read in pages: JobStore.report_nodes).

    The nodes are read from the store a page at a time (SWARM_REPORT_PAGE_NODES): once
    to count them, once more for the merge when the successful ones do not fit one call,
    and once as the report's node list is written."""
    existing = rt.store.report_summary(job_id)
    if existing is not None:
        return existing
    spec = rt.store.spec(job_id)
    page = rt.settings.report_page_nodes
    rt.store.set_phase(job_id, "aggregating")
    counter = tally(env for nodes in node_pages(rt.store, spec, page) for env in nodes)
    counts = counter.counts()
    ran = counts.total - counts.budget_cut  # the success ratio counts the nodes the budget let run
    final, error, refused = "", None, False
    cancelled = rt.store.cancelled(job_id)
    if cancelled:
        error = "job cancelled"
    elif not enough_succeeded(ran, counts.succeeded, spec.min_success_ratio):
        error = (
            f"only {counts.succeeded} of {ran} sub-agents succeeded (aggregation needs "
            f"{spec.min_success_ratio:.0%}); no aggregation call was made"
        )
    else:
        ok = functools.partial(ok_nodes, rt.store, spec, page)
        with tracing.job_step(spec, "aggregate", nodes=counts.succeeded):
            final, error, refused = _aggregate(rt, spec, ok, counter.sizes)
    if counts.budget_cut and not cancelled:
        budget = usd_text(spec.budget_usd or 0)
        cut = f"{counts.budget_cut} of {counts.total} sub-agents never ran"
        note = f"budget {budget} reached: {cut}"
        error = f"{note}; {error}" if error else note
    status: JobStatus = decide_status(
        counts.total,
        counts.succeeded,
        spec.min_success_ratio,
        cancelled=cancelled,
        aggregated=bool(final),
        over_budget=counts.budget_cut > 0 or refused,
    )
    report = build_report(
        spec,
        (),
        rt.store.ledger(job_id),
        rt.catalog,
        status=status,
        final=final,
        wall_s=time.time() - spec.submitted_at,
        error=error,
        rate_limited=rt.store.rate_limited(job_id),
        hedges=rt.store.hedges(job_id),
        counts=counts,
    )
    summary = report.model_dump(mode="json", exclude={"nodes"})
    lines = (env.model_dump_json() for nodes in node_pages(rt.store, spec, page) for env in nodes)
    rt.store.save_report_parts(job_id, summary, lines, ok_stored=True)
    _learn_answers(rt, spec, counter.answers(), final)
    return rt.store.report_summary(job_id) or summary


def _learn_answers(
    rt: Runtime, spec: JobSpec, answers: dict[tuple[str, str], tuple[int, int]], final: str
) -> None:
    """Add the job's answer lengths to what pre-flights expect (swarm.store.answer_lengths);
    the aggregation's own as its text's estimate. A lost write only costs a sample."""
    if final:
        answers[(spec.aggregate_model, AGGREGATE_KIND)] = (estimate_tokens(final), 1)
    try:
        answer_lengths.record(rt.store, answers)
    except redis.RedisError as exc:
        log.warning("job %s: answer lengths not recorded (%s)", spec.job_id, exc)


OkNodes = Callable[[], Iterable[NodeEnvelope]]
"""The job's successful nodes, read from the store in pages each time it is called."""


def _aggregate(
    rt: Runtime, spec: JobSpec, ok: OkNodes, sizes: Sequence[int]
) -> tuple[str, str | None, bool]:
    """The final text, or an error; the flag is True when the budget refused the call.
    ``sizes``: the merge size of each successful node.

    A context-length 400 that states the window (a server smaller than the catalog says)
    teaches the model's window; the results are then reduced and merged again for it, once
    (the refused request was not billed)."""
    model = rt.catalog.model(spec.aggregate_model)
    messages, outcome = _merge(rt, spec, model, ok, sizes, "")
    if isinstance(outcome, str):
        return "", outcome, False
    overflow = parse_overflow(outcome.error or "")
    if outcome.error_kind is ErrorKind.CONTEXT_OVERFLOW and overflow is not None:
        rt.windows.learn(model.name, overflow.window)
        sent = estimate_messages(m["content"] for m in messages) + model.max_tokens
        rt.windows.calibrate(model.name, sent, overflow.requested or 0)
        log.debug("aggregation: %s has a window of %d tokens, merging again", model.name,
                  overflow.window)  # fmt: skip
        messages, outcome = _merge(rt, spec, model, ok, sizes, "refit:")
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
    rt: Runtime, spec: JobSpec, model: ModelSpec, ok: OkNodes, sizes: Sequence[int], prefix: str
) -> tuple[list[Message], CallResult | str]:
    """The results reduced to fit the model's window, and the aggregation call on them (or
    the reduction's error)."""
    results, error = reduce_results(rt, spec, model, ok, sizes, prefix)
    if error is not None:
        return [], error
    window = fitting_window(rt, model)
    messages = aggregate_messages(
        spec.aggregate_instruction, results, window, model.max_tokens, spec.context
    )
    rt.store.set_phase(spec.job_id, f"final merge of {len(results)} results on {model.name}")
    return messages, closing_call(rt, spec, model, f"{prefix}aggregate", messages)
