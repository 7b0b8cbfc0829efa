"""One node on one model: fit its input to the model's window, call it, validate the answer.

A ``ModelRun`` is what a sub-agent node (swarm.jobs.subagent) does on each model it tries,
the node's own model first, then its fallbacks: an input over the model's context keeps
its head and tail and has its middle summarised by the fast model (once per node, whichever
model needs it); a plain node's own call holds its billed answer for the envelope's write
(CallResult.held); a JSON answer is validated against the schema and retried once with the
error, else it ends ``bad_output`` with the raw text kept; with tools the node runs as an
agent (swarm.jobs.agent). A ``Tally`` adds up what every call of the node cost.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from swarm.calls.context_window import parse_overflow
from swarm.calls.pipeline import run_call
from swarm.calls.reasoning import run_raising
from swarm.calls.request import CallProgress, CallRequest, CallResult, HeldCall, Message
from swarm.calls.runtime import Runtime
from swarm.calls.warmup import plan_warmup, warm_turn
from swarm.catalog import DEFAULT_KIND, ModelSpec
from swarm.jobs.agent import run_agent
from swarm.jobs.context_fit import (
    clip_to_tokens,
    cut_by_cap,
    fitting_window,
    input_budget_tokens,
    split_for_budget,
    summary_budget_tokens,
)
from swarm.jobs.prompts import subagent_messages
from swarm.jobs.structured import BadOutputError, schema_instruction, validate_against
from swarm.records import ErrorKind, JobSpec, NodeEnvelope, NodeTask, Truncation, Usage
from swarm.tokens import estimate_messages, estimate_tokens

SUMMARIZE_KIND = "summarize"
SUMMARIZER_ROLE = (
    "Summarise the excerpt below for another model that will not see it: keep every fact, "
    "name, number, identifier and claim that could matter; drop repetition."
)

log = logging.getLogger(__name__)

__all__ = ["SUMMARIZE_KIND", "ModelRun", "Tally"]


@dataclass
class Tally:
    """Usage, attempts and time of every call a node made, over all its models."""

    usage: Usage = field(default_factory=Usage)
    attempts: int = 0
    latency_ms: int = 0
    summaries: dict[str, str] = field(default_factory=dict)
    """Summaries of input middles by their hash: a fallback model that cuts the input the
    same way reuses the summary instead of paying for it again."""
    held: HeldCall | None = None
    """The node's answer, billed and held to be committed with its envelope."""

    def add(self, outcome: CallResult) -> None:
        self.usage = self.usage + outcome.usage
        self.attempts += outcome.attempts
        self.latency_ms += outcome.latency_ms


