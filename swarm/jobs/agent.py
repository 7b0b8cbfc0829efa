"""An agent node: the model calls tools, sees their results, and answers, within limits.

    step k    one run_call (slot ``<node>:step:<k>``) with the tools offered: admitted with
              its real prompt, billed once, its answer stored under its idempotency key
    tools     the calls the answer asks for, run concurrently; each outcome stored under a
              key of its step, so a node run again replays steps and tool results (no
              gateway call, no tool run) and goes on at the first step it lacks
    again     until an answer without tool calls, or a limit: max steps, max tool calls,
              the token budget, the deadline, or the same call a third time (``tool_loop``)

A malformed call (not JSON, an unknown tool, a schema mismatch) is answered with the
validation error so the model can correct itself, and counted. The transcript is stored
after every step (swarm.store.agents), so a node that ends badly keeps it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from swarm.calls.request import CallResult, Message
from swarm.calls.runtime import Runtime
from swarm.records import ErrorKind, JobSpec, ToolCall, Usage
from swarm.settings_slice import SettingsSlice, setting
from swarm.store.agents import ToolOutcome, Transcript
from swarm.store.base import JobStore
from swarm.tools.registry import Tool
from swarm.tools.runner import ToolLimits, canonical
from swarm.tools.runner import run_tool_call as run_tool
from swarm.tools.toolsets import ToolContext, load_toolset

log = logging.getLogger(__name__)

LOOP_REPEATS = 3
"""The same call (name and arguments) this many times ends the node with ``tool_loop``."""
USED_CHARS = 120
AGENT_HINT = (
    "You may call the tools offered to look things up before answering. When you have what "
    "you need, answer without calling a tool."
)

StepCall = Callable[[str, list[Message], tuple[dict[str, Any], ...]], CallResult]
"""``call(slot, messages, tools)``: one model step through run_call."""


@dataclass(frozen=True)
class AgentLimits(SettingsSlice):
    """Per-node limits of the loop."""

    tools: ToolLimits
    max_steps: int = setting("agent_max_steps")
    max_tool_calls: int = setting("agent_max_tool_calls")
    token_budget: int = setting("agent_token_budget")
    timeout_s: float = setting("agent_timeout_s")


@dataclass
class AgentRun:
    """One node's loop on one model; ``run`` returns the last step's result (or the error
    that stopped the loop) and leaves the counts on the instance."""

    store: JobStore
    job_id: str
    node_id: str
    slot: str
    tools: Mapping[str, Tool]
    limits: AgentLimits
    call: StepCall
    echo_reasoning: bool = False
    """Send each assistant tool-call message back with its reasoning_content (the
    provider requires it with thinking on: swarm.providers)."""
    steps: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    invalid: int = 0
    used: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    messages: list[Message] = field(default_factory=list)
    sent: list[Message] = field(default_factory=list)
    """The messages the last step was given: the conversation its answer answers."""
    _seen: Counter[str] = field(default_factory=Counter)

    def run(self, messages: list[Message]) -> CallResult:
        """Loop until an answer without tool calls or a limit."""
        self.messages = _with_hint(messages)
        schemas = tuple(t.schema for t in self.tools.values())
        deadline = time.monotonic() + self.limits.timeout_s
        last: CallResult | None = None
        for k in range(self.limits.max_steps):
            stop = self._limit_reached(deadline, last)
            if stop is not None:
                return stop
            self.sent = list(self.messages)
            last = self.call(f"{self.slot}:step:{k}", self.sent, schemas)
            self.steps += last.answer is not None or last.attempts > 0  # a refused call is none
            self.usage = self.usage + last.usage
            answer = last.answer
            if answer is None or last.error_kind is not None or not answer.tool_calls:
                if answer is not None and last.ok:
                    self.messages.append({"role": "assistant", "content": answer.content})
                self._save("answered" if last.ok else f"{last.error_kind}: {last.error}")
                return last
            reasoning = answer.reasoning if self.echo_reasoning else ""
            self.messages.append(_assistant(answer.content, answer.tool_calls, reasoning))
            stop = self._guard(answer.tool_calls, last)
            if stop is not None:
                return stop
            self._run_tools(k, answer.tool_calls, replayed=last.reused)
            self._save("")
        return self._stop(last, ErrorKind.TOOL_LOOP, f"no answer after {self.steps} steps")

    def _limit_reached(self, deadline: float, last: CallResult | None) -> CallResult | None:
        if time.monotonic() > deadline:
            why = f"agent deadline of {self.limits.timeout_s:g} s passed after {self.steps} steps"
            return self._stop(last, ErrorKind.TIMEOUT, why)
        if self.usage.total_tokens >= self.limits.token_budget:
            why = f"token budget {self.limits.token_budget} spent after {self.steps} steps"
            return self._stop(last, ErrorKind.TOOL_LOOP, why)
        return None

    def _guard(self, calls: tuple[ToolCall, ...], last: CallResult) -> CallResult | None:
        """The loop guard and the tool-call cap, before any of ``calls`` runs."""
        self.tool_calls += len(calls)
        for call in calls:
            key = canonical(call)
            self._seen[key] += 1
            if self._seen[key] >= LOOP_REPEATS:
                why = f"the same tool call a third time: {_short(call)}"
                return self._stop(last, ErrorKind.TOOL_LOOP, why)
        if self.tool_calls > self.limits.max_tool_calls:
            why = f"more than {self.limits.max_tool_calls} tool calls"
            return self._stop(last, ErrorKind.TOOL_LOOP, why)
        return None

    def _run_tools(self, k: int, calls: tuple[ToolCall, ...], *, replayed: bool) -> None:
        keys = [self._tool_key(k, i, call) for i, call in enumerate(calls)]
        durable = partial(self._durable, replayed=replayed)
        if len(calls) == 1:  # the common case: no pool to start
            outcomes = [durable(calls[0], keys[0])]
        else:
            with ThreadPoolExecutor(max_workers=len(calls), thread_name_prefix="tool") as pool:
                outcomes = list(pool.map(durable, calls, keys))
        for call, outcome in zip(calls, outcomes, strict=True):
            self.used.append(_short(call))
            self.tool_errors += int(outcome.error)
            self.invalid += int(outcome.invalid)
            self.messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": outcome.content}
            )

    def _tool_key(self, k: int, index: int, call: ToolCall) -> str:
        digest = hashlib.sha256(f"{call.id}\0{canonical(call)}".encode()).hexdigest()[:16]
        return f"{self.slot}:step:{k}:tool:{index}:{digest}"

    def _durable(self, call: ToolCall, key: str, *, replayed: bool) -> ToolOutcome:
        """The stored outcome of this call, else run it and store it (first one wins).

        Only a replayed step (its answer reused from the store) can have stored outcomes; a
        step the gateway just answered skips the lookup.
        """
        stored = self.store.tool_result(self.job_id, key) if replayed else None
        if stored is not None:
            log.debug("node %s: tool %s replayed from the store", self.node_id, call.name)
            return stored
        outcome = run_tool(call, self.tools, self.limits.tools)
        return self.store.save_tool_result(self.job_id, key, outcome)

    def _stop(self, last: CallResult | None, kind: ErrorKind, why: str) -> CallResult:
        log.debug("node %s: agent loop stopped: %s", self.node_id, why)
        self._save(f"{kind}: {why}")
        answer = last.answer if last else None
        return CallResult(answer, Usage(), 0, 0, kind, why)

    def _save(self, ended: str) -> None:
        transcript = Transcript(node_id=self.node_id, messages=tuple(self.messages), ended=ended)
        self.store.save_transcript(self.job_id, transcript)


def _with_hint(messages: list[Message]) -> list[Message]:
    """The messages with the agent hint added to the system message (the shared prefix)."""
    out = list(messages)
    if out and out[0].get("role") == "system":
        out[0] = {**out[0], "content": f"{out[0]['content']}\n\n{AGENT_HINT}"}
    return out


def _assistant(content: str, calls: tuple[ToolCall, ...], reasoning: str = "") -> Message:
    """An assistant tool-call message as sent back; with its reasoning_content when given
    (Moonshot and DeepSeek refuse the next step of a thinking model without it)."""
    message: Message = {
        "role": "assistant",
        "content": content,  # "" rather than null: some servers (llama-cpp-python) reject null
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls
        ],
    }
    if reasoning:
        message["reasoning_content"] = reasoning
    return message


def _short(call: ToolCall) -> str:
    try:
        args = json.loads(call.arguments or "{}")
        shown = ", ".join(f"{k}={v!r}" for k, v in args.items()) if isinstance(args, dict) else ""
    except ValueError:
        shown = call.arguments
    text = f"{call.name}({shown})"
    return text if len(text) <= USED_CHARS else text[: USED_CHARS - 4] + "...)"


@dataclass(frozen=True)
class AgentOutcome:
    """What a node's loop ended with."""

    result: CallResult
    """The last step's result, or the error that stopped the loop."""
    fields: dict[str, Any]
    """The envelope's fields: steps, tool_calls, tool_errors, tool_calls_invalid, tools_used."""
    sent: list[Message]
    """The conversation the last answer answers (tool calls and results included): a
    fix-up of that answer (a schema retry) continues it rather than the first prompt."""


