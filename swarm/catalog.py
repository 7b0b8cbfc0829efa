"""The model catalog: models, their queues, prices and limits, and routing by task kind.

Loaded once from TOML (the packaged ``data/catalog.toml`` or the file named by
SWARM_CONFIG) and validated with pydantic; any problem becomes a one-line ConfigError that
names the field, so a bad catalog stops a worker or producer at start-up.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from swarm.backends import DEFAULT_BACKEND, BackendSpec
from swarm.errors import ConfigError, UnknownModelError

DEFAULT_KIND = "default"
AGGREGATE_KIND = "aggregate"

NonNegative = Annotated[float, Field(ge=0)]
Positive = Annotated[int, Field(gt=0)]


class ModelSpec(BaseModel):
    """One model as the gateway serves it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    """Catalog name, used in routing and reports."""
    gateway_name: str
    """Model id sent to the gateway."""
    queue: str
    """Celery queue whose workers call this model."""
    input_per_mtok_usd: NonNegative
    """USD per million uncached prompt tokens."""
    output_per_mtok_usd: NonNegative
    """USD per million completion tokens."""
    cached_input_per_mtok_usd: NonNegative
    """USD per million prompt tokens served from the gateway's prompt cache."""
    rpm: Positive
    """Gateway limit: requests per minute."""
    tpm: Positive
    """Gateway limit: tokens per minute."""
    max_inflight: Positive
    """Gateway limit: concurrent requests."""
    rps: Positive | None = None
    """Gateway limit: requests per second, where the gateway has one (None = no such limit)."""
    limit_window: Literal["bucket", "sliding", "fixed"] = "bucket"
    """How the gateway counts ``rpm`` and ``rps``: ``bucket`` (refilled evenly: admission
    spaces calls evenly), or ``sliding`` / ``fixed`` (N per window: admission lets N through
    at once, then waits for the window; a fixed window is held as a sliding one, which never
    passes it)."""
    context_window: Positive
    """Tokens the model accepts, prompt plus completion."""
    max_tokens: Positive
    """Default completion budget per call."""
    backend: str = DEFAULT_BACKEND
    """The ``[backends.<name>]`` serving this model (its limits hold all its models)."""
    batch: bool = False
    """The gateway serves this model through its Batch API (a job with a deadline sends
    its plain nodes as batch files; swarm.batch)."""
    batch_discount: Annotated[float, Field(gt=0, le=1)] = 0.5
    """Price of a batch call as a fraction of the live price."""
    batch_max_lines: Positive = 50_000
    """Lines one batch file may hold (OpenAI: 50,000)."""
    batch_max_bytes: Positive = 100 * 1024 * 1024
    """Bytes one batch file may hold (Kimi: 100 MB; OpenAI: 200 MB)."""
    batch_refused_fields: tuple[str, ...] = ()
    """Body fields the provider refuses in a batch line (Kimi: temperature, top_p); they
    are left out of the lines."""


class Catalog(BaseModel):
    """All models and the routing table (task kind -> model names, best first)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    models: dict[str, ModelSpec]
    routing: dict[str, tuple[str, ...]]
    backends: dict[str, BackendSpec] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _name_models(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        for table in ("models", "backends"):
            if isinstance(data.get(table), dict):
                named = {
                    name: {**spec, "name": name} if isinstance(spec, dict) else spec
                    for name, spec in data[table].items()
                }
                data = {**data, table: named}
        return _with_default_backend(data)

    @model_validator(mode="after")
    def _check_routing(self) -> Catalog:
        if not self.models:
            raise ValueError("models: at least one model is required")
        for kind, names in self.routing.items():
            if not names:
                raise ValueError(f"routing.{kind}: lists no model")
            for name in names:
                if name not in self.models:
                    raise ValueError(f"routing.{kind}: unknown model {name!r}")
        for kind in (DEFAULT_KIND, AGGREGATE_KIND):
            if kind not in self.routing:
                raise ValueError(f"routing.{kind}: missing (required)")
        for spec in self.models.values():
            if spec.backend not in self.backends:
                raise ValueError(f"models.{spec.name}.backend: unknown backend {spec.backend!r}")
        return self

    def backend_of(self, spec: ModelSpec) -> BackendSpec:
        """The backend serving ``spec``."""
        return self.backends[spec.backend]

    def backend_models(self, backend: str) -> tuple[ModelSpec, ...]:
        """The models served by ``backend``, in catalog order."""
        return tuple(spec for spec in self.models.values() if spec.backend == backend)

    def model(self, name: str) -> ModelSpec:
        """The spec of a model by catalog name; UnknownModelError names the known ones."""
        try:
            return self.models[name]
        except KeyError:
            known = ", ".join(sorted(self.models))
            raise UnknownModelError(f"unknown model {name!r} (catalog has: {known})") from None

    def route(self, kind: str) -> ModelSpec:
        """The first model listed for a task kind."""
        try:
            return self.models[self.routing[kind][0]]
        except KeyError:
            known = ", ".join(sorted(self.routing))
            raise UnknownModelError(f"unknown task kind {kind!r} (catalog has: {known})") from None

    def queues(self) -> tuple[str, ...]:
        """Every queue of the catalog, each once, in catalog order."""
        return tuple(dict.fromkeys(spec.queue for spec in self.models.values()))


def _with_default_backend(data: dict[str, Any]) -> dict[str, Any]:
    """Add the implicit default backend (no shared limits) when models use it undeclared."""
    backends = data.get("backends")
    if backends is None:
        backends = {}
    if not isinstance(backends, dict) or DEFAULT_BACKEND in backends:
        return data
    models = data.get("models")
    used = isinstance(models, dict) and any(
        not isinstance(spec, dict) or spec.get("backend", DEFAULT_BACKEND) == DEFAULT_BACKEND
        for spec in models.values()
    )
    if not used:
        return data
    implicit = {"name": DEFAULT_BACKEND, "implicit": True}
    return {**data, "backends": {**backends, DEFAULT_BACKEND: implicit}}


def _first_error_line(exc: ValidationError, source: str) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(part) for part in err["loc"])
    msg = err["msg"].removeprefix("Value error, ")
    where = f"{loc}: " if loc and not msg.startswith(loc) else ""
    return f"invalid model catalog {source}: {where}{msg}"


def parse_catalog(text: str, source: str = "<string>") -> Catalog:
    """Parse and validate catalog TOML; ConfigError carries one line naming the field."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid model catalog {source}: not TOML: {exc}") from None
    try:
        return Catalog.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_first_error_line(exc, source)) from None


def load_catalog(path: Path | None = None) -> Catalog:
    """Load the catalog at ``path``, or the one shipped in the package."""
    if path is None:
        text = resources.files("swarm.data").joinpath("catalog.toml").read_text("utf-8")
        return parse_catalog(text, "(packaged)")
    try:
        text = Path(path).read_text("utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read model catalog {path}: {exc.strerror}") from None
    return parse_catalog(text, str(path))