@dataclass
class ModelRun:
    """One node on one model: fit, call, validate."""

    rt: Runtime
    spec: JobSpec
    node_id: str
    task: NodeTask
    model: ModelSpec
    may_requeue: bool
    progress: Mapping[str, CallProgress]
    """What earlier runs of this node's calls did, per slot (see CallProgress)."""

    @property
    def max_tokens(self) -> int:
        return self.spec.max_tokens or self.model.max_tokens

    def call(
        self,
        slot: str,
        messages: list[Message],
        max_tokens: int,
        *,
        json: bool,
        tools: tuple[dict[str, Any], ...] = (),
        hold_answer: bool = False,
    ) -> CallResult:
        hedger = self.rt.hedger
        request = CallRequest.of(
            self.spec.job_id,
            slot,
            self.model,
            messages,
            max_tokens,
            budgeted=self.spec.budget_usd is not None,
            json_mode=json,
            may_requeue=self.may_requeue,
            hedge_cap=hedger.policy.job_cap(self.spec) if hedger else 0,
            progress=self.progress.get(slot, CallProgress()),
            tools=tools,
            tenant=self.spec.tenant,
            kind=self.task.kind or DEFAULT_KIND,
            hold_answer=hold_answer,
        )
        return run_raising(self.rt, request)

    def envelope(self, text: str, slot: str, tally: Tally) -> NodeEnvelope:
        instruction = schema_instruction(self.task.instruction, self.task.output_schema)
        json = self.task.output_schema is not None
        fitted, truncation = self.fit(text, instruction, tally)
        ref = self.spec.input_ref(self.node_id)
        messages = subagent_messages(instruction, ref, fitted, self.spec.context)
        if self.spec.tools:
            return self.acting(messages, slot, tally, truncation)
        # A plain node's own call: its answer is recorded with the envelope (one write). The
        # first node of a long shared prefix calls alone to warm the prompt cache.
        warmup = plan_warmup(self.rt.settings, self.model, messages, len(self.spec.node_ids))
        with warm_turn(self.rt.warmup, warmup, self.node_id):
            outcome = self.call(slot, messages, self.max_tokens, json=json,
                                hold_answer=slot == self.node_id and not json)  # fmt: skip
        tally.held = outcome.held
        overflow = parse_overflow(outcome.error or "")
        if outcome.error_kind is ErrorKind.CONTEXT_OVERFLOW and overflow is not None:
            # The server stated its window: refit to it and try once more. The refused
            # request was not billed and does not count as an attempt of the node.
            windows = self.rt.windows
            windows.learn(self.model.name, overflow.window)
            sent = estimate_messages(m["content"] for m in messages) + self.max_tokens
            windows.calibrate(self.model.name, sent, overflow.requested or 0)
            scale = max(windows.scale(self.model.name), (overflow.requested or sent) / sent)
            log.debug("node %s: %s has a window of %d tokens (estimates x%.2f), refitting",
                      self.node_id, self.model.name, overflow.window, scale)  # fmt: skip
            fitted, truncation = self.fit(text, instruction, tally, scale)
            messages = subagent_messages(instruction, ref, fitted, self.spec.context)
            outcome = self.call(f"{slot}:refit", messages, self.max_tokens, json=json)
        if outcome.answer is not None and not outcome.answer.usage_missing:
            estimated = estimate_messages(m["content"] for m in messages)
            self.rt.windows.calibrate(
                self.model.name, estimated, outcome.answer.usage.prompt_tokens
            )
        tally.add(outcome)
        if outcome.answer is not None and json:
            outcome = self.validated(outcome, messages, slot, tally)
        return self.build(outcome, tally, truncation)

    def acting(
        self, messages: list[Message], slot: str, tally: Tally, truncation: Truncation | None
    ) -> NodeEnvelope:
        """The node as an agent (swarm.jobs.agent): model steps with the job's tools."""

        def step(
            step_slot: str, sent: list[Message], tools: tuple[dict[str, Any], ...]
        ) -> CallResult:
            outcome = self.call(step_slot, sent, self.max_tokens, json=False, tools=tools)
            tally.add(outcome)
            return outcome

        echo = self.model.shape(self.task.kind or DEFAULT_KIND).echo_reasoning
        ran = run_agent(self.rt, self.spec, self.node_id, slot, messages, step, echo=echo)
        outcome = ran.result
        if outcome.ok and self.task.output_schema is not None:
            # The fix-up continues the agent's conversation: the model sees what its tools
            # returned when it answers again (without tools: JSON mode, one more step).
            outcome = self.validated(outcome, ran.sent, slot, tally)
        return self.build(outcome, tally, truncation).model_copy(update=ran.fields)

    def fit(
        self, text: str, instruction: str, tally: Tally, scale: float | None = None
    ) -> tuple[str, Truncation | None]:
        """The input as it fits the model's context (the window the gateway stated, when
        smaller than the catalog's; ``scale`` = server tokens per estimated token), and
        what was cut."""
        overhead = estimate_tokens(instruction) + estimate_tokens(self.spec.context or "") + 256
        window = fitting_window(self.rt, self.model, scale)
        budget = input_budget_tokens(window, self.max_tokens, overhead)
        split = split_for_budget(text, budget)
        if split is None:
            return text, None
        cap = cut_by_cap(text, window, overhead, self.spec.max_tokens,
                         self.model.max_tokens)  # fmt: skip
        log.debug("node %s: input of %d tokens over the %d left for it by %s's window, "
                  "the answer's max_tokens %d%s: its middle is summarised", self.node_id,
                  split.original_tokens, budget, self.model.name, self.max_tokens,
                  " (the job's, above the model's own)" if cap else "")  # fmt: skip
        summary = self.summary(split.middle, budget, tally)
        return split.join(summary or "[summary unavailable]"), split.truncation(summary, cap)

    def summary(self, middle: str, budget: int, tally: Tally) -> str:
        """The middle's summary, made once per node whichever model needs it."""
        digest = hashlib.sha256(middle.encode()).hexdigest()[:16]
        if (known := tally.summaries.get(digest)) is not None:
            return known
        summarizer = self.rt.catalog.route(SUMMARIZE_KIND)
        limit = min(summary_budget_tokens(budget), summarizer.max_tokens)
        slot = f"{self.node_id}:summary:{digest}"
        outcome = self.summary_call(summarizer, middle, limit, slot)
        overflow = parse_overflow(outcome.error or "")
        if outcome.error_kind is ErrorKind.CONTEXT_OVERFLOW and overflow is not None:
            # as for the node's own call: the server stated the summariser's window
            self.rt.windows.learn(summarizer.name, overflow.window)
            sent = estimate_tokens(middle) + limit
            self.rt.windows.calibrate(summarizer.name, sent, overflow.requested or 0)
            outcome = self.summary_call(summarizer, middle, limit, f"{slot}:refit")
        tally.add(outcome)
        summary = outcome.answer.content if outcome.answer else ""
        if summary:
            tally.summaries[digest] = summary
        return summary

    def summary_call(self, summarizer: ModelSpec, middle: str, limit: int, slot: str) -> CallResult:
        """One summarising call: the middle clipped to the summariser's (learned) window."""
        room = input_budget_tokens(fitting_window(self.rt, summarizer), limit, 512)
        messages = [
            {"role": "system", "content": SUMMARIZER_ROLE},
            {"role": "user", "content": clip_to_tokens(middle, room)},
        ]
        request = CallRequest.of(
            self.spec.job_id,
            slot,
            summarizer,
            messages,
            limit,
            budgeted=self.spec.budget_usd is not None,
            may_requeue=self.may_requeue,
            progress=self.progress.get(slot, CallProgress()),
            tenant=self.spec.tenant,
            kind=SUMMARIZE_KIND,
        )
        return run_call(self.rt, request)

    def validated(
        self, outcome: CallResult, messages: list[Message], slot: str, tally: Tally
    ) -> CallResult:
        """The answer if it matches the schema, else one retry told the error. When that
        retry gets no answer (e.g. the server refuses it as too long), the first answer
        stands, as bad output: it was billed, and shown raw it is still worth reading."""
        assert outcome.answer is not None and self.task.output_schema is not None
        try:
            validate_against(outcome.answer.content, self.task.output_schema)
            return outcome
        except BadOutputError as exc:
            problem = str(exc)
        retry = self.fix_up(messages, outcome.answer.content, problem)
        second = self.call(f"{slot}:fix", retry, self.max_tokens, json=True)
        tally.add(second)
        if second.answer is None:
            log.debug("node %s: the schema fix-up got no answer (%s); the first answer stands",
                      self.node_id, second.error_kind)  # fmt: skip
            return _bad_output(outcome, problem)
        try:
            validate_against(second.answer.content, self.task.output_schema)
            return second
        except BadOutputError as exc:
            return _bad_output(second, str(exc))

    def fix_up(self, messages: list[Message], answer: str, problem: str) -> list[Message]:
        """The conversation asking for a schema fix: the rejected answer is echoed clipped
        to what the model's (learned) window leaves beside the prompt and a full answer,
        so the fix-up is not refused as too long where the first call fitted."""
        rejected = f"Rejected: {problem}. Answer again: JSON only."
        used = estimate_messages([*(m.get("content") or "" for m in messages), rejected])
        room = fitting_window(self.rt, self.model) - used - self.max_tokens
        return [
            *messages,
            {"role": "assistant", "content": clip_to_tokens(answer, max(room - 64, 64))},
            {"role": "user", "content": rejected},
        ]

    def build(
        self, outcome: CallResult, tally: Tally, truncation: Truncation | None
    ) -> NodeEnvelope:
        answer = outcome.answer
        ok = answer is not None and outcome.error_kind is None
        return NodeEnvelope(
            node_id=self.node_id,
            input_ref=self.spec.input_ref(self.node_id),
            model=self.model.name,
            status="ok" if ok else "error",
            content=answer.content if answer else "",
            reasoning=answer.reasoning if answer else "",
            usage=tally.usage,
            latency_ms=tally.latency_ms,
            attempts=tally.attempts,
            error_kind=None if ok else outcome.error_kind,
            error=None if ok else error_text(outcome, self.spec),
            finish_reason=answer.finish_reason if answer else None,
            max_tokens_sent=answer.max_tokens_sent if answer else None,
            usage_missing=answer.usage_missing if answer else False,
            kind=self.task.kind,
            truncation=truncation,
        )


def error_text(outcome: CallResult, spec: JobSpec) -> str | None:
    if outcome.error_kind is ErrorKind.BUDGET_EXCEEDED:
        return (
            f"budget ${spec.budget_usd} reached (spent plus calls in flight); this node did "
            "not call the gateway"
        )
    return outcome.error


def _bad_output(outcome: CallResult, problem: str) -> CallResult:
    """``outcome``'s answer, marked as missing the schema."""
    return CallResult(
        outcome.answer,
        outcome.usage,
        outcome.attempts,
        outcome.latency_ms,
        ErrorKind.BAD_OUTPUT,
        problem,
    )
