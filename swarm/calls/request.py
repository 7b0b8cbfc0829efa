"""What one gateway call asks for and what it got: the records every step passes on.

A ``CallRequest`` is built once per call (a sub-agent node, a summary, a JSON fix-up, the
planner, a reduce step, the aggregation) and travels unchanged through the whole attempt
path (swarm.calls.pipeline); a ``CallResult`` is what the caller gets back.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

from swarm.catalog import DEFAULT_KIND, ModelSpec
from swarm.errors import SwarmError
from swarm.records import DEFAULT_TENANT, ErrorKind, NodeEnvelope, ToolCall, Usage
from swarm.store.base import JobStore
from swarm.store.billing import HeldAnswer
from swarm.store.leases import Lease
from swarm.tokens import estimate_messages

log = logging.getLogger(__name__)

Message = dict[str, Any]
"""A chat message: ``role`` and ``content`` (text, or None beside ``tool_calls``), and for
agent steps ``tool_calls`` and ``reasoning_content`` (assistant) or ``tool_call_id`` (role
``tool``)."""


@dataclass(frozen=True)
class CallProgress:
    """What earlier runs of a call did before admission sent its task back to the queue:
    the attempt bound and the latency count across those runs."""

    attempts: int = 0
    """Attempts made by the earlier runs."""
    started_at: float | None = None
    """When the first run started (epoch seconds); None for a call not run before."""


def pack_progress(progress: Mapping[str, CallProgress]) -> dict[str, list[float]]:
    """Progress per call slot, as JSON for a requeued task message: ``[attempts,
    started_at]`` (0.0: not run before)."""
    return {slot: [p.attempts, p.started_at or 0.0] for slot, p in progress.items()}


def unpack_progress(value: Mapping[str, Sequence[float]] | None) -> dict[str, CallProgress]:
    """``pack_progress``'s JSON back (None or empty: no earlier runs)."""
    return {
        slot: CallProgress(int(a), float(at) or None) for slot, (a, at) in (value or {}).items()
    }


class Withdrawn(SwarmError):
    """A request withdrawn before its answer (a hedged attempt's loser, or a duplicate
    not admitted): its permit goes back as unsent."""


class Leg(Protocol):
    """One request of a hedged attempt (swarm.calls.hedging.race), sent down the rest of
    the call's path: its admit step hands a duplicate's attempt to ``admit``, its http step
    sends through ``send`` (a request that can be withdrawn)."""

    duplicate: bool
    """The hedge (admitted only if the model has room at once), not the original."""

    def admit(self, attempt: Callable[[], Answer]) -> Answer:
        """A duplicate's admission around ``attempt``."""
        ...

    def send(self, request: CallRequest) -> Answer:
        """The request, withdrawn when the other one answers first (Withdrawn)."""
        ...


@dataclass(frozen=True)
class CallRequest:
    """One call of a job: which model, what to send, and how the call may behave."""

    job_id: str
    slot: str
    """Name of the call, unique within the job (node id, ``<node>:summary``, ``aggregate``)."""
    model: ModelSpec
    messages: tuple[Message, ...]
    max_tokens: int
    json_mode: bool = False
    """Ask for a JSON object (``response_format``)."""
    budgeted: bool = False
    """The job has a budget: reserve the call's cost bound before calling."""
    closing: bool = False
    """The aggregation: may use what is left of an exhausted budget."""
    may_requeue: bool = False
    """A long admission wait may send the task back to the queue (RetryLater)."""
    hedge_cap: int = 0
    """Hedges the job may send in all (0: this call is never hedged)."""
    progress: CallProgress = CallProgress()
    """What earlier runs of this call did (a task admission sent back to the queue)."""
    tools: tuple[dict[str, Any], ...] = ()
    """Tool definitions offered to the model (OpenAI ``tools``); empty: a plain call."""
    tenant: str = DEFAULT_TENANT
    """Tenant of the job (admission shares each model's tokens between tenants)."""
    kind: str = DEFAULT_KIND
    """The task kind the call serves (its model's request fields may differ by kind, e.g.
    thinking off for ``extract``: ModelSpec.shape)."""
    hold_answer: bool = False
    """A node's own plain call, whose envelope is stored right after it: a billed answer is
    held under the call's claim and recorded with the envelope in one write
    (CallResult.held) instead of on arrival; not with a budget (its spend would be
    counted after its reservation goes back)."""
    leg: Leg | None = field(default=None, compare=False)
    """Set on the requests of a hedged attempt (swarm.calls.hedging): which one it is."""

    @classmethod
    def of(cls, job_id: str, slot: str, model: ModelSpec, messages: Sequence[Message],
           max_tokens: int, **options: Any) -> CallRequest:  # fmt: skip
        """A request from any sequence of messages (stored as a tuple)."""
        return cls(job_id, slot, model, tuple(messages), max_tokens, **options)

    @cached_property
    def key(self) -> str:
        """The idempotency key: ``<job>:<slot>:<model>:<sha256 of messages and max_tokens>``."""
        hashed: list[Any] = [list(self.messages), self.max_tokens]
        if self.tools:  # tool-less calls keep the key they always had
            hashed.append(list(self.tools))
        request = json.dumps(hashed, sort_keys=True, ensure_ascii=False)
        digest = hashlib.sha256(request.encode()).hexdigest()[:32]
        return f"{self.job_id}:{self.slot}:{self.model.name}:{digest}"

    @cached_property
    def prompt_tokens(self) -> int:
        """Estimated prompt tokens (swarm.tokens)."""
        texts = [message_text(m) for m in self.messages]
        if self.tools:
            texts.append(json.dumps(list(self.tools), ensure_ascii=False))
        return estimate_messages(texts)

    @property
    def tokens(self) -> int:
        """Tokens admission reserves: the prompt estimate plus the completion budget (a
        thinking model's reasoning is generated inside that budget, so it is counted)."""
        return self.prompt_tokens + self.max_tokens

    def body(self) -> dict[str, Any]:
        """The JSON body of the chat completion request: the messages, the completion cap
        under the field the model takes, and the model's request fields for this kind
        (sampling, thinking, extra body: the catalog's, else its provider's defaults)."""
        shape = self.model.shape(self.kind)
        body: dict[str, Any] = {
            "model": self.model.gateway_name,
            "messages": list(self.messages),
            shape.cap_field: self.max_tokens,
            **shape.fields,
        }
        if self.json_mode:
            body["response_format"] = {"type": "json_object"}
        if self.tools:
            # "auto" is OpenAI's default, but some servers (llama-cpp-python's
            # chatml-function-calling) ignore the tools unless it is sent.
            body["tools"] = list(self.tools)
            body["tool_choice"] = "auto"
        return body


