"""Immutable records that cross process boundaries as JSON: usage, node envelopes, specs.

Everything here is a frozen pydantic model, so it validates on the way in (from Redis or a
task result) and serialises with ``model_dump(mode="json")`` on the way out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    PrivateAttr,
    WithJsonSchema,
)

from swarm import id_ranges
from swarm.errors import InputError
from swarm.id_ranges import NodeIds

DEFAULT_TENANT = "default"
"""The tenant of a job submitted without one."""
TENANT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
"""A tenant name: a letter or digit, then up to 63 letters, digits, ``_``, ``.`` or ``-``."""
TenantName = Annotated[str, Field(pattern=TENANT_PATTERN)]
NodeIdSeq = Annotated[
    Sequence[str],
    PlainValidator(id_ranges.parse_ids),
    PlainSerializer(id_ranges.dump),
    WithJsonSchema({"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "object"}]}),
]
"""Node ids: a tuple of strings or a range (swarm.id_ranges.NodeIds)."""
RefSeq = Annotated[
    Sequence[str],
    PlainValidator(id_ranges.parse_refs),
    PlainSerializer(id_ranges.dump),
    WithJsonSchema({"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "object"}]}),
]
"""Input refs: a tuple of strings or runs of numbered refs (swarm.id_ranges.RefRuns)."""


def check_tenant(name: str) -> str:
    """``name`` when it is a valid tenant name, else InputError."""
    if not re.match(TENANT_PATTERN, name):
        raise InputError(
            f"invalid tenant {name!r}: a letter or digit, then letters, digits, _ . or -"
            " (at most 64 characters)"
        )
    return name


class Frozen(BaseModel):
    """Base of the records: immutable, and strict about unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class ErrorKind(StrEnum):
    """Why a call or node failed; stable strings that appear in reports."""

    RATE_LIMITED = "rate_limited"
    TIMEOUT = "timeout"
    SERVER_ERROR = "server_error"
    CONNECTION = "connection"
    BAD_RESPONSE = "bad_response"
    BAD_REQUEST = "bad_request"
    AUTH = "auth"
    NOT_FOUND = "not_found"
    CONTEXT_OVERFLOW = "context_overflow"
    CANCELLED = "cancelled"
    BUDGET_EXCEEDED = "budget_exceeded"
    BAD_OUTPUT = "bad_output"
    PLAN_FAILED = "plan_failed"
    TOOL_LOOP = "tool_loop"
    """An agent node repeated a tool call, or ran out of steps, tool calls or tokens."""
    TOOLS_UNAVAILABLE = "tools_unavailable"
    """The node's toolset cannot be loaded on the worker that ran it."""
    INSUFFICIENT_BALANCE = "insufficient_balance"
    """The provider refused for the account's balance or quota (Moonshot
    ``exceeded_current_quota_error``, OpenAI ``insufficient_quota``, DeepSeek 402): final for
    its backend until a person pays (swarm.calls.backend_health)."""
    DAILY_LIMIT = "daily_limit"
    """A per-day limit (Moonshot's TPD) whose reset comes after the call may wait."""
    OVERLOADED = "overloaded"
    """The provider is overloaded (``engine_overloaded_error``): retried with backoff, never
    taken as the tenant's rate limit."""
    CONTENT_FILTER = "content_filter"
    """The provider's content filter refused the input: final for its node."""
    OUTAGE = "outage"
    """The backend's gateway was unreachable for longer than the outage window."""
    REASONING_CUT = "reasoning_cut"
    """The answer stopped at its completion cap (finish_reason ``length``) with no content:
    a thinking model's reasoning used the whole ``max_tokens``."""
    INTERNAL = "internal"


