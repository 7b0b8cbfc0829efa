"""Budgets: validate a cap, and estimate what calls and whole jobs may cost before they run.

Estimates are upper bounds on purpose: the prompt is counted with swarm.tokens (all of it
at the uncached price) and the completion as the call's full ``max_tokens``. The same
figure is what a running call reserves against the job's budget, so a job whose pre-flight
estimate fits its budget is never cut short by it (unless the gateway counts more prompt
tokens than estimated, or retries bill answers that could not be used), and a job that
is cut spends at most its cap plus what the calls in flight spend beyond their estimate.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from swarm.catalog import ModelSpec
from swarm.cost.pricing import cost_nusd, usd_of_nusd, usd_text
from swarm.errors import BudgetExceededError, InputError
from swarm.records import Frozen, Usage
from swarm.tokens import estimate_messages


class JobEstimate(Frozen):
    """Upper bound of a job's cost before it runs."""

    nodes: int
    """Sub-agent calls."""
    prompt_tokens: int
    """Estimated prompt tokens of every call, the aggregation included."""
    completion_tokens: int
    """Completion tokens if every call used its whole max_tokens."""
    subagents_nusd: int
    """Bound of the sub-agents' cost, nano-USD."""
    aggregation_nusd: int
    """Bound of the aggregation's cost, nano-USD."""
    planner_nusd: int = 0
    """Bound of a planned job's planner calls, nano-USD (0: the job has no planner)."""
    cached_tokens: int = 0
    """Prompt tokens expected from the gateway's prompt cache (swarm.cost.cache): the
    shared prefix of every sub-agent call but the first, when the warm-up runs."""
    cache_saving_nusd: int = 0
    """What those hits should save against the bound, nano-USD."""
    expected_nusd: int | None = None
    """What the job is expected to cost, nano-USD: the same prompts, every answer at its
    model's typical length (swarm.store.answer_lengths); None when not estimated."""

    @property
    def total_usd(self) -> float:
        """The whole job's bound in USD."""
        return usd_of_nusd(self.subagents_nusd + self.aggregation_nusd + self.planner_nusd)

    @property
    def expected_usd(self) -> float | None:
        """What the job is expected to cost: answers of their typical length
        (``expected_nusd``; else the bound) less the expected prompt-cache hits' saving;
        None when neither was estimated. The budget checks the bound."""
        if self.expected_nusd is None and not self.cache_saving_nusd:
            return None
        base = self.expected_nusd
        if base is None:
            base = self.subagents_nusd + self.aggregation_nusd + self.planner_nusd
        return usd_of_nusd(max(0, base - self.cache_saving_nusd))


def check_budget(budget_usd: float | None) -> None:
    """InputError (one line) unless the budget is None or a positive, finite USD amount."""
    if budget_usd is None:
        return
    if not math.isfinite(budget_usd) or budget_usd <= 0:
        raise InputError(f"the budget must be a positive amount of USD, not {budget_usd!r}")


def prompt_estimate(contents: Iterable[str]) -> int:
    """Estimated prompt tokens of a chat request with these message contents."""
    return estimate_messages(contents)


def call_bound_nusd(model: ModelSpec, prompt_tokens: int, max_tokens: int) -> int:
    """Cost bound of one call: the whole prompt uncached plus ``max_tokens`` of output."""
    return cost_nusd(model, Usage(prompt_tokens=prompt_tokens, completion_tokens=max_tokens))


def messages_bound_nusd(
    model: ModelSpec, messages: Sequence[dict[str, str]], max_tokens: int
) -> int:
    """``call_bound_nusd`` of a chat request."""
    return call_bound_nusd(model, prompt_estimate(m["content"] for m in messages), max_tokens)


def preflight(estimate: JobEstimate, budget_usd: float | None, force: bool) -> None:
    """BudgetExceededError (one line) when the estimate passes the budget and not ``force``."""
    if budget_usd is None or force or estimate.total_usd <= budget_usd:
        return
    expected = estimate.expected_usd
    raise BudgetExceededError(
        f"estimated cost up to {usd_text(estimate.total_usd)} "
        + (f"(expected ~{usd_text(expected)}; " if expected is not None else "(")
        + f"{estimate.nodes} sub-agents "
        f"{usd_text(usd_of_nusd(estimate.subagents_nusd))} + aggregation "
        f"{usd_text(usd_of_nusd(estimate.aggregation_nusd))}) exceeds the budget of "
        f"{usd_text(budget_usd)}; raise the budget, lower max_tokens, or force it (--force) to "
        "run until the budget is spent"
    )
