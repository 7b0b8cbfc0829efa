"""The model catalog: models, their queues, prices and limits, and routing by task kind.

Loaded once from TOML (the packaged ``data/catalog.toml`` or the file named by
SWARM_CONFIG) and validated with pydantic in strict mode: a value of the wrong type is
refused, not converted (``rpm = "4800"``), an unknown field is refused with the closest known
name, and a routing kind must be one the code routes (``KNOWN_KINDS``) or one the catalog
declares in its top-level ``kinds = [...]``. Any problem becomes a one-line ConfigError that
names the field and its table, so a bad catalog stops a worker or producer at start-up.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    model_validator,
)
from pydantic_core import ErrorDetails

from swarm.backends import DEFAULT_BACKEND, BackendSpec
from swarm.errors import ConfigError, UnknownModelError
from swarm.providers import (
    CapField,
    ModelFields,
    ProviderName,
    RequestShape,
    Thinking,
    inherit_providers,
    problems,
    shape_of,
)
from swarm.records import TenantName

DEFAULT_KIND = "default"
AGGREGATE_KIND = "aggregate"
KNOWN_KINDS: frozenset[str] = frozenset(
    {DEFAULT_KIND, AGGREGATE_KIND, "plan", "summarize", "extract", "code", "review", "reason"}
)
"""Task kinds the code routes by: the default and the aggregation, the planner's ``plan``,
the summary of an input too long for its model (``summarize``), `swarm review`'s ``review``,
and the kinds the packaged catalog routes. Any other kind must be declared in ``kinds``."""

NonNegative = Annotated[float, Field(ge=0)]
Positive = Annotated[int, Field(gt=0)]
Weight = Annotated[float, Field(gt=0, le=1_000_000)]
"""A tenant's weight: its share of a model's tokens against the other active tenants'."""
ModelList = Annotated[tuple[str, ...], Field(strict=False)]
"""A TOML array of names: an array is a list, which strict mode would not take as a tuple
(its items are still strings only)."""


class ModelSpec(BaseModel):
    """One model as the gateway serves it."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

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
    batch_refused_fields: ModelList = ()
    """Body fields the provider refuses in a batch line (Kimi: temperature, top_p); they
    are left out of the lines."""
    max_output_tokens: Positive | None = None
    """The most one answer of the model may be (its documented output limit); a call
    whose reasoning used its whole cap is retried with a larger cap up to this (None: the
    context window)."""
    provider: ProviderName | None = None
    """Whose documented request rules the model follows (swarm.providers); None: its
    backend's ``provider``."""
    sampling: dict[str, float] | None = Field(default=None, strict=False)
    """Sampling fields sent (``{ temperature = 0.2 }``; ``{}``: none); None: the
    provider's default (``plain``: temperature 0.2; ``moonshot``, ``deepseek``: none)."""
    thinking: Thinking | None = None
    """Send ``{"thinking": {"type": ...}}`` (Moonshot's and DeepSeek's switch); None: not
    sent, the model's own default holds."""
    thinking_by_kind: dict[str, Thinking] = Field(default_factory=dict)
    """The thinking switch for some task kinds (``{ extract = "disabled" }``)."""
    reasoning: bool | None = None
    """A reasoning model (OpenAI's o-series and GPT-5): it always reasons inside its cap,
    takes ``max_completion_tokens`` and no temperature but the default."""
    max_tokens_field: CapField | None = None
    """The body field of the completion cap; None: the provider's for this model."""
    echo_reasoning: bool | None = None
    """Send assistant tool-call messages back with their ``reasoning_content``; None: the
    provider's rule (``moonshot``, ``deepseek``: yes)."""
    extra_body: dict[str, Any] = Field(default_factory=dict)
    """Other body fields sent as they are (``{ reasoning_effort = "low" }``)."""
    _shapes: dict[str, RequestShape] = PrivateAttr(default_factory=dict)

    def __hash__(self) -> int:  # its tables (sampling, extra_body) are dicts
        return hash((self.name, self.gateway_name, self.queue, self.backend, self.max_tokens))

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy (with ``update``), resolving its request shapes afresh: pydantic shares
        the private shape cache between copies."""
        copy = super().model_copy(update=update, deep=deep)
        copy._shapes = {}
        return copy

    @property
    def fields(self) -> ModelFields:
        """The model's request fields as the provider rules read them."""
        return ModelFields(
            provider=self.provider or "plain",
            sampling=self.sampling,
            thinking=self.thinking,
            thinking_by_kind=self.thinking_by_kind,
            reasoning=self.reasoning,
            max_tokens_field=self.max_tokens_field,
            echo_reasoning=self.echo_reasoning,
            extra_body=self.extra_body,
        )

    def shape(self, kind: str) -> RequestShape:
        """What this model's calls of ``kind`` send beside the messages (resolved once per
        kind: swarm.providers.shape_of)."""
        shape = self._shapes.get(kind)
        if shape is None:
            shape = self._shapes[kind] = shape_of(self.fields, kind)
        return shape

    @property
    def output_limit(self) -> int:
        """The most one answer may be: ``max_output_tokens``, else the context window."""
        return min(self.max_output_tokens or self.context_window, self.context_window)

    cache_min_prefix_tokens: Annotated[int, Field(ge=0)] = 0
    """Shortest identical prompt prefix the provider caches (OpenAI: 1,024); 0 = the model
    does not cache prompts (no cache warm-up, no expected cache hits; swarm.calls.warmup)."""


