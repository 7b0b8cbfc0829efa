"""The plan: a model splits a query over the inputs into routed sub-tasks.

The plan is JSON that must follow a schema built for this job: every ``input_ref`` is one of
the job's inputs and every ``kind`` one of the catalog's routing kinds (both as enums, so a
JSON-mode model sees the exact choices). A malformed or empty plan is repaired (json-repair)
and retried once with the validation error; then the job ends ``failed`` with the
planner's error (swarm.jobs.planner).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from swarm.catalog import AGGREGATE_KIND, Catalog
from swarm.jobs.structured import BadOutputError, validate_output
from swarm.records import InputItem

PLANNER_ROLE = (
    "You are the planner of a swarm of sub-agents. Split the user's query into sub-tasks, one "
    "or more per input document, each with a task kind, the input it works on and a precise "
    "instruction. Answer with JSON only, following the schema."
)
_NOT_PLANNABLE = frozenset({AGGREGATE_KIND, "plan"})


class SubTask(BaseModel):
    """One sub-task of a plan."""

    model_config = ConfigDict(frozen=True)

    kind: str
    """Routing kind (extract, summarize, code, reason, ...)."""
    input_ref: str
    """The input the sub-task works on."""
    instruction: str = Field(min_length=1)
    """What the sub-agent does with it."""


class Plan(BaseModel):
    """A validated plan."""

    model_config = ConfigDict(frozen=True)

    subtasks: tuple[SubTask, ...] = Field(min_length=1)


def plannable_kinds(catalog: Catalog) -> tuple[str, ...]:
    """Kinds a plan may use: every routing kind but aggregate and plan."""
    return tuple(k for k in catalog.routing if k not in _NOT_PLANNABLE)


def plan_schema(refs: Sequence[str], kinds: Sequence[str]) -> type[BaseModel]:
    """A pydantic model of a plan for exactly these inputs and kinds."""
    kind_type: Any = Literal[tuple(kinds)]
    ref_type: Any = Literal[tuple(refs)]
    sub: Any = create_model(
        "SubTask",
        kind=(kind_type, ...),
        input_ref=(ref_type, ...),
        instruction=(str, Field(min_length=1)),
    )
    return create_model("Plan", subtasks=(list[sub], Field(min_length=len(refs))))


def planner_messages(
    query: str, inputs: Sequence[InputItem], kinds: Sequence[str], error: str | None = None
) -> list[dict[str, str]]:
    """The planner call; ``error`` is the previous answer's validation error, for the retry."""
    schema = plan_schema([i.ref for i in inputs], kinds).model_json_schema()
    system = f"{PLANNER_ROLE}\n\nJSON schema:\n```json\n{json.dumps(schema)}\n```"
    docs = "\n".join(
        f'<doc ref="{i.ref}" chars="{len(i.text)}">{_preview(i.text)}</doc>' for i in inputs
    )
    user = f"Query:\n{query}\n\nInputs:\n{docs}"
    if error:
        user += f"\n\nYour previous plan was rejected: {error}. Answer with a corrected plan."
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _preview(text: str, chars: int = 200) -> str:
    return " ".join(text[:chars].split())


def parse_plan(text: str, refs: Sequence[str], kinds: Sequence[str]) -> Plan:
    """Validate a planner answer; BadOutputError says what is wrong."""
    loose = validate_output(text, plan_schema(refs, kinds))
    data: dict[str, Any] = loose.model_dump()
    return Plan.model_validate(data)


__all__ = [
    "BadOutputError",
    "Plan",
    "SubTask",
    "parse_plan",
    "plan_schema",
    "plannable_kinds",
    "planner_messages",
]