def run_agent(
    rt: Runtime,
    spec: JobSpec,
    node_id: str,
    slot: str,
    messages: list[Message],
    call: StepCall,
    *,
    echo: bool = False,
) -> AgentOutcome:
    """Run a node's loop with the job's toolset; ``echo``: send tool-call messages back
    with their reasoning_content (the model's request shape says)."""
    assert spec.tools is not None
    try:
        tools = load_toolset(spec.tools, ToolContext(spec, node_id, rt.store))
    except Exception as exc:  # a worker without the toolset: one clear error on the node
        why = f"toolset {spec.tools!r} cannot be loaded on this worker: {exc}"
        failed = CallResult(None, Usage(), 0, 0, ErrorKind.TOOLS_UNAVAILABLE, why)
        return AgentOutcome(failed, {}, messages)
    limits = AgentLimits.from_settings(rt.settings, tools=ToolLimits.from_settings(rt.settings))
    agent = AgentRun(rt.store, spec.job_id, node_id, slot, tools, limits, call, echo_reasoning=echo)
    result = agent.run(messages)
    fields = {
        "steps": agent.steps,
        "tool_calls": agent.tool_calls,
        "tool_errors": agent.tool_errors,
        "tool_calls_invalid": agent.invalid,
        "tools_used": tuple(agent.used),
    }
    return AgentOutcome(result, fields, agent.sent or messages)
