"""The reduce tree's calls: results condensed in groups, level by level, until they fit one
aggregation call.

The first level reads the successful nodes as it packs them (they stream from the job
store): a group is turned into its prompt as soon as it is full, and at most
``REDUCE_PARALLELISM`` prompts wait on their calls; the levels after it reduce the level
before's results, one short summary per group.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from swarm import tracing
from swarm.calls.reasoning import run_raising
from swarm.calls.request import CallRequest, CallResult, Message
from swarm.calls.runtime import Runtime
from swarm.catalog import AGGREGATE_KIND, ModelSpec
from swarm.jobs.context_fit import fitting_window
from swarm.jobs.prompts import aggregate_messages
from swarm.jobs.reduce import group_lengths, levels_after, needs_reduction
from swarm.jobs.tally import RESULT_OVERHEAD_TOKENS, result_tokens
from swarm.records import JobSpec, NodeEnvelope
from swarm.tokens import estimate_tokens

MAX_REDUCE_LEVELS = 6
REDUCE_PARALLELISM = 8
REDUCE_INSTRUCTION = (
    "Condense these sub-agent results for a later merge: keep every distinct finding, "
    "each with the inputs (input refs) it concerns; drop repetition."
)


def closing_call(
    rt: Runtime, spec: JobSpec, model: ModelSpec, slot: str, messages: list[Message]
) -> CallResult:
    """One call of the aggregation (a reduce or the final merge), billed to the job."""
    request = CallRequest.of(spec.job_id, slot, model, messages, model.max_tokens,
                             budgeted=spec.budget_usd is not None, closing=True,
                             tenant=spec.tenant, kind=AGGREGATE_KIND)  # fmt: skip
    return run_raising(rt, request)


def reduce_results(
    rt: Runtime,
    spec: JobSpec,
    model: ModelSpec,
    results: Callable[[], Iterable[NodeEnvelope]],
    sizes: Sequence[int],
    prefix: str = "",
) -> tuple[list[NodeEnvelope], str | None]:
    """Results that fit one aggregation call, or the reduction's error. ``results`` gives
    the successful nodes in order each time it is called (``sizes``: their result_tokens);
    they are read once, as their groups fill, or whole when they fit as they are."""
    window = fitting_window(rt, model)
    budget = _results_budget(spec, model, window)
    if not needs_reduction(sizes, budget):
        return list(results()), None
    items: Iterable[NodeEnvelope] = results()
    for level in range(1, MAX_REDUCE_LEVELS + 1):
        lengths = group_lengths(sizes, budget)
        left = levels_after(len(lengths), model.max_tokens + RESULT_OVERHEAD_TOKENS, budget,
                            MAX_REDUCE_LEVELS - level)  # fmt: skip
        phase = f"reduce level {level} of at most {level + left}: {len(lengths)} calls"
        rt.store.set_phase(spec.job_id, phase)
        slot = f"{prefix}reduce:{level}"
        with tracing.job_step(spec, f"reduce level {level}", groups=len(lengths)):
            reduced = _reduce_level(rt, spec, model, slot, window, _groups(items, lengths))
        failed = [env for env in reduced if not env.ok]
        if failed:
            return [], f"reducing results (level {level}) failed: {failed[0].error}"
        sizes = [result_tokens(env) for env in reduced]
        items = reduced
        if not needs_reduction(sizes, budget):
            break
    return list(items), None


def _groups(items: Iterable[NodeEnvelope], lengths: Sequence[int]) -> Iterator[list[NodeEnvelope]]:
    stream = iter(items)
    for length in lengths:
        yield list(itertools.islice(stream, length))


def _reduce_level(
    rt: Runtime,
    spec: JobSpec,
    model: ModelSpec,
    slot: str,
    window: int,
    groups: Iterator[list[NodeEnvelope]],
) -> list[NodeEnvelope]:
    """One reduce call per group, ``REDUCE_PARALLELISM`` at once; a group is read from
    ``groups`` when a call slot frees and held only as its prompt while its call runs."""
    reduced: list[NodeEnvelope] = []
    pending: deque[Future[NodeEnvelope]] = deque()
    with ThreadPoolExecutor(max_workers=REDUCE_PARALLELISM) as pool:
        for index, group in enumerate(groups):
            if len(pending) >= REDUCE_PARALLELISM:
                reduced.append(pending.popleft().result())
            messages = aggregate_messages(
                REDUCE_INSTRUCTION, group, window, model.max_tokens, spec.context
            )
            args = (rt, spec, model, f"{slot}:{index}", messages, _refs(group))
            pending.append(pool.submit(tracing.carried(_reduce), *args))
        reduced.extend(job.result() for job in pending)
    return reduced


def _refs(group: Sequence[NodeEnvelope]) -> str:
    """The input refs a reduced result stands for (the first and last of a long list)."""
    refs = ", ".join(env.input_ref for env in group)
    return refs if len(refs) <= 200 else f"{group[0].input_ref} .. {group[-1].input_ref}"


def _results_budget(spec: JobSpec, model: ModelSpec, window: int) -> int:
    overhead = estimate_tokens(spec.aggregate_instruction) + 1024
    return max(window - model.max_tokens - overhead, 1024)


def _reduce(
    rt: Runtime,
    spec: JobSpec,
    model: ModelSpec,
    slot: str,
    messages: list[Message],
    refs: str,
) -> NodeEnvelope:
    outcome = closing_call(rt, spec, model, slot, messages)
    level, index = slot.rsplit(":", 2)[-2:]
    return NodeEnvelope(
        node_id=f"r{level}.{index}",
        input_ref=refs,
        model=model.name,
        status="ok" if outcome.answer else "error",
        content=outcome.answer.content if outcome.answer else "",
        usage=outcome.usage,
        error_kind=outcome.error_kind,
        error=outcome.error,
    )
