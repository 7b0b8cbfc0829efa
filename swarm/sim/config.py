"""Configuration of the gateway simulator: one frozen pydantic record.

Every field has a default, so ``SimConfig()`` is a fast, unlimited, fault-free gateway.
Units are part of the field names (``_ms``, ``_s``, ``rpm`` = requests per minute, ...).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

from swarm.sim.account import AccountConfig
from swarm.sim.batch_config import BatchSimConfig
from swarm.sim.profiles import ProviderName
from swarm.sim.usage import UsageFormat

Rate = Annotated[float, Field(ge=0.0, le=1.0)]
"""A probability in [0, 1]."""

PositiveInt = Annotated[int, Field(ge=1)]

DEFAULT_MODELS: tuple[str, ...] = (
    "kimi-k2.5",
    "gemini-2.5-flash",
    "claude-sonnet-4.5",
    "gpt-4.1",
    "deepseek-v3.2",
)


class ModelLimits(BaseModel):
    """Rate limits of one model; ``None`` means unlimited."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    rpm: PositiveInt | None = None
    """Requests admitted per sliding 60 s window."""
    tpm: PositiveInt | None = None
    """Tokens (prompt estimate + max_tokens) charged per sliding 60 s window."""
    rps: PositiveInt | None = None
    """Requests admitted per sliding 1 s window."""
    max_concurrent: PositiveInt | None = None
    """Requests in flight at once (admitted, not yet answered)."""


