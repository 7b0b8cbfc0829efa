"""The job report: the contract's fields, built from stored envelopes and the ledger."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal

from pydantic import Field, GetCoreSchemaHandler
from pydantic_core import core_schema

from swarm.catalog import Catalog, ModelSpec
from swarm.cost.batch import batch_cost_usd, split_ledger_name
from swarm.cost.cache import cache_saved_usd
from swarm.cost.pricing import cost_usd
from swarm.jobs.tally import NodeCounts, tally
from swarm.positional import Positional
from swarm.records import Frozen, JobSpec, NodeEnvelope, Usage
from swarm.store.base import HedgeCounts, LedgerLine

JobStatus = Literal["succeeded", "partial", "failed", "budget_exceeded", "cancelled"]
COMPLETED: frozenset[str] = frozenset({"succeeded", "partial"})
"""Statuses for which `swarm run` exits 0."""


class ModelLine(Frozen):
    """Billed calls of one model in the report."""

    calls: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    cost_usd: float
    reasoning_tokens: int = 0
    """Of ``completion_tokens``, the reasoning ones the gateway reported."""
    rate_limited: int = 0
    """429 answers the gateway gave this job's calls of this model (they bill nothing)."""
    tool_calls: int = 0
    """Tool calls this model asked for in the job's agent nodes."""
    tool_call_validity: float | None = None
    """Share of those calls that parsed and matched their tool's schema (None: no calls)."""
    batch_calls: int = 0
    """Of ``calls``, the lines of batch files (billed at the batch price, swarm.batch)."""
    saved_usd: float = 0.0
    """What those lines cost less than the same calls live."""
    cache_saved_usd: float = 0.0
    """What the cached tokens cost less than at the full input price (batch lines: both
    prices times the batch discount)."""


NO_CALLS = ModelLine(calls=0, prompt_tokens=0, completion_tokens=0, cached_tokens=0, cost_usd=0.0)
"""A model's line before any billed call."""


class NodeList(Positional[NodeEnvelope]):
    """A report's nodes, each record built from its stored JSON when first read: a report
    read back from the job store validates no node until one is asked for, and dumps the
    ones never read as they were stored."""

    def __init__(self, items: Iterable[NodeEnvelope | Mapping[str, Any]] = ()) -> None:
        self._items: list[NodeEnvelope | Mapping[str, Any]] = list(items)

    @classmethod
    def of(cls, value: Any) -> NodeList:
        """The pydantic validator: a NodeList, or any list of envelopes or their dicts."""
        if isinstance(value, NodeList):
            return value
        if isinstance(value, list | tuple) and all(
            isinstance(item, NodeEnvelope | Mapping) for item in value
        ):
            return cls(value)
        raise ValueError("nodes must be a list of node records")

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        # serialized by the list's own dump (a subclass's: PagedNodes reads its pages)
        dump = core_schema.plain_serializer_function_ser_schema(lambda nodes: nodes.dump())
        return core_schema.no_info_plain_validator_function(
            cls.of,
            serialization=dump,
            json_schema_input_schema=handler.generate_schema(list[NodeEnvelope]),
        )

    def _at(self, position: int) -> NodeEnvelope:
        item = self._items[position]
        if not isinstance(item, NodeEnvelope):
            item = self._items[position] = node_record(item)
        return item

    def _slice(self, index: slice) -> list[NodeEnvelope]:
        return [self._at(i) for i in range(len(self))[index]]

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[NodeEnvelope]:
        return (self._at(i) for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, NodeList | list | tuple):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable cache inside, like a list

    def __repr__(self) -> str:
        return f"NodeList({len(self._items)} nodes)"

    def dump(self) -> list[dict[str, Any]]:
        """The nodes as JSON dicts (the ones never read, as stored)."""
        return [
            item.model_dump(mode="json") if isinstance(item, NodeEnvelope) else dict(item)
            for item in self._items
        ]


