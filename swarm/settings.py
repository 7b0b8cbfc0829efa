"""Settings: read once from the environment at the edge (CLI, worker start-up), then passed in.

Environment names are the contract's (SWARM_BROKER_URL, SWARM_RESULT_URL, SWARM_BASE_URL,
SWARM_API_KEY or OPENAI_API_KEY, SWARM_CONFIG) plus tuning knobs with the same prefix.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from pydantic import (
    AliasChoices,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from swarm.errors import ConfigError, MissingKeyError

log = logging.getLogger(__name__)

_PLACEHOLDER = re.compile(r"^(YOUR[_-].*|.*[_-]HERE|<.*>|changeme|x+|\.\.\.)$", re.IGNORECASE)
KEY_VARIABLE = "SWARM_API_KEY (or OPENAI_API_KEY)"
"""The variables the gateway key is read from, as messages name them."""
BROKER_SCHEMES = ("redis", "rediss", "unix", "sentinel", "amqp", "amqps", "pyamqp", "memory")
"""URL schemes of SWARM_BROKER_URL: Redis (plain, TLS, socket, Sentinel), RabbitMQ, and
Celery's in-process transport."""
STORE_SCHEMES = ("redis", "rediss", "unix", "sentinel")
"""URL schemes of SWARM_RESULT_URL: the job store is Redis."""
GATEWAY_SCHEMES = ("http", "https")
"""URL schemes of SWARM_BASE_URL (an OpenAI-compatible gateway speaks HTTP)."""


REPLICA_WAIT_MS = 500
"""Default bound of a WAIT for a replica's acknowledgement behind Sentinel (a local replica
acknowledges within a millisecond; the bound is what each such write costs while the
replica is down)."""