class Usage(Frozen):
    """Tokens a gateway billed, as its ``usage`` field reported them."""

    prompt_tokens: int = 0
    """Prompt tokens, cached ones included."""
    completion_tokens: int = 0
    """Generated tokens, reasoning ones included."""
    cached_tokens: int = 0
    """Prompt tokens served from the gateway's prompt cache (billed at the cached price)."""
    reasoning_tokens: int = 0
    """Of ``completion_tokens``, the model's reasoning (billed as completion tokens), where
    the gateway reports them (swarm.calls.usage)."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens


NodeStatus = Literal["ok", "error"]


class NodeEnvelope(Frozen):
    """What one sub-agent produced. A sub-agent never raises: failures are envelopes too."""

    node_id: str
    """Position-derived id inside the job, e.g. ``n0042``."""
    input_ref: str
    """Where the input came from: a file path, ``stdin:7``, ``demo:pr-12``."""
    model: str
    """Catalog name of the model that answered (or was last tried)."""
    status: NodeStatus
    """``ok`` or ``error``."""
    content: str = ""
    """The model's answer; empty on error."""
    reasoning: str = ""
    """The answer's ``reasoning_content`` (a thinking model's reasoning), apart from
    ``content``: never quoted to the aggregation."""
    usage: Usage = Field(default_factory=Usage)
    """Tokens billed for this node, over all its attempts."""
    latency_ms: int = 0
    """Wall time of the node's calls, retries and backoff included."""
    attempts: int = 0
    """Gateway calls made, first included."""
    error_kind: ErrorKind | None = None
    """Classification of the last error when status is ``error``."""
    error: str | None = None
    """One-line description of the last error (never a key or a prompt)."""
    finish_reason: str | None = None
    """The gateway's finish_reason of the answer (``length`` means the answer was cut)."""
    max_tokens_sent: int | None = None
    """The answer's request was sent this max_tokens, smaller than asked, because the
    model's measured speed said the asked answer would not end within the node timeout
    (a local backend's pacing); None: sent as asked."""
    usage_missing: bool = False
    """True when the gateway's answer had no usage field: this node's tokens and cost are
    unknown (counted as 0 in the usage, the ledger and the budget)."""
    kind: str | None = None
    """Task kind of the node (routing), when the job routes by kind."""
    truncation: Truncation | None = None
    """Set when the input did not fit the model's context and its middle was summarised."""
    steps: int = 0
    """Model calls of an agent node (0 for a node without tools)."""
    tool_calls: int = 0
    """Tool calls the model asked for."""
    tool_errors: int = 0
    """Tool calls answered with an error: malformed, unknown, raising or timed out."""
    tool_calls_invalid: int = 0
    """Tool calls that did not parse or match a tool's schema (part of ``tool_errors``)."""
    tools_used: tuple[str, ...] = ()
    """Each tool call in order, as ``name(arguments)`` (short)."""
    via: Literal["live", "batch"] = "live"
    """``batch`` when the node's answer came from a batch file (a job with a deadline,
    swarm.batch), ``live`` when from a live call."""

    @property
    def ok(self) -> bool:
        """True when the node produced an answer."""
        return self.status == "ok"


class ToolCall(Frozen):
    """One tool call a model asked for (its arguments as the raw JSON text it sent)."""

    id: str
    """The call's id, echoed by the tool message that answers it."""
    name: str
    """Tool name."""
    arguments: str
    """Arguments as sent: a JSON object's text, or whatever the model produced."""


class InputItem(Frozen):
    """One input of a job, before fan-out."""

    ref: str
    """Human-readable origin (path, stdin line, generated name)."""
    text: str
    """The input's content."""


class Truncation(Frozen):
    """What context fitting did to one input (an input too long for the model's window)."""

    original_chars: int
    """Characters of the input as given."""
    original_tokens: int
    """Estimated tokens of the input as given."""
    kept_chars: int
    """Characters kept verbatim (head plus tail)."""
    summarized_chars: int
    """Characters of the middle replaced by a summary."""
    summary_chars: int = 0
    """Characters of the summary that replaced them (0 when the summary call failed)."""
    max_tokens: int | None = None
    """The job's answer cap (max_tokens, above the model's own) when it is why the input
    did not fit: with the model's own cap the input would have been sent whole."""


class NodeTask(Frozen):
    """What one node does: its model (and fallbacks), instruction and output format."""

    model: str
    """Catalog model tried first."""
    instruction: str
    """What the sub-agent does with its input."""
    kind: str | None = None
    """Routing kind the model was chosen by."""
    fallback_models: tuple[str, ...] = ()
    """Models tried in turn when the first keeps failing after its retries."""
    output_schema: dict[str, Any] | None = None
    """JSON schema the answer must follow (JSON mode, repaired and validated)."""

    def models(self) -> tuple[str, ...]:
        """The model and its fallbacks, each once."""
        return tuple(dict.fromkeys((self.model, *self.fallback_models)))


SPEC_OPTIONAL = ("trace_parent", "context")
"""JobSpec fields added after its first release, None unless a job uses them."""


