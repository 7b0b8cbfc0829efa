"""A job's cost bound before it runs: one call per input, then the aggregation; the same
for a planned job (the planner's calls, then a plan of one sub-task per document) and for
a resumed job (the nodes it runs again, then the aggregation over every node)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from swarm.catalog import AGGREGATE_KIND, Catalog, ModelSpec
from swarm.cost.budget import JobEstimate, call_bound_nusd, prompt_estimate
from swarm.cost.cache import cache_saving_nusd, expected_cached_tokens
from swarm.jobs.plan_schema import plannable_kinds, planner_messages
from swarm.jobs.prompts import AGGREGATOR_ROLE, SUBAGENT_ROLE, shared_prefix, subagent_messages
from swarm.records import InputItem, JobSpec
from swarm.tokens import estimate_tokens

RESULT_TAG_TOKENS = 24
"""Tokens the aggregation prompt adds around each quoted result (the <result> tag)."""


@dataclass(frozen=True)
class AgentSteps:
    """How many calls a node makes at most, and how its prompts grow: the default is a node
    without tools (one call)."""

    steps: int = 1
    """Model calls of an agent node at most (SWARM_AGENT_MAX_STEPS)."""
    growth_tokens: int = 0
    """How much longer each prompt is than the one before at most: the model's turn and
    the tool results it got."""

    def prompts(self, first: int) -> list[int]:
        """The prompt bound of each call of a node whose first prompt is ``first`` tokens."""
        return [first + k * self.growth_tokens for k in range(self.steps)]


ONE_CALL = AgentSteps()
"""A node without tools."""


def estimate_job(
    items: Sequence[InputItem],
    instruction: str,
    aggregate_instruction: str,
    model: ModelSpec,
    aggregate_model: ModelSpec,
    max_tokens: int | None = None,
    *,
    agent: AgentSteps = ONE_CALL,
    context: str | None = None,
    warmup_min_tokens: int | None = None,
    answer_tokens: int | None = None,
    aggregate_answer_tokens: int | None = None,
) -> JobEstimate:
    """Bound of a job's cost: one call per input, then the aggregation over every result.

    An agent node makes the calls ``agent`` bounds. ``context`` is the job's shared
    context; ``warmup_min_tokens`` the warm-up's floor (SWARM_CACHE_WARMUP_MIN_TOKENS; None:
    no warm-up): when the warm-up runs, the estimate also counts the prompt-cache hits of
    the shared prefix (swarm.cost.cache). With the models' typical answer lengths
    (``answer_tokens``, ``aggregate_answer_tokens``), the estimate also carries the expected
    cost: the same prompts, answers that long (at most their cap), the aggregation quoting
    results that long.
    """
    node_max = max_tokens or model.max_tokens
    firsts = [_node_prompt(instruction, item.ref, item.text, context) for item in items]
    prompts = [p for first in firsts for p in agent.prompts(first)]
    agg_max = aggregate_model.max_tokens
    context_tokens = estimate_tokens(context or "")

    def cost(answer: int, agg_answer: int) -> tuple[int, int, int]:
        agg_prompt = _aggregation_prompt(aggregate_instruction, aggregate_model, len(items), answer)
        agg_prompt += context_tokens
        nodes = sum(call_bound_nusd(model, p, answer) for p in prompts)
        return agg_prompt, nodes, call_bound_nusd(aggregate_model, agg_prompt, agg_answer)

    agg_prompt, nodes_nusd, aggregation_nusd = cost(node_max, agg_max)
    expected = None
    if answer_tokens is not None or aggregate_answer_tokens is not None:
        _, typical_nodes, typical_aggregation = cost(
            min(answer_tokens or node_max, node_max),
            min(aggregate_answer_tokens or agg_max, agg_max),
        )
        expected = typical_nodes + typical_aggregation
    prefix = estimate_tokens(shared_prefix(SUBAGENT_ROLE, instruction, context))
    cached = expected_cached_tokens(
        model, prefix, len(prompts), warmup_min_tokens=warmup_min_tokens
    )
    return JobEstimate(
        nodes=len(items),
        prompt_tokens=sum(prompts) + agg_prompt,
        completion_tokens=len(prompts) * node_max + agg_max,
        subagents_nusd=nodes_nusd,
        aggregation_nusd=aggregation_nusd,
        expected_nusd=expected,
        cached_tokens=cached,
        cache_saving_nusd=cache_saving_nusd(model, cached),
    )


def estimate_plan(
    items: Sequence[InputItem],
    query: str,
    aggregate_instruction: str,
    catalog: Catalog,
    planner: ModelSpec,
    attempts: int,
    max_tokens: int | None = None,
    *,
    agent: AgentSteps = ONE_CALL,
) -> JobEstimate:
    """Bound of a planned job whose plan gives each document one sub-task: ``attempts``
    planner calls, each document on the priciest model a plan may route it to (the calls
    ``agent`` bounds, as in estimate_job), then the aggregation. The plan decides the
    calls: one with more sub-tasks costs more."""
    kinds = plannable_kinds(catalog)
    models = list({catalog.route(kind).name: catalog.route(kind) for kind in kinds}.values())
    plan_prompt = prompt_estimate(m["content"] for m in planner_messages(query, items, kinds))
    node_max = max(max_tokens or m.max_tokens for m in models)
    firsts = [_node_prompt(query, item.ref, item.text) for item in items]
    prompts = [p for first in firsts for p in agent.prompts(first)]
    nodes = [
        max(call_bound_nusd(m, p, max_tokens or m.max_tokens) for m in models) for p in prompts
    ]
    aggregate = catalog.route(AGGREGATE_KIND)
    agg_prompt = _aggregation_prompt(aggregate_instruction, aggregate, len(items), node_max)
    return JobEstimate(
        nodes=len(items),
        prompt_tokens=attempts * plan_prompt + sum(prompts) + agg_prompt,
        completion_tokens=attempts * planner.max_tokens
        + len(prompts) * node_max
        + aggregate.max_tokens,
        subagents_nusd=sum(nodes),
        aggregation_nusd=call_bound_nusd(aggregate, agg_prompt, aggregate.max_tokens),
        planner_nusd=attempts * call_bound_nusd(planner, plan_prompt, planner.max_tokens),
    )


def estimate_rerun(
    spec: JobSpec,
    texts: Mapping[str, str],
    catalog: Catalog,
    *,
    agent: AgentSteps = ONE_CALL,
) -> JobEstimate:
    """Bound of a resume: the nodes in ``texts`` (node id -> input text) run again, each
    on its own task's model, then the aggregation over every node of the job."""
    refs = dict(zip(spec.node_ids, spec.input_refs, strict=True))
    calls = []
    for node_id, text in texts.items():
        task = spec.task(node_id)
        model = catalog.model(task.model)
        first = _node_prompt(task.instruction, refs[node_id], text, spec.context)
        node_max = spec.max_tokens or model.max_tokens
        calls += [(model, prompt, node_max) for prompt in agent.prompts(first)]
    aggregate = catalog.model(spec.aggregate_model)
    result_max = spec.max_tokens or max([c[0].max_tokens for c in calls], default=0)
    agg_prompt = _aggregation_prompt(
        spec.aggregate_instruction, aggregate, len(spec.node_ids), result_max
    )
    return JobEstimate(
        nodes=len(texts),
        prompt_tokens=sum(c[1] for c in calls) + agg_prompt,
        completion_tokens=sum(c[2] for c in calls) + aggregate.max_tokens,
        subagents_nusd=sum(call_bound_nusd(*call) for call in calls),
        aggregation_nusd=call_bound_nusd(aggregate, agg_prompt, aggregate.max_tokens),
    )


def _node_prompt(instruction: str, ref: str, text: str, context: str | None = None) -> int:
    messages = subagent_messages(instruction, ref, text, context)
    return prompt_estimate(m["content"] for m in messages)


def _aggregation_prompt(
    instruction: str, model: ModelSpec, results: int, result_max_tokens: int
) -> int:
    """The aggregation's prompt bound: its role and instruction, every result at its cap,
    at most what the aggregation model's window leaves for the prompt."""
    quoted = results * (result_max_tokens + RESULT_TAG_TOKENS)
    fixed = estimate_tokens(AGGREGATOR_ROLE) + estimate_tokens(instruction)
    return min(fixed + quoted, model.context_window - model.max_tokens)