class Settings(BaseSettings):
    """Every knob of a producer or worker; immutable once read."""

    model_config = SettingsConfigDict(
        env_prefix="SWARM_", frozen=True, extra="ignore", validate_by_name=True
    )

    broker_url: str | None = None
    """Celery broker; None means the embedded in-process mode."""
    result_url: str | None = None
    """Result backend; None means the broker's Redis, database number + 1."""
    sentinel_master: str | None = None
    """Redis Sentinel: the master name the sentinels monitor, for every ``sentinel://`` URL
    (SWARM_BROKER_URL, SWARM_RESULT_URL); Celery's ``master_name`` transport option."""
    sentinel_password: SecretStr | None = None
    """Redis Sentinel: the sentinels' own password (Celery's ``sentinel_kwargs``); the
    primary's password goes in the URL, ``sentinel://:PASSWORD@host:port/db;...``."""
    replica_wait_ms: int | None = Field(default=None, ge=0)
    """After each write whose loss in a failover would bill or run a call twice (a ledger
    line with its stored answer, a claim, a task lease, a new job), ``WAIT 1`` this long for
    a replica to acknowledge it. None = 500 ms when the job store's URL is ``sentinel://``
    (replicas), 0 (no WAIT) otherwise."""
    store_outage_s: float = Field(default=60.0, ge=0)
    """A billed call's ledger line that cannot be written (Redis unreachable, a failover
    under way) is tried again for this long before the error reaches the task (which then
    runs again later); the line is idempotent by call id."""
    store_read_timeout_s: float = Field(default=10.0, gt=0)
    """A job-store command that gets no answer for this long fails as an outage (a write is
    then tried again for SWARM_STORE_OUTAGE_S, as after a refused connection), so a Redis
    that hangs (a frozen process, a partition that sends no reset) does not hold a worker
    thread or a `swarm status` forever. Well above the store's longest command."""
    base_url: str | None = None
    """OpenAI-compatible gateway; None means the built-in simulator (demo, --simulate)."""
    api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("SWARM_API_KEY", "OPENAI_API_KEY")
    )
    """Gateway key. Never put in task arguments, results or logs."""
    config: Path | None = None
    """Model catalog TOML; None means the packaged catalog."""
    node_timeout_s: float = Field(default=45.0, gt=0)
    """Deadline of one gateway call, enforced by the HTTP client (45 s: a long review answer)."""
    overtime_grace_s: float | None = Field(
        default=None,
        ge=0,
        validation_alias=AliasChoices("SWARM_OVERTIME_GRACE_S", "SWARM_ABANDONED_GRACE_S"),
    )
    """Local backends only (``kind = "local"``): a call that times out at node_timeout_s
    raises the timeout as always, but its request keeps reading this much longer (overtime,
    swarm.calls.local.overtime), so the answer a local server computes anyway is billed in
    the ledger (or taken by the call's retry). None = 40 x node_timeout_s; 0 = off. A hosted
    backend's request closes at the timeout. SWARM_ABANDONED_GRACE_S is its deprecated name."""
    overtime_max: int = Field(
        default=64, ge=0, validation_alias=AliasChoices("SWARM_OVERTIME_MAX", "SWARM_ABANDONED_MAX")
    )
    """Requests per process sent so that they may be read past their deadline (each takes a
    thread and a connection while in flight); beyond it they close at the deadline.
    SWARM_ABANDONED_MAX is its deprecated name."""
    connect_timeout_s: float = Field(default=5.0, gt=0)
    """TCP connect timeout to the gateway."""
    max_attempts: int = Field(default=5, ge=1)
    """Attempts per call, first included, for transient errors."""
    backoff_max_s: float = Field(default=20.0, gt=0)
    """Upper bound of one backoff sleep (Retry-After may still ask for more)."""
    outage_window_s: float = Field(default=120.0, ge=0)
    """How long a backend's gateway may stay unreachable before its calls fail (error kind
    ``outage``). Connection refusals and timeouts of several calls at once pause the backend
    (every worker), one probe a second asks it until it answers; attempts are not used up
    meanwhile. 0: no outage pause (each call spends its own attempts)."""
    outage_min_calls: int = Field(default=3, ge=1)
    """Calls of one backend that failed to connect within 10 s that show its gateway down
    (one failing call on a healthy gateway spends its own attempts)."""
    daily_limit_wait_s: float = Field(default=600.0, ge=0)
    """A backend whose daily limit (Moonshot's TPD) is used up pauses until the reset the
    provider names (else the next 00:00 UTC); a call whose wait would be longer fails at
    once (error kind ``daily_limit``), to be resumed after the reset."""
    backend_hold_s: float = Field(default=900.0, gt=0)
    """A backend whose balance ran out or whose key was refused (401) gets no call for this
    long, or until `swarm resume` (which clears the hold): its nodes fail at once, quoting
    the provider."""
    min_success_ratio: float = Field(default=0.5, ge=0, le=1)
    """Share of nodes that must succeed for the aggregation to run."""
    report_page_nodes: int = Field(default=1000, ge=1)
    """Nodes the aggregation reads from the job store at a time (to count them, to merge
    them, to write the report's node list), that the watchdog asks which have ended at a
    time, and that a report's ``nodes`` read at a time in the Python client: what a
    process holds of a job's nodes at once."""
    submit_chunk_nodes: int = Field(default=1000, ge=1)
    """Inputs a submit stores at a time (one Redis round trip each chunk), and how often
    it records how many nodes it has sent (``swarm status`` shows "submitting N of M"):
    the producer holds one chunk of inputs, and one task message, at a time."""
    result_expires_s: int = Field(default=7 * 86400, gt=0)
    """How long job data, results and chord state live in Redis."""
    estimate_notice_usd: float = Field(default=1.0, ge=0)
    """The CLI prints a job's pre-flight cost bound on stderr before submitting it when the
    bound reaches this many USD (always with --json; 0: for every job)."""
    visibility_timeout_s: int = Field(default=900, gt=0)
    """Redis broker: an unacked task is redelivered after this long."""
    unacked_restore_interval_s: float = Field(default=10.0, gt=0)
    """Redis broker: how often each worker puts unacked tasks older than the visibility
    timeout (a killed worker's) back in their queue. A killed worker's tasks run again
    within visibility_timeout_s + this (kombu's own default sweep: every 100 s)."""
    lease_s: float = Field(default=10.0, ge=1)
    """Lifetime of a worker's leases on its running tasks and calls (swarm.store.leases),
    renewed by its heartbeat every third of it: a killed or frozen worker's work is taken
    over this long (plus a sweep, a fifth of it) after its last heartbeat."""
    malloc_trim_s: float = Field(default=30.0, ge=0)
    """Workers: at most this often, after a task ends, hand the memory the C allocator
    freed back to the system (glibc's malloc_trim; workers.allocator), so a worker's RSS
    does not keep what a large job's many threads once used. 0: never."""
    malloc_arenas: int = Field(default=2, ge=0)
    """Workers: most malloc arenas of the process (glibc's M_ARENA_MAX, set as the worker
    starts; workers.allocator), so the memory a job's many threads freed is not kept in
    one arena per thread. ``MALLOC_ARENA_MAX``, when set, wins. 0: glibc's default (8 per
    core)."""
    quorum_queues: bool = False
    """RabbitMQ: declare the task queues as quorum queues (replicated across the cluster's
    nodes) on topic exchanges, so that countdowns wait in RabbitMQ's delay exchanges
    (swarm.jobs.delayed_delivery). Decide before the queues first exist: RabbitMQ refuses to
    redeclare a queue or an exchange with another type. No effect on the Redis broker."""
    worker_concurrency: int = Field(default=32, ge=1)
    """Threads per worker process (I/O-bound calls)."""
    node_threads: int | None = Field(default=None, ge=1)
    """Calls in flight per worker process (the node threads that run a message's nodes).
    None = max(2 x worker concurrency, 64): admission, not the task threads, bounds calls."""
    worker_soft_shutdown_s: float = Field(default=0.0, ge=0)
    """Celery soft shutdown: on a cold stop (SIGQUIT, or SIGTERM with REMAP_SIGTERM=SIGQUIT)
    running tasks get this long before they are cancelled and requeued; 0 = off. Prefork and
    gevent pools only: the threads pool cannot cancel a task (celery#10490), use SIGTERM."""
    metrics_port: int = Field(default=0, ge=0, le=65535)
    """Prometheus endpoint of a worker process (GET /metrics); 0 = no endpoint."""
    http_pool_size: int = Field(default=256, ge=1)
    """Connections per worker process to the gateway, at most: in 32 pools, each shared by
    the threads given it (swarm.calls.http_pool)."""
    verify_tls: bool = True
    """Verify the gateway's TLS certificate."""
    admission: bool = True
    """Workers share per-model admission control through Redis (false: no global limits)."""
    admission_max_wait_s: float = Field(default=2.0, ge=0)
    """A wait for admission up to this long sleeps in the task; longer goes back to the queue."""
    admission_reserve_s: float = Field(default=1.0, ge=0)
    """A rate-limit wait up to this long (and up to admission_max_wait_s) books the call's
    slot: waiters go in arrival order and ask Redis once, not at every free slot."""
    admission_lease_s: float | None = Field(default=None, gt=0)
    """In-flight lease lifetime: a killed worker's permit returns after this; must exceed
    node_timeout_s. None = lease_s in a worker (its heartbeat renews the permits it holds),
    node_timeout_s + 15 s without a heartbeat (the embedded mode)."""
    admission_window_slack_s: float = Field(default=0.1, ge=0)
    """Tolerated shift between admission and arrival at the gateway (rate margin)."""
    admission_max_countdown_s: float = Field(default=60.0, gt=0)
    """Longest countdown of a task sent back to the queue to wait for admission."""
    admission_tenant_window_s: float = Field(default=60.0, gt=0)
    """Time constant of each tenant's recent token use on a model: tenants share a busy
    model's tokens by weight over about this long (the catalog's ``[tenants]`` table)."""
    admission_max_requeues: int = Field(default=100, ge=0)
    """Times a node may go back to the queue for admission; after that it waits in the task."""
    worker_rate_limit: str | None = None
    """Celery's per-task rate_limit (e.g. ``"100/s"``): a guard PER WORKER PROCESS only; the
    global limits are the admission controller's. None = no Celery rate limit."""
    nodes_per_task: int = Field(default=0, ge=0)
    """Sub-agent nodes carried by one task message, their calls run concurrently
    (swarm.jobs.batch); 0 = auto: 1 up to 49 nodes, then about ten messages per job, at most
    16 nodes each."""
    hedge_after_s: float | None = Field(default=None, gt=0)
    """Hedged calls (swarm.calls.hedging): a sub-agent call still unanswered after this many
    seconds gets one duplicate request; the first answer wins, the other is cancelled.
    None (default) = no fixed delay (hedging is off unless hedge_quantile is set)."""
    hedge_quantile: float | None = Field(default=None, gt=0, lt=1)
    """Hedge after the model's recently observed latency at this quantile (e.g. 0.9, from a
    per-model sketch in Redis) instead; with hedge_after_s too, the later of the two. None
    (default) = off."""
    hedge_max_ratio: float = Field(default=0.1, ge=0, le=1)
    """At most this share of a job's nodes (at least one) get a hedge."""
    hedge_min_samples: int = Field(default=20, ge=1)
    """hedge_quantile waits for this many observed calls of the model."""
    cache_warmup: bool = True
    """Warm the gateway's prompt cache before a fan-out (swarm.calls.warmup): when a job's
    shared prompt prefix reaches its model's ``cache_min_prefix_tokens``, the first node of
    that model calls alone and the others follow once it has answered. False = every node
    calls at once (their shared prefix is billed uncached on the first wave)."""
    cache_warmup_min_tokens: int = Field(default=1024, ge=0)
    """The warm-up runs only for a shared prefix of at least this many tokens (and at least
    its model's ``cache_min_prefix_tokens``): a shorter one saves less than the first
    answer's wait is worth."""
    cache_warmup_wait_s: float | None = Field(default=None, gt=0)
    """Longest a node waits for the first node's answer before calling anyway. None =
    node_timeout_s (one answer's time)."""
    cny_per_usd: float = Field(default=7.3, gt=0)
    """CNY per USD for `swarm cost` (the official rate the seeds quote, ¥7.3 = $1)."""
    agent_max_steps: int = Field(default=8, ge=1)
    """Model calls of one agent node (a node with tools) at most."""
    agent_max_tool_calls: int = Field(default=24, ge=1)
    """Tool calls of one agent node at most."""
    agent_token_budget: int = Field(default=200_000, ge=1)
    """Tokens (prompt plus completion, every step) one agent node may spend."""
    agent_timeout_s: float = Field(default=300.0, gt=0)
    """Deadline over an agent node's whole loop, from its first step."""
    tool_timeout_s: float = Field(default=10.0, gt=0)
    """Longest run of one tool call (a tool may set its own)."""
    tool_max_output_chars: int = Field(default=20_000, ge=100)
    """Characters of a tool's output sent to the model; the rest is cut with a marker."""

    @field_validator("broker_url")
    @classmethod
    def _broker_scheme(cls, url: str | None) -> str | None:
        return _check_scheme(url, BROKER_SCHEMES)

    @field_validator("result_url")
    @classmethod
    def _store_scheme(cls, url: str | None) -> str | None:
        return _check_scheme(url, STORE_SCHEMES)

    @field_validator("base_url")
    @classmethod
    def _gateway_scheme(cls, url: str | None) -> str | None:
        return _check_scheme(url, GATEWAY_SCHEMES)

    @model_validator(mode="after")
    def _visibility_above_calls(self) -> Settings:
        longest_task_s = self.max_attempts * (self.node_timeout_s + self.backoff_max_s)
        if self.visibility_timeout_s <= longest_task_s:
            raise ValueError(
                f"visibility_timeout_s must exceed max_attempts x (node_timeout_s + "
                f"backoff_max_s) = {longest_task_s:.0f} s, or a running task is delivered twice"
            )
        if self.admission_lease_s is not None and self.admission_lease_s <= self.node_timeout_s:
            raise ValueError(
                "admission_lease_s must exceed node_timeout_s, or a slow call loses its permit"
            )
        if self.sentinel_master is None and _sentinel(self.broker_url, self.result_url):
            raise ValueError("a sentinel:// URL needs SWARM_SENTINEL_MASTER (the master name)")
        if self.visibility_timeout_s <= longest_task_s + self.admission_max_countdown_s:
            raise ValueError(
                "visibility_timeout_s must exceed the longest task plus "
                "admission_max_countdown_s, or a requeued task is delivered twice"
            )
        return self

    @property
    def embedded(self) -> bool:
        """True when no broker is configured: everything runs in this process."""
        return self.broker_url is None

    def backend_url(self) -> str | None:
        """The result backend: SWARM_RESULT_URL, else the broker's Redis on the next db."""
        if self.result_url or self.broker_url is None:
            return self.result_url
        return _next_db(self.broker_url)

    @property
    def store_wait_ms(self) -> int:
        """SWARM_REPLICA_WAIT_MS, or its default for the job store's URL."""
        if self.replica_wait_ms is not None:
            return self.replica_wait_ms
        return REPLICA_WAIT_MS if _sentinel(self.backend_url()) else 0

    def usable_key(self) -> str | None:
        """The API key, or None when unset, blank or a placeholder such as YOUR_..._API_KEY."""
        if self.api_key is None:
            return None
        key = self.api_key.get_secret_value().strip()
        return None if not key or _PLACEHOLDER.match(key) else key

    def require_key(self) -> str:
        """The key for a real gateway; MissingKeyError when there is none."""
        key = self.usable_key()
        if key is None:
            raise MissingKeyError(
                f"SWARM_BASE_URL is set but {KEY_VARIABLE} is missing, empty or a placeholder"
            )
        return key

    def gateway_key(self) -> str | None:
        """The key a producer sends to SWARM_BASE_URL: None when no key variable is set
        (a local server needs none); MissingKeyError when one is set but empty or a
        placeholder (``SWARM_API_KEY=`` and ``changeme`` are the same mistake)."""
        if self.api_key is None:
            return None
        if self.usable_key() is None:
            raise MissingKeyError(
                f"{KEY_VARIABLE} is set but empty or a placeholder: set the gateway's key, "
                "or unset the variable for a server that needs none"
            )
        return self.usable_key()