class SimConfig(BaseModel):
    """Behaviour of one simulated OpenAI-compatible gateway."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    latency_ms: float = Field(default=0.0, ge=0.0)
    """Fixed latency of every admitted request; ignored when the lognormal pair is set."""
    latency_p50_ms: float | None = Field(default=None, gt=0.0)
    """Median of a lognormal latency; needs ``latency_p99_ms`` too."""
    latency_p99_ms: float | None = Field(default=None, gt=0.0)
    """99th percentile of the lognormal latency; must be >= ``latency_p50_ms``."""
    knee_rps: float | None = Field(default=None, gt=0.0)
    """Above this many requests in the last second, latency grows (see slowdown_exponent)."""
    knee_inflight: int | None = Field(default=None, gt=0)
    """Above this many requests in flight (per gateway), latency grows the same way."""
    slowdown_exponent: float = Field(default=1.5, ge=0.0)
    """Latency is multiplied by (rate / knee_rps) ** slowdown_exponent above the knee
    (and by (in flight / knee_inflight) ** slowdown_exponent above that knee)."""
    ttft_ms: float | None = Field(default=None, ge=0.0)
    """Generation mode: time to first token of every admitted request."""
    tokens_per_s: float | None = Field(default=None, gt=0.0)
    """Generation mode: completion tokens generated per second after the first token, so an
    answer takes ``ttft_ms + completion_tokens / tokens_per_s`` (times the load slowdown;
    the prompt's length does not count). Either field alone is the generation mode too
    (the other counts 0)."""
    fast_errors: bool | None = None
    """5xx (random or ``[[sim:status=N]]``) come back at once, without the answer latency,
    as a hosted gateway's do. None = on in generation mode, off otherwise. The random 429s
    of ``rate_limit_rate`` and the limit windows' 429s always come back at once."""

    rpm: PositiveInt | None = None
    """Requests per sliding 60 s window, per model; None = unlimited."""
    tpm: PositiveInt | None = None
    """Tokens per sliding 60 s window, per model (prompt estimate + max_tokens)."""
    rps: PositiveInt | None = None
    """Requests per sliding 1 s window, per model; None = unlimited."""
    max_concurrent: PositiveInt | None = None
    """Requests in flight at once, per model; None = unlimited."""
    slots: PositiveInt | None = None
    """Requests the server computes at once, all models together, like a local server
    (llama.cpp computes one); the others queue in arrival order, so latency grows linearly
    with the requests in flight. None = every admitted request is computed at once."""
    finish_abandoned: bool = False
    """Compute a request to the end although its client went away, and bill it (count it in
    ``completed`` and the tokens, and in ``abandoned``), as llama.cpp's server and hosted
    gateways do; it keeps its slot meanwhile. False = a request whose client went away is
    stopped and not counted (``cancelled``)."""
    model_overrides: dict[str, ModelLimits] = Field(default_factory=dict)
    """Per-model limits that replace all four global limits for that model."""

    error_rate: Rate = 0.0
    """Share of admitted requests answered 500/502/503."""
    rate_limit_rate: Rate = 0.0
    """Share of requests answered with a spurious 429 (before admission)."""
    hang_rate: Rate = 0.0
    """Share of admitted requests that never get an answer."""
    bad_json_rate: Rate = 0.0
    """Share of admitted requests answered 200 with an HTML (non-JSON) body."""
    drop_rate: Rate = 0.0
    """Share of admitted requests whose TCP connection is closed without an answer."""
    tool_malformed_rate: Rate = 0.0
    """Share of scripted tool calls sent with arguments that are not JSON (swarm.sim.tools)."""
    spurious_retry_after_s: float = Field(default=1.0, gt=0.0)
    """Retry-After sent with the spurious 429s of ``rate_limit_rate``: random, not tied
    to any rate (an overloaded upstream), unlike the 429s of the rpm/rps/tpm windows, whose
    Retry-After is when the window has room and whose x-ratelimit-remaining-* is 0."""

    seed: int = 0
    """Seed of the latency and fault random generators."""
    api_key: str | None = None
    """When set, requests must carry ``Authorization: Bearer <api_key>``."""
    models: tuple[str, ...] = DEFAULT_MODELS
    """Names listed by GET /v1/models; requests may name any model."""

    cache_min_tokens: PositiveInt = 1024
    """Shortest message prefix (estimated tokens) that prompt caching reports."""
    cache_max_entries: PositiveInt = 100_000
    """Prefix hashes remembered for prompt caching (least recently used are dropped)."""
    prompt_cache: bool = False
    """Cache prompts as hosted providers do (swarm.sim.prompt_cache): a prefix is cached once
    the first request carrying it has been answered, for requests arriving after that.
    False = the older PrefixCache (any earlier answer counts, whatever the arrival)."""
    prompt_cache_ttl_s: float = Field(default=300.0, gt=0.0)
    """With ``prompt_cache``: seconds a cached prefix lives after its last use."""
    access_log: bool = False
    """Log every HTTP request through aiohttp's access logger."""
    no_models: bool = False
    """GET /v1/models (and /v1/models/{model}) answer 404, like a proxy that lets only the
    completion path through."""
    batch: BatchSimConfig = Field(default_factory=BatchSimConfig)
    """The Batch API (``/v1/files``, ``/v1/batches``; swarm.sim.batch)."""
    account: AccountConfig = Field(default_factory=AccountConfig)
    """The provider account: a balance that runs out, provider-typed refusals
    (swarm.sim.account)."""

    provider: ProviderName = "plain"
    """Provider profile (swarm.sim.profiles): the request rules it refuses with a 400,
    which models think, and its usage format. ``plain`` has no rules."""
    usage_format: UsageFormat | None = None
    """Write usage in this format instead of the profile's (swarm.sim.usage), e.g. a
    provider's usage under ``plain`` request rules."""
    reasoning_tokens: int | None = Field(default=None, ge=0)
    """Reasoning tokens of every thinking answer (inside max_tokens and
    completion_tokens); None = a length per request in [64, 512]."""

    @model_validator(mode="after")
    def _check_combinations(self) -> SimConfig:
        p50, p99 = self.latency_p50_ms, self.latency_p99_ms
        if (p50 is None) != (p99 is None):
            raise ValueError("latency_p50_ms and latency_p99_ms must be given together")
        if p50 is not None and p99 is not None and p99 < p50:
            raise ValueError("latency_p99_ms must be >= latency_p50_ms")
        if p50 is not None and self.latency_ms > 0:
            raise ValueError("use either latency_ms or latency_p50_ms/latency_p99_ms, not both")
        if self.generation and (p50 is not None or self.latency_ms > 0):
            raise ValueError(
                "use either latency_ms or latency_p50_ms/latency_p99_ms, or ttft_ms/tokens_per_s"
            )
        if self.fault_rate_total() > 1.0 + 1e-9:
            raise ValueError("the fault rates together must not exceed 1")
        return self

    @property
    def generation(self) -> bool:
        """Latency is a time to first token plus a steady token rate."""
        return self.ttft_ms is not None or self.tokens_per_s is not None

    @property
    def errors_at_once(self) -> bool:
        """Whether 5xx skip the answer latency (``fast_errors``, resolved)."""
        return self.generation if self.fast_errors is None else self.fast_errors

    def fault_rate_total(self) -> float:
        """Sum of all random fault rates (at most 1)."""
        return (
            self.error_rate
            + self.rate_limit_rate
            + self.hang_rate
            + self.bad_json_rate
            + self.drop_rate
        )

    def limits_for(self, model: str) -> ModelLimits:
        """Limits that apply to ``model``: its override, else the global ones."""
        override = self.model_overrides.get(model)
        if override is not None:
            return override
        return ModelLimits(
            rpm=self.rpm, tpm=self.tpm, rps=self.rps, max_concurrent=self.max_concurrent
        )