def message_text(message: Message) -> str:
    """What a message sends the model as text: its content and any tool calls' arguments."""
    text = (message.get("reasoning_content") or "") + (message.get("content") or "")
    for call in message.get("tool_calls") or ():
        function = call.get("function", {})
        text += f"\n{function.get('name', '')}({function.get('arguments', '')})"
    return str(text)


@dataclass(frozen=True)
class Answer:
    """A usable answer from the gateway."""

    content: str
    usage: Usage
    finish_reason: str | None
    usage_missing: bool = False
    """True when the answer had no usage field (its tokens are unknown, counted as 0)."""
    tool_calls: tuple[ToolCall, ...] = ()
    """Tools the model asked to call (then ``content`` may be empty)."""
    limit_reset_s: float | None = None
    """Set when the answer's x-ratelimit-remaining-* headers say a limit of the tenant is
    used up: seconds until its reset (0.0 when not given). Admission then holds every
    caller of the model until then."""
    max_tokens_sent: int | None = None
    """The max_tokens the request was sent with when it was smaller than the caller's
    (a local backend's pacing, swarm.calls.local.pacing); None: as asked."""
    response_id: str | None = None
    """The completion's ``id``, when it had one (traces: ``gen_ai.response.id``)."""
    response_model: str | None = None
    """The model the gateway says answered (traces: ``gen_ai.response.model``)."""
    reasoning: str = ""
    """The message's ``reasoning_content`` (a thinking model's reasoning), kept apart from
    ``content``: never quoted to the aggregation, sent back only in an agent's tool-call
    messages where the provider requires it."""


@dataclass(frozen=True)
class HeldCall:
    """A billed answer held under its call's claim (swarm.calls.session), not written yet:
    ``commit`` is the one place it is written (with its node's envelope, or alone after an
    error)."""

    store: JobStore
    job_id: str
    answer: HeldAnswer

    def commit(self, envelope: NodeEnvelope | None = None, fence: Lease | None = None) -> bool:
        """Write the answer, its ledger line and its companion (the answered attempt's
        permit finish): with ``envelope`` in one round trip (False when ``fence`` was lost
        and the envelope is left to the run that took over; the billed call counts either
        way), or alone when the node ended on an error (True)."""
        if envelope is None:
            log.debug("session: %s's held answer written alone", self.answer.call.answer_key)
            self.store.record_held(self.job_id, self.answer)
            return True
        return self.store.finish_billed_node(self.job_id, envelope, fence, self.answer)


@dataclass(frozen=True)
class CallResult:
    """What a call produced after its retries: an answer (fresh or reused), or the last
    error."""

    answer: Answer | None
    """The answer when the call succeeded."""
    usage: Usage
    """Tokens billed over all attempts (a reused answer's original usage)."""
    attempts: int
    """Gateway attempts (of the original run, for a reused answer)."""
    latency_ms: int
    """Wall time, backoff included."""
    error_kind: ErrorKind | None = None
    """Why there is no answer."""
    error: str | None = None
    """One line on why there is no answer."""
    billed: tuple[Usage, ...] = field(default_factory=tuple)
    """Usage of each billed attempt, in order."""
    reused: bool = False
    """True when the answer is one an earlier run stored (no gateway call now)."""
    held: HeldCall | None = None
    """The billed answer not recorded yet (CallRequest.hold_answer): the caller commits it
    with the node's envelope (HeldCall.commit)."""

    @property
    def ok(self) -> bool:
        """True when an answer came and no error is attached."""
        return self.answer is not None and self.error_kind is None