class Catalog(BaseModel):
    """All models and the routing table (task kind -> model names, best first)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    models: dict[str, ModelSpec]
    routing: dict[str, ModelList]
    backends: dict[str, BackendSpec] = Field(default_factory=dict)
    kinds: ModelList = ()
    """Task kinds of this catalog beyond KNOWN_KINDS (e.g. ``kinds = ["translate"]``)."""
    tenants: dict[TenantName, Weight] = Field(default_factory=dict)
    """Weight of each tenant (``[tenants]`` table, ``team-a = 3``); a tenant not listed
    weighs 1."""

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
        return inherit_providers(_with_default_backend(data), DEFAULT_BACKEND)

    @model_validator(mode="after")
    def _check_routing(self) -> Catalog:
        if not self.models:
            raise ValueError("no [models.<name>] table: at least one model is required")
        kinds = KNOWN_KINDS | set(self.kinds)
        for kind, names in self.routing.items():
            self._check_route(kind, names, kinds)
        for kind in (DEFAULT_KIND, AGGREGATE_KIND):
            if kind not in self.routing:
                raise ValueError(f"{kind} in [routing] is missing (required)")
        for spec in self.models.values():
            if spec.backend not in self.backends:
                raise ValueError(
                    f"backend in {_table(('models', spec.name))}: unknown backend "
                    f"{spec.backend!r}{_hint(spec.backend, self.backends)}"
                )
            _check_request_fields(spec, kinds)
        return self

    def _check_route(self, kind: str, names: tuple[str, ...], kinds: frozenset[str]) -> None:
        if kind not in kinds:
            hint = _hint(kind, kinds) or " (declare a kind of your own in kinds = [...])"
            raise ValueError(f"unknown routing kind {kind} in [routing]{hint}")
        if not names:
            raise ValueError(f"{kind} in [routing] lists no model")
        for name in names:
            if name not in self.models:
                raise ValueError(f"{kind} in [routing]: unknown model {name!r}")

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

    def tenant_weight(self, tenant: str) -> float:
        """The weight of ``tenant`` (1 when the catalog does not list it)."""
        return self.tenants.get(tenant, 1.0)

    def queues(self) -> tuple[str, ...]:
        """Every queue of the catalog, each once, in catalog order."""
        return tuple(dict.fromkeys(spec.queue for spec in self.models.values()))


def _check_request_fields(spec: ModelSpec, kinds: frozenset[str]) -> None:
    """Refuse what the model's provider documents as refused, and caps that cannot fit."""
    table = _table(("models", spec.name))
    if spec.max_tokens >= spec.context_window:
        raise ValueError(
            f"max_tokens in {table}: {spec.max_tokens} leaves no room for a prompt in "
            f"context_window {spec.context_window}"
        )
    if spec.max_output_tokens is not None and spec.max_tokens > spec.max_output_tokens:
        raise ValueError(
            f"max_tokens in {table}: {spec.max_tokens} is more than max_output_tokens "
            f"{spec.max_output_tokens}"
        )
    found = problems(spec.fields, kinds)
    if found:
        where, _, why = found[0].partition(": ")
        raise ValueError(f"{where} in {table} (provider {spec.fields.provider}): {why}")


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


