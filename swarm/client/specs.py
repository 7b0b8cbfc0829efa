"""The JobSpec a submit or a plan stores, from the caller's inputs and keywords, and the
cost bound a budget is checked against before anything is stored."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from swarm.batch.plan import check_deadline
from swarm.batch.policy import batches_within
from swarm.calls.warmup import warmup_floor
from swarm.catalog import ModelSpec
from swarm.cost.batch import at_batch_price
from swarm.cost.budget import JobEstimate
from swarm.errors import InputError
from swarm.id_ranges import NodeIds, RefCollector
from swarm.jobs.defaults import DEFAULT_AGGREGATE
from swarm.jobs.estimate import ONE_CALL, AgentSteps, estimate_job
from swarm.records import DEFAULT_TENANT, InputItem, JobSpec, NodeTask
from swarm.settings import Settings
from swarm.sources.spool import StreamedInputs
from swarm.store import JobStore
from swarm.store.answer_lengths import typical_answers
from swarm.tokens import estimate_tokens


@dataclass(frozen=True)
class JobOptions:
    """The keywords a submit and a plan share, as the caller gave them."""

    budget_usd: float | None = None
    job_id: str | None = None
    tools: str | None = None
    deadline_s: float | None = None
    tenant: str = DEFAULT_TENANT
    max_tokens: int | None = None
    context: str | None = None

    def fields(self) -> dict[str, Any]:
        """The JobSpec fields these options set."""
        deadline = self.deadline_s
        return {
            "job_id": self.job_id or uuid.uuid4().hex,
            "submitted_at": time.time(),
            "budget_usd": self.budget_usd,
            "tools": self.tools,
            "deadline_at": None if deadline is None else time.time() + check_deadline(deadline),
            "tenant": self.tenant,
            "max_tokens": self.max_tokens,
            "context": self.context or None,
        }


def items_of(inputs: Sequence[InputItem | str]) -> Sequence[InputItem]:
    """The inputs as InputItems; StreamedInputs (swarm.sources.spool) as they are, read
    again on each pass instead of held in memory."""
    if not inputs:
        raise InputError("no inputs: a swarm needs at least one")
    if isinstance(inputs, StreamedInputs):
        return inputs
    return [
        item if isinstance(item, InputItem) else InputItem(ref=f"input:{i}", text=item)
        for i, item in enumerate(inputs)
    ]


def collect_refs(items: Iterable[InputItem]) -> Sequence[str]:
    """The items' refs, as runs of numbered refs when they are (swarm.id_ranges)."""
    refs = RefCollector()
    for item in items:
        refs.add(item.ref)
    return refs.result()


def agent_bound(
    settings: Settings, model: ModelSpec, max_tokens: int | None, tools: str | None
) -> AgentSteps:
    """How estimate_job bounds an agent node: max steps, each prompt longer than the last by
    the model's turn and an even share of the node's tool calls at their full output cap."""
    if tools is None:
        return ONE_CALL
    turn = max_tokens or model.max_tokens
    calls_per_step = -(-settings.agent_max_tool_calls // settings.agent_max_steps)
    outputs = estimate_tokens("x" * settings.tool_max_output_chars) * calls_per_step
    return AgentSteps(settings.agent_max_steps, turn + outputs)


@dataclass(frozen=True)
class Submitted:
    """What a submit asks for beyond the shared options: its inputs, instructions, models."""

    items: Sequence[InputItem]
    instruction: str
    aggregate_instruction: str
    model: ModelSpec
    aggregate: ModelSpec
    kind: str | None
    """The routed kind; None when the caller named the model."""


def submit_bound(
    settings: Settings, store: JobStore, job: Submitted, options: JobOptions
) -> JobEstimate:
    """The submitted job's cost bound (swarm.jobs.estimate): at the batch price when its
    nodes go into batch files."""
    bound = estimate_job(
        job.items,
        job.instruction,
        job.aggregate_instruction,
        job.model,
        job.aggregate,
        options.max_tokens,
        agent=agent_bound(settings, job.model, options.max_tokens, options.tools),
        context=options.context,
        warmup_min_tokens=warmup_floor(settings),
        **typical_answers(store, job.model, job.kind, job.aggregate),
    )
    if options.tools is None and job.model.batch and batches_within(options.deadline_s):
        return at_batch_price(bound, job.model)  # its nodes go into batch files
    return bound


def submit_spec(
    settings: Settings,
    job: Submitted,
    options: JobOptions,
    *,
    fallback_models: tuple[str, ...],
    output_schema: dict[str, Any] | None,
    tasks: Sequence[NodeTask] | None,
    tool_root: str | None,
) -> JobSpec:
    """The JobSpec of a submitted job: one node per item."""
    node_ids = NodeIds.for_count(len(job.items))
    return JobSpec(
        **options.fields(),
        instruction=job.instruction.strip(),
        aggregate_instruction=job.aggregate_instruction.strip() or DEFAULT_AGGREGATE,
        model=job.model.name,
        aggregate_model=job.aggregate.name,
        node_ids=node_ids,
        input_refs=collect_refs(job.items),
        min_success_ratio=settings.min_success_ratio,
        kind=job.kind,
        fallback_models=fallback_models,
        output_schema=output_schema,
        tasks=dict(zip(node_ids, tasks, strict=True)) if tasks else {},
        tool_root=tool_root,
    )


def plan_spec(
    settings: Settings,
    items: Sequence[InputItem],
    query: str,
    aggregate_instruction: str,
    models: tuple[ModelSpec, ModelSpec],
    options: JobOptions,
) -> JobSpec:
    """The JobSpec of a planned job: one node per document, run by the planner's model
    (``models``: the planner's and the aggregation's)."""
    planner, aggregate = models
    width = max(4, len(str(len(items) - 1)))
    return JobSpec(
        **options.fields(),
        instruction=query.strip(),
        aggregate_instruction=f"{aggregate_instruction}\n\nQuestion: {query.strip()}",
        model=planner.name,
        aggregate_model=aggregate.name,
        node_ids=tuple(f"d{i:0{width}d}" for i in range(len(items))),
        input_refs=tuple(item.ref for item in items),
        min_success_ratio=settings.min_success_ratio,
    )
