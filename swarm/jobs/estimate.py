"""A job's cost bound before it runs: one call per input, then the aggregation."""

from __future__ import annotations

from collections.abc import Sequence

from swarm.catalog import ModelSpec
from swarm.cost.budget import JobEstimate, call_bound_nusd, prompt_estimate
from swarm.jobs.prompts import AGGREGATOR_ROLE, subagent_messages
from swarm.records import InputItem
from swarm.tokens import estimate_tokens

RESULT_TAG_TOKENS = 24
"""Tokens the aggregation prompt adds around each quoted result (the <result> tag)."""


def estimate_job(
    items: Sequence[InputItem],
    instruction: str,
    aggregate_instruction: str,
    model: ModelSpec,
    aggregate_model: ModelSpec,
    max_tokens: int | None = None,
    *,
    steps: int = 1,
    step_growth_tokens: int = 0,
) -> JobEstimate:
    """Bound of a job's cost: one call per input, then the aggregation over every result.

    An agent node makes up to ``steps`` calls, each prompt longer than the one before by at
    most ``step_growth_tokens`` (the model's turn and the tool results it got).
    """
    node_max = max_tokens or model.max_tokens
    firsts = [
        prompt_estimate(m["content"] for m in subagent_messages(instruction, item.ref, item.text))
        for item in items
    ]
    prompts = [p + k * step_growth_tokens for p in firsts for k in range(steps)]
    agg_prompt = min(
        estimate_tokens(AGGREGATOR_ROLE)
        + estimate_tokens(aggregate_instruction)
        + len(items) * (node_max + RESULT_TAG_TOKENS),
        aggregate_model.context_window - aggregate_model.max_tokens,
    )
    return JobEstimate(
        nodes=len(items),
        prompt_tokens=sum(prompts) + agg_prompt,
        completion_tokens=len(prompts) * node_max + aggregate_model.max_tokens,
        subagents_nusd=sum(call_bound_nusd(model, p, node_max) for p in prompts),
        aggregation_nusd=call_bound_nusd(aggregate_model, agg_prompt, aggregate_model.max_tokens),
    )