class JobSpec(Frozen):
    """Everything a worker needs to run a job's nodes; stored once in the job store."""

    job_id: str
    """Unique id of the job."""
    instruction: str
    """What every sub-agent does with its input."""
    aggregate_instruction: str
    """What the aggregation does with the sub-agents' results."""
    model: str
    """Catalog model of the sub-agents."""
    aggregate_model: str
    """Catalog model of the aggregation."""
    node_ids: NodeIdSeq
    """Ids of the sub-agent nodes, in input order (a submitted job's: a range,
    swarm.id_ranges.NodeIds; JSON: a list, or an object naming the range)."""
    input_refs: RefSeq
    """Input references, aligned with ``node_ids`` (streamed lines: runs of line
    numbers, swarm.id_ranges.RefRuns)."""
    submitted_at: float
    """Unix time of submission (wall time is measured from here)."""
    max_tokens: int | None = None
    """Completion budget per sub-agent call; None means the model's default."""
    min_success_ratio: float = 0.5
    """Share of nodes that must succeed for the aggregation to run."""
    budget_usd: float | None = None
    """Cap on the job's billed cost in USD; None means no cap (see swarm.cost.budget)."""
    kind: str | None = None
    """Routing kind of the sub-agents when chosen by kind."""
    fallback_models: tuple[str, ...] = ()
    """Models tried in turn when ``model`` keeps failing for a node."""
    output_schema: dict[str, Any] | None = None
    """JSON schema every sub-agent answer must follow; None for free text."""
    tasks: dict[str, NodeTask] = Field(default_factory=dict)
    """Per-node tasks that differ from the job's (planned and routed jobs)."""
    tools: str | None = None
    """Toolset of every sub-agent (``repo``, ``docs``, ``pkg.module[:attr]``); None: no tools."""
    tool_root: str | None = None
    """Repository the ``repo`` toolset reads (each node at the commit its input names)."""
    deadline_at: float | None = None
    """Unix time the job must end by: its plain nodes go through the gateway's Batch API
    while the deadline allows (swarm.batch); None: every call is live."""
    tenant: TenantName = DEFAULT_TENANT
    """The team the job runs for: admission shares each model's tokens between the tenants
    by their catalog weights (swarm.calls.admission.shares)."""
    trace_parent: str | None = None
    """W3C traceparent of the job's root span when the producer traces (swarm.tracing):
    every worker's spans of the job join that trace, requeued and taken-over runs too."""
    context: str | None = None
    """Text every sub-agent and the aggregation read before their own input (a repository's
    conventions, a paper's background): placed in the shared prompt prefix that gateways
    cache (swarm.jobs.prompts); None: no shared context."""
    _index: dict[str, int] = PrivateAttr(default_factory=dict)
    _job_task: NodeTask | None = PrivateAttr(default=None)

    def to_json(self) -> str:
        """The spec as the store keeps it. The optional fields of SPEC_OPTIONAL are left
        out while unset, so workers of the release before them (which refuse unknown
        fields) still run the jobs that use none of them: during a rolling upgrade the
        producers may be newer than the workers."""
        unset = {name for name in SPEC_OPTIONAL if getattr(self, name) is None}
        return self.model_dump_json(exclude=unset)

    def _position(self, node_id: str) -> int:
        if isinstance(self.node_ids, NodeIds):
            position = self.node_ids.position(node_id)
            if position is None:
                raise KeyError(node_id)
            return position
        index = self._index
        if index.get(node_id) is None or len(index) != len(self.node_ids):
            # Built lazily (a model_copy may carry another spec's) and replaced whole, never
            # cleared in place: the node threads of one task (swarm.jobs.batch) read it at once.
            index = {n: i for i, n in enumerate(self.node_ids)}
            self._index = index
        return index[node_id]

    def input_ref(self, node_id: str) -> str:
        """The input reference of a node."""
        return self.input_refs[self._position(node_id)]

    def task(self, node_id: str) -> NodeTask:
        """What a node does: its own task, or the job's (built once per spec: a node asks
        for it several times, and every node of a plain job gets the same one)."""
        own = self.tasks.get(node_id)
        if own is not None:
            return own
        job = self._job_task
        if job is None or not self._is_job_task(job):  # a model_copy carries the original's
            job = self._job_task = NodeTask(
                model=self.model,
                instruction=self.instruction,
                kind=self.kind,
                fallback_models=self.fallback_models,
                output_schema=self.output_schema,
            )
        return job

    def _is_job_task(self, task: NodeTask) -> bool:
        return (task.model, task.instruction, task.kind, task.fallback_models,
                task.output_schema) == (self.model, self.instruction, self.kind,
                                        self.fallback_models, self.output_schema)  # fmt: skip
