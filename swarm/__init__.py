"""swarm: agent swarms over OpenAI-compatible LLM gateways, on Celery and Redis.

A producer submits many inputs and an instruction; one sub-agent task per input fans out
as a Celery chord to per-model queues; a chord callback aggregates the results on the
aggregate model and writes one report.
"""

from swarm.catalog import Catalog, ModelSpec, load_catalog
from swarm.client import SwarmClient, SwarmHandle, attach, submit
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
from swarm.jobs.report import Report
from swarm.records import ErrorKind, InputItem, JobSpec, NodeEnvelope, Usage
from swarm.settings import Settings, load_settings
from swarm.tools import Tool, tool

__all__ = [
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
