"""Backends: the servers models are served by, and the limits their models share.

A backend is one OpenAI-compatible server (or one tenant of a hosted gateway): its base URL,
the environment variable holding its key, and limits that hold for all of its models
together (a local server computes one request at a time whichever model name it is sent).
A backend declares what it is (``kind``): ``"hosted"`` (the default: a provider or proxy
that serves many clients at once; its calls take the lean path) or ``"local"`` (a server of
its own with a few slots, such as llama.cpp: its calls add pacing, overtime and the adaptive
in-flight limit, swarm.calls.local).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from swarm.providers import ProviderName

DEFAULT_BACKEND = "default"
"""The backend of models that name none; without a ``[backends.default]`` table it has no
limits of its own and uses SWARM_BASE_URL."""

Positive = Annotated[int, Field(gt=0)]
BackendKind = Literal["hosted", "local"]
"""What a backend is: a hosted gateway (the lean call path) or a local server (the local
steps added: swarm.calls.local)."""


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
    kind: BackendKind = "hosted"
    """``"hosted"``: answers and errors come back independently of our own load, calls take
    the lean path. ``"local"``: a server with a few slots; its calls are paced to the node
    timeout, read past it (overtime) and held to an in-flight limit found from latency."""
    max_inflight: Positive | None = None
    """Concurrent requests of all its models together; None = no shared in-flight limit
    (a local backend: found from latency)."""
    adaptive: bool | None = None
    """Find the in-flight limit from latency; None = a local backend without max_inflight."""
    provider: ProviderName = "plain"
    """Whose documented request rules its models follow (swarm.providers): ``"plain"``
    (any OpenAI-compatible server), ``"moonshot"``, ``"openai"``, ``"deepseek"``; a model's
    own ``provider`` overrides it."""
    implicit: bool = False
    """Made up for models naming no declared backend: no shared limits, never adaptive."""

    @property
    def is_adaptive(self) -> bool:
        """True when admission finds this backend's in-flight limit from latency."""
        if self.implicit:
            return False
        if self.adaptive is not None:
            return self.adaptive
        return self.is_local and self.max_inflight is None

    @property
    def is_local(self) -> bool:
        """True for a local server: its calls add the local steps (swarm.calls.local)."""
        return self.kind == "local"

    @property
    def has_limits(self) -> bool:
        """True when admission holds calls to this backend's limits at all."""
        return self.is_adaptive or any(
            value is not None for value in (self.rpm, self.tpm, self.max_inflight)
        )
