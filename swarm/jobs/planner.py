"""The planner step of a planned job: plan, then turn the plan into nodes.

A planned job is stored with one node per document; the `swarm.plan` task asks the plan
model for a JSON plan (swarm.jobs.plan_schema), repairs or retries it once, and replaces the job's
nodes with the plan's routed sub-tasks. Its adapter then fans out the chord. A plan that is
still unusable ends the job ``failed`` with the planner's error and no sub-agent call.
"""

from __future__ import annotations

import time

from swarm.calls.reasoning import run_raising
from swarm.calls.request import CallRequest
from swarm.calls.runtime import Runtime
from swarm.catalog import Catalog
from swarm.jobs.plan_schema import Plan, parse_plan, plannable_kinds, planner_messages
from swarm.jobs.report import build_report
from swarm.jobs.structured import BadOutputError
from swarm.records import InputItem, JobSpec, NodeTask

PLAN_KIND = "plan"
PLAN_ATTEMPTS = 2
"""The plan call, and one retry told what was wrong."""


def run_plan(rt: Runtime, job_id: str) -> JobSpec | None:
    """The planned spec (stored), or None when planning failed (the report is written)."""
    spec = rt.store.spec(job_id)
    if spec.tasks:  # planned already (a redelivered plan task): fan out the same plan
        return spec
    docs = [
        InputItem(ref=ref, text=rt.store.input_text(job_id, node_id))
        for node_id, ref in zip(spec.node_ids, spec.input_refs, strict=True)
    ]
    plan, error = _ask(rt, spec, docs)
    if plan is None:
        _fail(rt, spec, f"the planner gave no usable plan: {error}")
        return None
    planned = planned_spec(spec, plan, rt.catalog)
    texts = {d.ref: d.text for d in docs}
    rt.store.update_job(planned, [texts[ref] for ref in planned.input_refs])
    return planned


def _ask(rt: Runtime, spec: JobSpec, docs: list[InputItem]) -> tuple[Plan | None, str]:
    model = rt.catalog.route(PLAN_KIND)
    kinds = plannable_kinds(rt.catalog)
    refs = [d.ref for d in docs]
    error = ""
    for attempt in range(1, PLAN_ATTEMPTS + 1):
        messages = planner_messages(spec.instruction, docs, kinds, error or None)
        request = CallRequest.of(spec.job_id, f"plan:{attempt}", model, messages,
                                 model.max_tokens, budgeted=spec.budget_usd is not None,
                                 json_mode=True, tenant=spec.tenant, kind=PLAN_KIND)  # fmt: skip
        outcome = run_raising(rt, request)
        if outcome.answer is None:
            return None, f"{outcome.error_kind}: {outcome.error}"
        try:
            return parse_plan(outcome.answer.content, refs, kinds), ""
        except BadOutputError as exc:
            error = str(exc)
    return None, error


def planned_spec(spec: JobSpec, plan: Plan, catalog: Catalog) -> JobSpec:
    """The job's spec with one node per planned sub-task, each routed by its kind."""
    width = max(4, len(str(len(plan.subtasks) - 1)))
    node_ids = tuple(f"n{i:0{width}d}" for i in range(len(plan.subtasks)))
    tasks = {
        node_id: NodeTask(
            model=catalog.routing[sub.kind][0],
            instruction=f"{sub.instruction}\n\n(Overall question: {spec.instruction})",
            kind=sub.kind,
            fallback_models=catalog.routing[sub.kind][1:],
        )
        for node_id, sub in zip(node_ids, plan.subtasks, strict=True)
    }
    first = tasks[node_ids[0]]
    return JobSpec.model_validate(
        {
            **spec.model_dump(),
            "node_ids": node_ids,
            "input_refs": tuple(sub.input_ref for sub in plan.subtasks),
            "tasks": tasks,
            "model": first.model,
            "kind": first.kind,
        }
    )


def _fail(rt: Runtime, spec: JobSpec, error: str) -> None:
    report = build_report(
        spec,
        [],
        rt.store.ledger(spec.job_id),
        rt.catalog,
        status="failed",
        final="",
        wall_s=time.time() - spec.submitted_at,
        error=error,
    )
    rt.store.save_report(spec.job_id, report.model_dump(mode="json"))
