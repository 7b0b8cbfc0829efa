"""Backends: the servers models are served by, and the limits their models share.

A backend is one OpenAI-compatible server (or one tenant of a hosted gateway): its base URL,
the environment variable holding its key, and limits that hold for all of its models
together (a local server computes one request at a time whichever model name it is sent).
A backend without an in-flight limit, or marked adaptive, has that limit found from latency
(swarm.calls.admission.adaptive).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_BACKEND = "default"
"""The backend of models that name none; without a ``[backends.default]`` table it has no
limits of its own and uses SWARM_BASE_URL."""

Positive = Annotated[int, Field(gt=0)]


class BackendSpec(BaseModel):
    """One server, as the catalog's ``[backends.<name>]`` table describes it."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    name: str
    """Catalog name, referred to by each model's ``backend`` field."""
    base_url: str | None = None
    """The server's OpenAI-compatible base URL; None = SWARM_BASE_URL."""
    api_key_env: str | None = None
    """Environment variable holding the server's key; None = SWARM_API_KEY."""
    rpm: Positive | None = None
    """Requests per minute of all its models together (None = no shared limit)."""
    tpm: Positive | None = None
    """Tokens per minute of all its models together (None = no shared limit)."""
    max_inflight: Positive | None = None
    """Concurrent requests of all its models together; None = found from latency."""
    adaptive: bool | None = None
    """Find the in-flight limit from latency; None = adaptive when max_inflight is unset."""
    implicit: bool = False
    """Made up for models naming no declared backend: no shared limits, never adaptive."""

    @property
    def is_adaptive(self) -> bool:
        """True when admission finds this backend's in-flight limit from latency."""
        if self.implicit:
            return False
        return self.adaptive if self.adaptive is not None else self.max_inflight is None

    @property
    def has_limits(self) -> bool:
        """True when admission holds calls to this backend's limits at all."""
        return self.is_adaptive or any(
            value is not None for value in (self.rpm, self.tpm, self.max_inflight)
        )
