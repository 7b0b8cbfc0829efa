"""One exception root for everything swarm raises on purpose.

    SwarmError                      root: catch this to catch every swarm failure
    ├── ConfigError                 the settings or the model catalog are invalid
    ├── InputError                  a job's inputs or instruction cannot be used
    ├── UnknownModelError           a model or task kind is not in the catalog
    ├── MissingKeyError             a real gateway is configured but no usable key is set
    ├── BrokerUnavailableError      the broker / job store cannot be reached
    ├── GatewayUnavailableError     the LLM gateway cannot be reached or rejects the key
    ├── JobNotFoundError            no job with that id exists in the job store
    └── JobTimeoutError             waiting for a job's report took longer than allowed

Each class's docstring says when it is raised. Messages are one line, meant for a user.
"""

from __future__ import annotations


class SwarmError(Exception):
    """Root of all swarm errors."""


class ConfigError(SwarmError):
    """Raised when a setting or a catalog field is missing or invalid (the message names it)."""


class InputError(SwarmError):
    """Raised when inputs are empty, unreadable or binary, or the instruction is empty."""


class UnknownModelError(SwarmError):
    """Raised when a model name or task kind is not in the catalog."""


class MissingKeyError(SwarmError):
    """Raised when SWARM_BASE_URL is set but no key (or only a placeholder) is configured."""


class BrokerUnavailableError(SwarmError):
    """Raised when the broker or job store (Redis) does not answer."""


class GatewayUnavailableError(SwarmError):
    """Raised when the gateway is unreachable or answers the start-up check with an error."""


class JobNotFoundError(SwarmError):
    """Raised when a job id is unknown to the job store (never submitted, or expired)."""


class JobTimeoutError(SwarmError):
    """Raised by SwarmHandle.wait() when the report is not ready within the timeout."""