class Report(Frozen):
    """The final report of a job (``--json``, ``SwarmHandle.wait()`` and ``.report()``).

    ``to_dict()`` is the contract's JSON dict; ``nodes`` are built when first read.
    """

    job_id: str
    status: JobStatus
    total: int
    """Sub-agent nodes."""
    succeeded: int
    failed: int
    """Nodes that did not succeed, not counting the cancelled ones."""
    final: str
    """The aggregated text; empty when no aggregation ran."""
    wall_s: float
    """Submit to final report."""
    usage: Usage
    """Every billed call: sub-agents, aggregation and any helper calls."""
    cost_usd: float
    models: dict[str, ModelLine]
    nodes: NodeList
    """The sub-agents' envelopes, in input order."""
    aggregate_model: str
    failures_by_kind: dict[str, int] = Field(default_factory=dict)
    inputs_truncated: int = 0
    """Nodes whose input did not fit their model's context (middle summarised)."""
    inputs_cut_by_cap: int = 0
    """Of ``inputs_truncated``, those that would have fit but for the job's max_tokens
    (above the model's own, it left the input too little of the window)."""
    truncated: int = 0
    """Nodes whose answer stopped at max_tokens (finish_reason ``length``)."""
    capped: int = 0
    """Nodes whose answer was asked with a smaller max_tokens than the caller's (a local
    backend's pacing: ``max_tokens_sent`` of the node)."""
    error: str | None = None
    """Why the job failed or was cut short; None when it completed."""
    budget_usd: float | None = None
    """The job's budget cap, if it had one (cost_usd is what it spent)."""
    hedges_sent: int = 0
    """Duplicate requests sent for calls that ran past the hedge delay (swarm.calls.hedging)."""
    hedges_won: int = 0
    """Hedges whose answer came first (the original request was cancelled)."""
    cancelled: int = 0
    """Nodes that ended cancelled with their job (apart from ``failed``: total =
    succeeded + failed + cancelled)."""
    late_calls: int = 0
    """Calls the gateway billed that the ledger recorded after this report was written (a
    run fenced off while frozen or cut off records what it was billed once it wakes);
    usage, cost and the models' lines include them (see ``with_late_billing``)."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Report:
        """The report from its JSON dict (as stored, or as ``to_dict()`` gave it); fields
        this version does not know (a report written by newer workers) are left out."""
        return cls.model_validate(_known(cls, data))

    def to_dict(self) -> dict[str, Any]:
        """The report as the contract's JSON dict (what ``--json`` prints)."""
        return self.model_dump(mode="json")


def node_record(data: Mapping[str, Any]) -> NodeEnvelope:
    """A stored node's record (fields this version does not know are left out)."""
    return NodeEnvelope.model_validate(_known(NodeEnvelope, data))


