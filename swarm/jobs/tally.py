"""A job's nodes read from the store a page at a time, and the report's counts over them.

The aggregation of a large job never holds every envelope: it reads them in pages of
``SWARM_REPORT_PAGE_NODES`` (node order, a node that has none stored becomes an error),
counts what the report needs as they pass (``Tally``), and reads them again for the merge
and for the report's node list.
"""

from __future__ import annotations

import itertools
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping

from pydantic import Field

from swarm.records import ErrorKind, Frozen, JobSpec, NodeEnvelope
from swarm.store.answer_lengths import ANY_KIND
from swarm.store.base import JobStore
from swarm.tokens import estimate_tokens

RESULT_OVERHEAD_TOKENS = 32
"""Tokens a result takes in a merge prompt beyond its content (its ref and separators)."""


def result_tokens(env: NodeEnvelope) -> int:
    """The estimated tokens of one result in a merge or reduce prompt."""
    return estimate_tokens(env.content) + RESULT_OVERHEAD_TOKENS


class NodeCounts(Frozen):
    """What the report counts over a job's nodes."""

    total: int = 0
    succeeded: int = 0
    budget_cut: int = 0
    """Nodes the budget stopped before they ran."""
    failures_by_kind: dict[str, int] = Field(default_factory=dict)
    inputs_truncated: int = 0
    inputs_cut_by_cap: int = 0
    """Of inputs_truncated, those the job's max_tokens left too little room."""
    truncated: int = 0
    capped: int = 0
    tool_calls: dict[str, int] = Field(default_factory=dict)
    """Tool calls per model."""
    tool_calls_invalid: dict[str, int] = Field(default_factory=dict)

    @property
    def cancelled(self) -> int:
        """Nodes that ended cancelled with their job (or never ran: missing_node)."""
        return self.failures_by_kind.get(ErrorKind.CANCELLED.value, 0)

    @property
    def failed(self) -> int:
        """Nodes that did not succeed, the cancelled ones apart."""
        return self.total - self.succeeded - self.cancelled


class Tally:
    """Counts nodes as they pass, and the merge size of each successful one (4 bytes a
    node: the reduce levels are planned from these sizes)."""

    def __init__(self) -> None:
        self.total = self.succeeded = self.cut = 0
        self.inputs_truncated = self.inputs_cut_by_cap = self.truncated = self.capped = 0
        self.failures: Counter[str] = Counter()
        self.tool_calls: Counter[str] = Counter()
        self.tool_invalid: Counter[str] = Counter()
        self.answer_tokens: Counter[tuple[str, str]] = Counter()
        """Completion tokens of the successful nodes per (model, kind) (answer_lengths)."""
        self.answer_calls: Counter[tuple[str, str]] = Counter()
        self.sizes = array("I")
        """result_tokens of each successful node, in node order."""

    def add(self, env: NodeEnvelope) -> None:
        self.total += 1
        if env.ok:
            self.succeeded += 1
            self.sizes.append(result_tokens(env))
            key = (env.model, env.kind or ANY_KIND)
            self.answer_tokens[key] += env.usage.completion_tokens
            self.answer_calls[key] += 1
        else:
            self.failures[str(env.error_kind)] += 1
            self.cut += env.error_kind is ErrorKind.BUDGET_EXCEEDED
        self.inputs_truncated += env.truncation is not None
        self.inputs_cut_by_cap += (
            env.truncation is not None and env.truncation.max_tokens is not None
        )
        self.truncated += env.finish_reason == "length"
        self.capped += env.max_tokens_sent is not None
        self.tool_calls[env.model] += env.tool_calls
        self.tool_invalid[env.model] += env.tool_calls_invalid

    def answers(self) -> dict[tuple[str, str], tuple[int, int]]:
        """(model, kind) -> (completion tokens, answers) of the successful nodes."""
        return {key: (self.answer_tokens[key], calls) for key, calls in self.answer_calls.items()}

    def counts(self) -> NodeCounts:
        return NodeCounts(
            total=self.total,
            succeeded=self.succeeded,
            budget_cut=self.cut,
            failures_by_kind=dict(self.failures),
            inputs_truncated=self.inputs_truncated,
            inputs_cut_by_cap=self.inputs_cut_by_cap,
            truncated=self.truncated,
            capped=self.capped,
            tool_calls={m: n for m, n in self.tool_calls.items() if n},
            tool_calls_invalid={m: n for m, n in self.tool_invalid.items() if n},
        )


def tally(nodes: Iterable[NodeEnvelope]) -> Tally:
    """The tally of ``nodes``."""
    counter = Tally()
    for env in nodes:
        counter.add(env)
    return counter


def missing_node(spec: JobSpec, node_id: str, ref: str) -> NodeEnvelope:
    """The error envelope of a node that has none stored."""
    return NodeEnvelope(
        node_id=node_id,
        input_ref=ref,
        model=spec.model,
        status="error",
        error_kind=ErrorKind.CANCELLED,
        error="node did not run",
    )


def complete_page(
    spec: JobSpec, ids: Iterable[tuple[str, str]], stored: Mapping[str, NodeEnvelope]
) -> list[NodeEnvelope]:
    """One envelope per (node id, ref) of ``ids``: the stored one, or ``missing_node``."""
    return [stored.get(node_id) or missing_node(spec, node_id, ref) for node_id, ref in ids]


def node_pages(store: JobStore, spec: JobSpec, page: int) -> Iterator[list[NodeEnvelope]]:
    """Every node of the job in node order, ``page`` at a time (one read of the store each)."""
    pairs = zip(spec.node_ids, spec.input_refs, strict=True)
    while chunk := list(itertools.islice(pairs, page)):
        yield complete_page(spec, chunk, store.envelopes_of(spec.job_id, [n for n, _ in chunk]))


def ok_nodes(store: JobStore, spec: JobSpec, page: int) -> Iterator[NodeEnvelope]:
    """The job's successful nodes in node order, read ``page`` at a time."""
    for nodes in node_pages(store, spec, page):
        yield from (env for env in nodes if env.ok)