def _check_scheme(url: str | None, schemes: tuple[str, ...]) -> str | None:
    """``url`` when its scheme is one of ``schemes``; else ValueError naming the scheme
    (never the rest of the URL: it may hold a password)."""
    if url is None:
        return None
    scheme, sep, _ = url.partition("://")
    if sep and scheme.lower() in schemes:
        return url
    *others, last = [f"{name}://" for name in schemes]
    accepted = f"{', '.join(others)} or {last}"
    found = f"the scheme {scheme}:// is not accepted" if sep else "not a URL (no scheme://)"
    raise ValueError(f"{found}; use {accepted}")


def _sentinel(*urls: str | None) -> bool:
    return any(url is not None and url.lower().startswith("sentinel://") for url in urls)


def _next_db(url: str) -> str:
    if _sentinel(url):  # Celery's form: sentinel://h:p/db;sentinel://h:p/db;...
        return ";".join(_next_db_of(chunk, "sentinel") for chunk in url.split(";"))
    return _next_db_of(url, "rediss?")


def _next_db_of(url: str, schemes: str) -> str:
    match = re.match(rf"^((?:{schemes})://[^/]*)(?:/(\d+))?(.*)$", url)
    if not match:
        return url
    base, db, rest = match.groups()
    return f"{base}/{int(db or 0) + 1}{rest}"


DEPRECATED_NAMES = {
    "SWARM_ABANDONED_GRACE_S": "SWARM_OVERTIME_GRACE_S",
    "SWARM_ABANDONED_MAX": "SWARM_OVERTIME_MAX",
}
"""Environment names still read, under the name that replaced them (said at WARNING)."""


def load_settings(**overrides: object) -> Settings:
    """Read the environment once; a bad value becomes a one-line ConfigError."""
    for old, new in DEPRECATED_NAMES.items():
        if old in os.environ:
            log.warning("%s is deprecated: it still works, but set %s instead", old, new)
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]).upper()  # a field, or the alias read
        name = loc if loc.startswith("SWARM_") else f"SWARM_{loc}" if loc else "settings"
        message = str(err["msg"]).removeprefix("Value error, ")
        raise ConfigError(f"invalid setting {name}: {message}") from None