def _known(record: type[Frozen], data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` without the keys that are not fields of ``record``."""
    fields = record.model_fields
    return {key: value for key, value in data.items() if key in fields}


def decide_status(
    total: int,
    succeeded: int,
    min_ratio: float,
    *,
    cancelled: bool,
    aggregated: bool,
    over_budget: bool = False,
) -> JobStatus:
    """The job status from node counts, whether the aggregation produced a text, and
    whether the budget stopped nodes from running."""
    if cancelled:
        return "cancelled"
    if over_budget:
        return "budget_exceeded"
    if total == 0 or succeeded / total < min_ratio or not aggregated:
        return "failed"
    return "succeeded" if succeeded == total else "partial"


def enough_succeeded(total: int, succeeded: int, min_ratio: float) -> bool:
    """True when the aggregation should run."""
    return succeeded > 0 and succeeded / total >= min_ratio


def model_lines(
    catalog: Catalog, ledger: dict[str, LedgerLine], rate_limited: Mapping[str, int] | None = None
) -> dict[str, ModelLine]:
    """Per-model calls, tokens and cost from the ledger, and 429s per model."""
    limited = {name: n for name, n in (rate_limited or {}).items() if n}
    lines = {
        name: ModelLine(
            calls=line.calls,
            prompt_tokens=line.usage.prompt_tokens,
            completion_tokens=line.usage.completion_tokens,
            cached_tokens=line.usage.cached_tokens,
            reasoning_tokens=line.usage.reasoning_tokens,
            cost_usd=round(cost_usd(catalog.model(name), line.usage), 6),
            rate_limited=limited.get(name, 0),
            cache_saved_usd=round(cache_saved_usd(catalog.model(name), line.usage), 6),
        )
        for name, line in ledger.items()
        if not split_ledger_name(name)[1]
    }
    for name, line in ledger.items():
        model, batched = split_ledger_name(name)
        if batched:
            lines[model] = with_batch_line(lines.get(model), catalog.model(model), line)
    for name, count in limited.items():
        if name not in lines:
            lines[name] = NO_CALLS.model_copy(update={"rate_limited": count})
    return lines


def with_batch_line(live: ModelLine | None, spec: ModelSpec, batch: LedgerLine) -> ModelLine:
    """A model's line with its batch lines added: their calls and tokens, their cost at
    the batch price, ``batch_calls``, and ``saved_usd`` against the live price."""
    base = live or NO_CALLS
    usage, paid = batch.usage, batch_cost_usd(spec, batch.usage)
    return base.model_copy(
        update={
            "calls": base.calls + batch.calls,
            "prompt_tokens": base.prompt_tokens + usage.prompt_tokens,
            "completion_tokens": base.completion_tokens + usage.completion_tokens,
            "cached_tokens": base.cached_tokens + usage.cached_tokens,
            "reasoning_tokens": base.reasoning_tokens + usage.reasoning_tokens,
            "cost_usd": round(base.cost_usd + paid, 6),
            "batch_calls": base.batch_calls + batch.calls,
            "saved_usd": round(base.saved_usd + cost_usd(spec, usage) - paid, 6),
            "cache_saved_usd": round(
                base.cache_saved_usd + cache_saved_usd(spec, usage, spec.batch_discount), 6
            ),
        }
    )


def with_tool_counts(
    lines: dict[str, ModelLine], calls: Mapping[str, int], invalid: Mapping[str, int]
) -> dict[str, ModelLine]:
    """Each model's line with its tool calls and the share of them that were valid."""
    out = dict(lines)
    for name, count in calls.items():
        if count and name in out:
            validity = round(1 - invalid.get(name, 0) / count, 4)
            update = {"tool_calls": count, "tool_call_validity": validity}
            out[name] = out[name].model_copy(update=update)
    return out


def build_report(
    spec: JobSpec,
    nodes: Sequence[NodeEnvelope],
    ledger: dict[str, LedgerLine],
    catalog: Catalog,
    *,
    status: JobStatus,
    final: str,
    wall_s: float,
    error: str | None = None,
    rate_limited: Mapping[str, int] | None = None,
    hedges: HedgeCounts | None = None,
    counts: NodeCounts | None = None,
) -> Report:
    """Assemble the report; usage and cost come from the ledger (every billed call), 429s
    per model from ``rate_limited``. ``counts``: the nodes' counts when ``nodes`` is not the
    job's node list (the aggregation counts them as it reads them in pages and gives no
    nodes: it stores them apart from the summary)."""
    counts = tally(nodes).counts() if counts is None else counts
    lines = model_lines(catalog, ledger, rate_limited)
    models = with_tool_counts(lines, counts.tool_calls, counts.tool_calls_invalid)
    return Report(
        job_id=spec.job_id,
        status=status,
        total=counts.total,
        succeeded=counts.succeeded,
        failed=counts.failed,
        cancelled=counts.cancelled,
        final=final,
        wall_s=round(wall_s, 3),
        usage=sum((line.usage for line in ledger.values()), Usage()),
        cost_usd=round(sum(m.cost_usd for m in models.values()), 6),
        models=models,
        nodes=NodeList(nodes),
        aggregate_model=spec.aggregate_model,
        failures_by_kind=counts.failures_by_kind,
        inputs_truncated=counts.inputs_truncated,
        inputs_cut_by_cap=counts.inputs_cut_by_cap,
        truncated=counts.truncated,
        capped=counts.capped,
        error=error,
        budget_usd=spec.budget_usd,
        hedges_sent=hedges.sent if hedges else 0,
        hedges_won=hedges.won if hedges else 0,
    )


def with_late_billing(
    report: dict[str, Any], ledger: dict[str, LedgerLine], catalog: Catalog
) -> dict[str, Any]:
    """``report`` (as stored) with its billing read again from the ledger when the ledger
    counts more calls than the report: a worker frozen or cut off while the gateway answered
    it wakes after the run that took over wrote the report, and the ledger records what the
    gateway billed it (once, by call id). The models' calls, tokens and cost, the usage and
    the cost become the ledger's, ``late_calls`` says how many calls came after; nodes,
    status and everything else stay as written."""
    written = sum(int(line.get("calls", 0)) for line in report.get("models", {}).values())
    billed = sum(line.calls for line in ledger.values())
    if billed <= written:
        return report
    models = dict(report.get("models", {}))
    fresh = model_lines(catalog, ledger)
    for name, line in fresh.items():
        kept = models.get(name, {})
        update = line.model_dump(mode="json", include=_BILLING_FIELDS)
        models[name] = {**line.model_dump(mode="json"), **kept, **update}
    usage = sum((line.usage for line in ledger.values()), Usage())
    return {
        **report,
        "models": models,
        "usage": usage.model_dump(mode="json"),
        "cost_usd": round(sum(float(m["cost_usd"]) for m in models.values()), 6),
        "late_calls": int(report.get("late_calls", 0)) + billed - written,
    }


_BILLING_FIELDS = {
    "calls", "prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens",
    "cost_usd", "batch_calls", "saved_usd", "cache_saved_usd",
}  # fmt: skip
"""A model line's fields that come from the ledger."""
