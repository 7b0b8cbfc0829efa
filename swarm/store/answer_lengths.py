"""How long a model's answers usually are, learned from finished jobs, for the expected
cost the pre-flight prints beside its bound.

The bound prices every answer at its full max_tokens; a job costs what its answers really
take, usually far less. Each finished job adds its successful sub-agents' completion
tokens and count per model and task kind (and per model, any kind) to one Redis hash that
every producer reads (``swarm:answer-tokens``); the embedded mode keeps the same counts in
memory beside its job store. Until a model has MIN_CALLS answers the typical length is a
share of the catalog's ``max_tokens`` (DEFAULT_SHARE).
"""

from __future__ import annotations

import logging
import weakref
from collections import Counter
from collections.abc import Mapping

from swarm.catalog import AGGREGATE_KIND, ModelSpec
from swarm.store.base import JobStore

log = logging.getLogger(__name__)

KEY = "swarm:answer-tokens"
"""Hash: ``<model>|<kind>|calls`` and ``<model>|<kind>|tokens`` -> counts (kind ``*``: any)."""
ANY_KIND = "*"
MIN_CALLS = 5
"""Answers a model needs before its learned length is used."""
DEFAULT_SHARE = 0.25
"""Typical answer as a share of the catalog's max_tokens, until learned."""
KEEP_S = 30 * 86_400
"""The counts expire this long after the last job added to them (every key swarm writes
expires; a model unused for a month starts again from the catalog's share)."""

Answers = Mapping[tuple[str, str], tuple[int, int]]
"""(model, kind) -> (completion tokens, answers)."""

_MEMORY: weakref.WeakKeyDictionary[JobStore, Counter[str]] = weakref.WeakKeyDictionary()


def _counts(store: JobStore) -> Counter[str] | None:
    """The in-memory counts of a store without Redis (None for a Redis store)."""
    if getattr(store, "redis", None) is not None:
        return None
    return _MEMORY.setdefault(store, Counter())


def record(store: JobStore, answers: Answers) -> None:
    """Add a finished job's answers (per model and kind; a sub-agent's also counts for any
    kind, the aggregation's, longer as a rule, only for its own)."""
    fields: Counter[str] = Counter()
    for (model, kind), (tokens, calls) in answers.items():
        for each in {kind} if kind == AGGREGATE_KIND else {kind, ANY_KIND}:
            fields[f"{model}|{each}|tokens"] += tokens
            fields[f"{model}|{each}|calls"] += calls
    if not fields:
        return
    memory = _counts(store)
    if memory is not None:
        memory.update(fields)
        return
    pipe = store.redis.pipeline(transaction=False)  # type: ignore[attr-defined]
    for field, amount in fields.items():
        pipe.hincrby(KEY, field, amount)
    pipe.expire(KEY, KEEP_S)
    pipe.execute()


def learned(store: JobStore, model: str, kind: str | None) -> int | None:
    """The mean answer of ``model`` for ``kind`` (else, but for the aggregation, any
    kind), once it has MIN_CALLS."""
    kinds = (kind,) * 2 if kind == AGGREGATE_KIND else (kind or ANY_KIND, ANY_KIND)
    wanted = [f"{model}|{k}|{part}" for k in kinds for part in ("tokens", "calls")]
    memory = _counts(store)
    if memory is not None:
        values = [memory.get(field, 0) for field in wanted]
    else:
        raw = store.redis.hmget(KEY, wanted)  # type: ignore[attr-defined]
        values = [int(value or 0) for value in raw]
    for tokens, calls in ((values[0], values[1]), (values[2], values[3])):
        if calls >= MIN_CALLS:
            return max(tokens // calls, 1)
    return None


def typical_answer_tokens(store: JobStore | None, model: ModelSpec, kind: str | None) -> int:
    """The answer length the expected cost assumes: learned, else the catalog's share."""
    found = learned(store, model.name, kind) if store is not None else None
    if found is None:
        found = max(int(model.max_tokens * DEFAULT_SHARE), 1)
        log.debug("%s: no learned answer length yet; assuming %d tokens", model.name, found)
    return found


def typical_answers(
    store: JobStore | None, model: ModelSpec, kind: str | None, aggregate: ModelSpec
) -> dict[str, int]:
    """estimate_job's ``answer_tokens`` and ``aggregate_answer_tokens`` for a job whose
    nodes run on ``model`` (routed by ``kind``, None when named) and aggregate on
    ``aggregate``."""
    return {
        "answer_tokens": typical_answer_tokens(store, model, kind),
        "aggregate_answer_tokens": typical_answer_tokens(store, aggregate, AGGREGATE_KIND),
    }
