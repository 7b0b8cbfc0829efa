"""Job store on Redis, shared by producers, workers and `swarm status` on any host.

Keys of one job share the hash tag ``{job:<id>}`` (one slot on Redis Cluster) and expire
``ttl_s`` after their last write:

    swarm:{job:<id>}:spec     string  JobSpec JSON
    swarm:{job:<id>}:rev      string  digest of the spec JSON (swarm.store.spec_cache)
    swarm:{job:<id>}:inputs   hash    node_id -> input text
    swarm:{job:<id>}:state    hash    node_id -> "<running|ok|error>|<model>"
    swarm:{job:<id>}:env      hash    node_id -> NodeEnvelope JSON
    swarm:{job:<id>}:ledger   hash    "<model>|<field>" -> integer
    swarm:{job:<id>}:cancel   string  "1" once cancelled
    swarm:{job:<id>}:report   string  final report's summary JSON, every field but its nodes
                                      (written once, SET NX; reopen deletes it)
    swarm:{job:<id>}:rnodes:<ref>   list  the report's nodes, JSON each, in node order
    swarm:{job:<id>}:rfailed:<ref>  list  positions of its failed nodes (swarm.store.report_pages)
    swarm:{job:<id>}:billed   set     ids of billed calls already in the ledger
    swarm:{job:<id>}:answers  hash    idempotency key -> StoredAnswer JSON
    swarm:{job:<id>}:budget   hash    cap_nusd, spent_nusd, reserved_nusd, exhausted, res:<id>
    swarm:{job:<id>}:claim:<slot>  string  lease: fencing token of the run calling for that slot
    swarm:{job:<id>}:task:<task>   string  lease: fencing token of the run of that task message
    swarm:{job:<id>}:resend   hash    task id -> signature JSON that sends the message again
    swarm:{job:<id>}:resumes  string  how many times the job was resumed
    swarm:{job:<id>}:hedges   hash    sent, won (hedged calls, swarm.calls.hedging)
    swarm:{job:<id>}:r429     hash    model -> 429 answers the job's calls got
    swarm:{job:<id>}:retries  hash    model -> retries of the job's calls
    swarm:{job:<id>}:tools    hash    tool result key -> ToolOutcome JSON (first one wins)
    swarm:{job:<id>}:transcripts  hash  node_id -> Transcript JSON (agent nodes)
    swarm:{job:<id>}:outcome  string  the report's status (written with the report; listing)
    swarm:{job:<id>}:phase    string  what the aggregation does now (set_phase)
    swarm:{job:<id>}:sent     string  nodes the submit has sent so far, while it sends
                                      (note_sent; deleted once every node is sent)
    swarm:{job:<id>}:done     channel published once the report is written (wait_report)

Two keys outside the jobs: the task leases for the sweepers (swarm.jobs.takeover), and the
index of jobs by submit time that `swarm jobs` lists (members older than ``ttl_s`` are
trimmed at each submit, and the index itself expires ``ttl_s`` after the last one):

    swarm:{leases}:due        zset    "<job id>|task:<task id>" -> lease expiry (ms, Redis time)
    swarm:{jobs}:submitted    zset    job id -> submit time (Unix s)

The billing keys are written by the Lua scripts in ``swarm/store/lua/`` (see scripts.py).
``RedisJobStore`` composes the Redis parts of the concerns (swarm.store.specs, nodes,
ledger, claims, reports, counters, transcripts).
"""

from __future__ import annotations

import redis

from swarm.errors import BrokerUnavailableError
from swarm.settings import Settings
from swarm.settings_slice import default_of
from swarm.store import claims, counters, ledger, nodes, reports, specs, transcripts
from swarm.store.base import JobStore
from swarm.store.connect import SentinelOptions, redis_client

JOB_INDEX, LEASE_INDEX = specs.JOB_INDEX, claims.LEASE_INDEX
"""The two keys outside the jobs (above; their concerns name them)."""
MAX_CONNECTIONS = 1024
"""Connections per process: one per thread using Redis at once (task threads plus the node
threads of batched tasks; redis-py's own default of 100 raises MaxConnectionsError)."""


class RedisJobStore(
    specs.RedisSpecs,
    nodes.RedisNodes,
    ledger.RedisLedger,
    claims.RedisClaims,
    reports.RedisReports,
    counters.RedisCounters,
    transcripts.RedisAgents,
    JobStore,
):
    """A JobStore over one redis-py client (thread-safe connection pool)."""

    @classmethod
    def from_url(
        cls,
        url: str,
        ttl_s: int,
        sentinel: SentinelOptions | None = None,
        *,
        wait_ms: int = 0,
        outage_s: float = 0.0,
        read_timeout_s: float = default_of("store_read_timeout_s"),
    ) -> RedisJobStore:
        """Connect lazily to ``url`` (plain or ``sentinel://``, swarm.store.connect);
        check() verifies the connection. A command unanswered for ``read_timeout_s``
        raises redis' TimeoutError (one of STORE_OUTAGES)."""
        client = redis_client(
            url,
            sentinel,
            decode_responses=True,
            socket_connect_timeout=5,
            socket_timeout=read_timeout_s,
            health_check_interval=30,
            max_connections=MAX_CONNECTIONS,
        )
        return cls(client, ttl_s, wait_ms, outage_s)

    @classmethod
    def for_settings(cls, settings: Settings, url: str) -> RedisJobStore:
        """The store on ``url`` with the Sentinel, WAIT and outage options of ``settings``."""
        return cls.from_url(
            url,
            settings.result_expires_s,
            SentinelOptions.from_settings(settings),
            wait_ms=settings.store_wait_ms,
            outage_s=settings.store_outage_s,
            read_timeout_s=settings.store_read_timeout_s,
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> RedisJobStore:
        """The job store on the result backend ``settings`` name, once it answers PING;
        BrokerUnavailableError when no broker is set (embedded mode has no store)."""
        url = settings.backend_url()
        if url is None:
            raise BrokerUnavailableError("SWARM_BROKER_URL is not set (embedded mode has no store)")
        store = cls.for_settings(settings, url)
        store.check()
        return store

    @property
    def redis(self) -> redis.Redis:
        """The store's Redis client (for records kept beside the jobs, e.g. gateways)."""
        return self._r

    def check(self) -> None:
        """PING; BrokerUnavailableError with one line when Redis does not answer."""
        try:
            self._r.ping()
        except redis.RedisError as exc:
            raise BrokerUnavailableError(f"cannot reach Redis: {exc}") from None
