"""swarm: agent swarms over OpenAI-compatible LLM gateways, on Celery and Redis.

A producer submits many inputs and an instruction; one sub-agent task per input fans out
as a Celery chord to per-model queues; a chord callback aggregates the results on the
aggregate model and writes one report.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from swarm.errors import (
    BrokerUnavailableError,
    BudgetExceededError,
    ConfigError,
    GatewayUnavailableError,
    InputError,
    JobNotFinishedError,
    JobNotFoundError,
    JobTimeoutError,
    MissingKeyError,
    SwarmError,
    UnknownModelError,
)

if TYPE_CHECKING:
    from swarm.catalog import Catalog, ModelSpec, load_catalog
    from swarm.client import (
        AsyncSwarmClient,
        AsyncSwarmHandle,
        JobProgress,
        SwarmClient,
        SwarmHandle,
        attach,
        submit,
    )
    from swarm.jobs.report import Report
    from swarm.records import ErrorKind, InputItem, JobSpec, NodeEnvelope, Usage
    from swarm.settings import Settings, load_settings
    from swarm.tools import Tool, tool

_LAZY = {
    "Catalog": "swarm.catalog",
    "ModelSpec": "swarm.catalog",
    "load_catalog": "swarm.catalog",
    "AsyncSwarmClient": "swarm.client",
    "AsyncSwarmHandle": "swarm.client",
    "JobProgress": "swarm.client",
    "SwarmClient": "swarm.client",
    "SwarmHandle": "swarm.client",
    "attach": "swarm.client",
    "submit": "swarm.client",
    "Report": "swarm.jobs.report",
    "ErrorKind": "swarm.records",
    "InputItem": "swarm.records",
    "JobSpec": "swarm.records",
    "NodeEnvelope": "swarm.records",
    "Usage": "swarm.records",
    "Settings": "swarm.settings",
    "load_settings": "swarm.settings",
    "Tool": "swarm.tools",
    "tool": "swarm.tools",
}
"""Public names imported on first use (PEP 562): `import swarm` (and so every command of the
CLI) does not pay for pydantic, Celery and the OpenAI client until a name needs them."""


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'swarm' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    # producer API
    "AsyncSwarmClient",
    "AsyncSwarmHandle",
    # errors
    "BrokerUnavailableError",
    "BudgetExceededError",
    # configuration
    "Catalog",
    "ConfigError",
    # records
    "ErrorKind",
    "GatewayUnavailableError",
    "InputError",
    "InputItem",
    "JobNotFinishedError",
    "JobNotFoundError",
    "JobProgress",
    "JobSpec",
    "JobTimeoutError",
    "MissingKeyError",
    "ModelSpec",
    "NodeEnvelope",
    "Report",
    "Settings",
    # producer API
    "SwarmClient",
    "SwarmError",
    "SwarmHandle",
    # tools for sub-agents
    "Tool",
    "UnknownModelError",
    "Usage",
    "attach",
    "load_catalog",
    "load_settings",
    "submit",
    "tool",
]
