"""Per-model admission control shared by every worker: rates, tokens, in-flight leases,
429 feedback and fair share between jobs.

    base          the interface, its records (Ask, Decision, Permit, Outcome), Unlimited
    limits        policy, per-model limits, the GCRA arithmetic and key names
    shares        tenants' weighted shares of a model's recent tokens (pure)
    redis         the Redis controller (Lua scripts in lua/)
    redis_args    the keys and arguments it sends the scripts
    script_args   one typed record per script
    memory        the in-process controller (embedded mode, unit tests)
    memory_state  one model's state in process and the steps that change it
    backend       a backend's limits beside its models' (adaptive where unset)
    feedback      Retry-After / x-ratelimit-* parsing and AIMD steps (pure)
    gate          around one attempt: wait in the task, or RetryLater back to the queue
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from swarm.calls.admission.base import (
    AdmissionController,
    Ask,
    Decision,
    ModelCounters,
    Outcome,
    Permit,
    Refusal,
    Unlimited,
    Verdict,
)
from swarm.calls.admission.limits import AdmissionPolicy

if TYPE_CHECKING:
    from swarm.calls.admission.memory import MemoryAdmission

__all__ = [
    "AdmissionController",
    "AdmissionPolicy",
    "Ask",
    "Decision",
    "MemoryAdmission",
    "ModelCounters",
    "Outcome",
    "Permit",
    "Refusal",
    "Unlimited",
    "Verdict",
]


def __getattr__(name: str) -> object:
    """MemoryAdmission on first use (PEP 562): its 429 feedback imports the OpenAI client,
    which `swarm status` (the Redis counters) does not need."""
    if name != "MemoryAdmission":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from swarm.calls.admission.memory import MemoryAdmission

    return MemoryAdmission