_TABLE_FIELDS: dict[str, type[BaseModel]] = {"models": ModelSpec, "backends": BackendSpec}
"""The record each named table of the catalog validates as (its fields, for did-you-mean)."""
_INTERNAL_FIELDS = frozenset({"name", "implicit"})
"""Fields the loader sets itself, never suggested."""
_TYPE_NAMES = {str: "the string", int: "the integer", float: "the float", bool: "the boolean"}
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _hint(name: str, known: Iterable[str]) -> str:
    """`` (did you mean X?)`` for the closest known name, else ``""``."""
    close = difflib.get_close_matches(name, sorted(known), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def _table(path: Sequence[object]) -> str:
    """A table as its TOML header writes it: ``[models."kimi-k2.5"]``."""
    keys = (str(k) if _BARE_KEY.match(str(k)) else f'"{k}"' for k in path)
    return f"[{'.'.join(keys)}]"


def _field_names(path: Sequence[object]) -> Iterable[str]:
    """The fields a table at ``path`` may have."""
    if not path:
        return Catalog.model_fields
    record = _TABLE_FIELDS.get(str(path[0]))
    if record is None or len(path) != 2:
        return ()
    return (name for name in record.model_fields if name not in _INTERNAL_FIELDS)


def _error_line(err: ErrorDetails) -> str:
    """One pydantic error as ``<field> in [<table>]: <what is wrong>``."""
    loc = err["loc"]
    msg = err["msg"].removeprefix("Value error, ")
    if not loc:
        return msg
    if err["type"] == "extra_forbidden":
        path, name = loc[:-1], str(loc[-1])
        hint = _hint(name, _field_names(path))
        if not path:
            what = f"table [{name}]" if isinstance(err.get("input"), dict) else f"field {name}"
            return f"unknown {what} at the top level{hint}"
        return f"unknown field {name} in {_table(path)}{hint}"
    if loc[-1] == "[key]":  # a table's key (a tenant's name)
        return f"invalid key {str(loc[-2])!r} in {_table(loc[:-2])}: {msg}"
    if isinstance(loc[-1], int):  # an item of an array: name the array
        loc = loc[:-1]
    field = str(loc[-1])
    where = f"in {_table(loc[:-1])}" if len(loc) > 1 else "at the top level"
    if err["type"] == "missing":
        return f"missing field {field} {where}"
    if err["type"] == "tuple_type":
        msg = "Input should be an array of names"
    value = err.get("input")
    if isinstance(value, dict | list):
        return f"{field} {where}: {msg}"
    return f"{field} {where}: {msg}, not {_TYPE_NAMES.get(type(value), 'the value')} {value!r}"


def _first_error_line(exc: ValidationError, source: str) -> str:
    """The first error, an unknown field first: a misspelled name is also a missing one."""
    errors = sorted(exc.errors(), key=lambda err: err["type"] != "extra_forbidden")
    return f"invalid model catalog {source}: {_error_line(errors[0])}"


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
