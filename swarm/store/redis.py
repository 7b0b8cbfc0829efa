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
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import redis

from swarm.cost.pricing import nusd_of_usd, usd_of_nusd
from swarm.errors import BrokerUnavailableError, JobNotFoundError
from swarm.records import JobSpec, NodeEnvelope, Usage
from swarm.store.agents import ToolOutcome, Transcript
from swarm.store.base import (
    RUNNING,
    HedgeCounts,
    JobStore,
    JobSummary,
    LedgerLine,
    NodeBatch,
    Progress,
    progress_from_counts,
    state_of,
    summary_status,
)
from swarm.store.billing import BilledCall, BudgetState, HeldAnswer, StoredAnswer
from swarm.store.companion import Companion
from swarm.store.connect import SentinelOptions, redis_client
from swarm.store.durable import Durable
from swarm.store.leases import TASK, Lease, parse_member
from swarm.store.report_pages import (
    CHUNK,
    NODES_REF,
    chunks,
    page_bounds,
    public_summary,
    report_entries,
    resolve,
    split_report,
    stored_ids,
)
from swarm.store.script_args import (
    STORE_SCRIPTS,
    CountStatesArgs,
    DueArgs,
    FinishArgs,
    FinishBilledArgs,
    IndexArgs,
    LapseArgs,
    RecordArgs,
    ReleaseArgs,
    RenewArgs,
    ReopenArgs,
    ReserveArgs,
    UnclaimArgs,
)
from swarm.store.scripts import Scripts
from swarm.store.spec_cache import SpecCache, spec_revision

if TYPE_CHECKING:
    from swarm.settings import Settings

_LEDGER_FIELDS = (
    "calls",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "reasoning_tokens",
)
MAX_CONNECTIONS = 1024
"""Connections per process: one per thread using Redis at once (task threads plus the node
threads of batched tasks; redis-py's own default of 100 raises MaxConnectionsError)."""
LEASE_INDEX = "swarm:{leases}:due"
"""The lapse index of task leases (swarm.store.leases)."""
JOB_INDEX = "swarm:{jobs}:submitted"
"""The index of jobs by submit time (recent_jobs)."""
_SUMMARY_PARTS = ("spec", "state", "report", "outcome", "cancel", "budget", "phase")
"""The keys recent_jobs reads of each job, in this order."""
REPORT_RECHECK_S = 1.0
"""wait_report reads the report again at least this often (a missed publish costs no more)."""


def _key(job_id: str, part: str) -> str:
    return f"swarm:{{job:{job_id}}}:{part}"


def _state_counts(flat: Sequence[Any]) -> dict[str, int]:
    """count_states.lua's reply (value, count, value, count, ...) as a mapping."""
    return {str(flat[i]): int(flat[i + 1]) for i in range(0, len(flat), 2)}


def _ledger_line(call: BilledCall) -> dict[str, Any]:
    """The script arguments of a billed call's ledger line (record and finish_billed)."""
    usage = call.usage
    return {
        "call_id": call.call_id,
        "model": call.model,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "cached_tokens": usage.cached_tokens,
        "cost_nusd": call.cost_nusd,
        "reasoning_tokens": usage.reasoning_tokens,
    }


def _fence_key(job_id: str, fence: Lease | None) -> str:
    """The key a script checks a fencing token against (a placeholder of the same job
    when there is no fence: every key of a script carries the job's hash tag)."""
    return _key(job_id, fence.name if fence is not None else "nofence")


def _raised(replies: list[Any]) -> list[Any]:
    """``replies`` of a pipeline run with ``raise_on_error=False``; the first error raised."""
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return replies


def _ms(seconds: float) -> int:
    return max(int(seconds * 1000), 1)


class RedisJobStore(JobStore):
    """A JobStore over one redis-py client (thread-safe connection pool)."""

    def __init__(
        self, client: redis.Redis, ttl_s: int, wait_ms: int = 0, outage_s: float = 0.0
    ) -> None:
        self._r = client
        self._ttl_s = ttl_s
        self._scripts = Scripts(client, *STORE_SCRIPTS)
        self._durable = Durable(client, wait_ms, outage_s)
        """The writes that must survive a failover (swarm.store.durable; docs/ha.md)."""
        self._specs = SpecCache()
        self._spec_misses = threading.Lock()

    @classmethod
    def from_url(
        cls,
        url: str,
        ttl_s: int,
        sentinel: SentinelOptions | None = None,
        *,
        wait_ms: int = 0,
        outage_s: float = 0.0,
    ) -> RedisJobStore:
        """Connect lazily to ``url`` (plain or ``sentinel://``, swarm.store.connect);
        check() verifies the connection."""
        client = redis_client(
            url,
            sentinel,
            decode_responses=True,
            socket_connect_timeout=5,
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

    def create_job(self, spec: JobSpec, texts: Iterable[str], *, chunk: int = CHUNK) -> None:
        """The inputs ``chunk`` at a time as ``texts`` yields them (one HSET and round trip
        per chunk, the key's expiry with each: a submit stopped half way leaves nothing
        for good), then the spec, its revision, the budget's cap and the job's place in
        the index of jobs, durable (WAIT: a job lost in a failover would have its tasks
        find nothing; the WAIT covers the chunks written before it)."""
        pipe = self._r.pipeline(transaction=False)
        inputs = _key(spec.job_id, "inputs")
        pairs = zip(spec.node_ids, texts, strict=True)
        while part := list(itertools.islice(pairs, chunk)):
            pipe.hset(inputs, mapping=dict(part))
            pipe.expire(inputs, self._ttl_s)
            pipe.execute()

        def write(pipe: Any) -> None:
            pipe.expire(inputs, self._ttl_s)
            spec_json = spec.to_json()
            pipe.set(_key(spec.job_id, "spec"), spec_json, ex=self._ttl_s)
            pipe.set(_key(spec.job_id, "rev"), spec_revision(spec_json), ex=self._ttl_s)
            if spec.budget_usd is not None:
                budget = _key(spec.job_id, "budget")
                pipe.hset(budget, "cap_nusd", nusd_of_usd(spec.budget_usd))
                pipe.expire(budget, self._ttl_s)
            pipe.zadd(JOB_INDEX, {spec.job_id: spec.submitted_at})
            pipe.zremrangebyscore(JOB_INDEX, "-inf", f"({time.time() - self._ttl_s}")
            pipe.expire(JOB_INDEX, self._ttl_s)

        self._durable.write(write)

    def update_job(self, spec: JobSpec, texts: Iterable[str]) -> None:
        self.create_job(spec, texts)  # only sets the spec, adds inputs and (re)sets the cap

    def spec(self, job_id: str) -> JobSpec:
        """The process's parsed spec while the job's revision key names it (one small GET),
        else read and parsed."""
        found = self._r.get(_key(job_id, "rev"))
        revision = str(found) if found is not None else None
        cached = self._specs.get(job_id, revision)
        if cached is not None:
            return cached
        # One thread reads and parses; the node threads that start the same job with it
        # wait and take its copy instead of each parsing one (a 100,000-node spec parsed
        # by 32 threads at once held a copy per thread).
        with self._spec_misses:
            cached = self._specs.get(job_id, revision)
            if cached is not None:
                return cached
            raw = self._r.get(_key(job_id, "spec"))
            if raw is None:
                raise JobNotFoundError(f"no job {job_id!r} (never submitted, or expired)")
            return self._specs.put(job_id, str(raw), revision)

    def input_text(self, job_id: str, node_id: str) -> str:
        text = self._r.hget(_key(job_id, "inputs"), node_id)
        if text is None:
            raise JobNotFoundError(f"no input {node_id!r} in job {job_id!r}")
        return str(text)

    def _set_state(self, job_id: str, node_id: str, value: str) -> None:
        key = _key(job_id, "state")
        pipe = self._r.pipeline(transaction=False)
        pipe.hset(key, node_id, value)
        pipe.expire(key, self._ttl_s)
        pipe.execute()

    def mark_running(self, job_id: str, node_id: str, model: str) -> None:
        self._set_state(job_id, node_id, f"{RUNNING}|{model}")

    def finish_node(self, job_id: str, envelope: NodeEnvelope, fence: Lease | None = None) -> bool:
        state = state_of(envelope)
        args = FinishArgs(
            envelopes=_key(job_id, "env"),
            states=_key(job_id, "state"),
            fence=_fence_key(job_id, fence),
            node_id=envelope.node_id,
            envelope=envelope.model_dump_json(),
            state=state,
            ttl_s=self._ttl_s,
            fence_token=fence.token if fence is not None else "",
        )
        return int(self._scripts.run(args)) == 1

    def finish_billed_node(
        self, job_id: str, envelope: NodeEnvelope, fence: Lease | None, held: HeldAnswer
    ) -> bool:
        """One script (finish_billed.lua), durable and tried again through an outage as
        record_call: counted once by call id, so a try whose reply was lost counts once."""
        call = held.call
        assert call.answer is not None and call.answer_key is not None
        args = FinishBilledArgs(
            envelopes=_key(job_id, "env"),
            states=_key(job_id, "state"),
            fence=_fence_key(job_id, fence),
            billed=_key(job_id, "billed"),
            ledger=_key(job_id, "ledger"),
            budget=_key(job_id, "budget"),
            answers=_key(job_id, "answers"),
            claim=_key(job_id, held.claim.name),
            node_id=envelope.node_id,
            envelope=envelope.model_dump_json(),
            state=state_of(envelope),
            ttl_s=self._ttl_s,
            fence_token=fence.token if fence is not None else "",
            **_ledger_line(call),
            answer_key=call.answer_key,
            answer=call.answer.model_dump_json(),
            claim_token=held.claim.token,
        )
        also = held.also

        def write() -> Any:  # ``also`` goes with the first try only: a retry never runs it twice
            nonlocal also
            companion, also = also, None
            return self._durable_script(args, companion)

        return int(self._durable.retrying(write)) == 1

    def _durable_script(
        self, args: FinishBilledArgs | RecordArgs, also: Companion | None = None
    ) -> Any:
        """A script's result, then WAIT when one is due (a pipeline's EVAL), with ``also``
        (swarm.store.companion) in the same round trip when it can go in it; alone as EVALSHA
        otherwise."""
        waits = self._durable.waits()
        if also is None and not waits:
            return self._scripts.run(args)
        queued = False

        def build(pipe: Any) -> None:
            nonlocal queued
            if waits:
                self._scripts.run(args, client=pipe)
            else:
                self._scripts.queue(args, pipe)
            queued = also is not None and also.queue(pipe)

        replies = self._durable.write(build, raise_on_error=False)
        if also is not None:
            also.take(replies[1]) if queued else also.run()
        return self._scripts.reply(args, replies[0])

    def envelope(self, job_id: str, node_id: str) -> NodeEnvelope | None:
        raw = self._r.hget(_key(job_id, "env"), node_id)
        return NodeEnvelope.model_validate_json(raw) if raw else None

    def envelopes(self, job_id: str) -> list[NodeEnvelope]:
        spec = self.spec(job_id)
        raw = self._r.hgetall(_key(job_id, "env"))
        return [NodeEnvelope.model_validate_json(raw[n]) for n in spec.node_ids if n in raw]

    def ledger(self, job_id: str) -> dict[str, LedgerLine]:
        raw: dict[str, str] = self._r.hgetall(_key(job_id, "ledger"))  # type: ignore[assignment]
        fields: dict[str, dict[str, int]] = {}
        for name, value in raw.items():
            model, _, field = name.rpartition("|")
            if field in _LEDGER_FIELDS:
                fields.setdefault(model, {})[field] = int(value)
        return {
            model: LedgerLine(
                calls=f.get("calls", 0),
                usage=Usage(**{k: v for k, v in f.items() if k != "calls"}),
            )
            for model, f in sorted(fields.items())
        }

    def note_sent(self, job_id: str, nodes: int | None) -> None:
        if nodes is None:
            self._r.delete(_key(job_id, "sent"))
        else:
            self._r.set(_key(job_id, "sent"), nodes, ex=self._ttl_s)

    def progress(self, job_id: str) -> Progress:
        """One round trip; the node states are counted by the server (count_states.lua):
        what comes back is a few counts, whatever the job's size."""
        spec = self.spec(job_id)
        pipe = self._r.pipeline(transaction=False)
        self._count_states(job_id, pipe)
        pipe.exists(_key(job_id, "report"))
        pipe.get(_key(job_id, "phase"))
        pipe.get(_key(job_id, "sent"))
        counts, finished, phase, sent = pipe.execute()
        total = len(spec.node_ids)
        return progress_from_counts(
            total, _state_counts(counts), bool(finished), phase, None if sent is None else int(sent)
        )

    def _count_states(self, job_id: str, pipe: Any) -> None:
        """Queue the server-side count of ``job_id``'s node states on ``pipe``."""
        self._scripts.run(CountStatesArgs(_key(job_id, "state")), client=pipe)

    def cancel(self, job_id: str) -> None:
        self.spec(job_id)
        self._r.set(_key(job_id, "cancel"), "1", ex=self._ttl_s)

    def cancelled(self, job_id: str) -> bool:
        return bool(self._r.exists(_key(job_id, "cancel")))

    def recent_jobs(self, limit: int) -> list[JobSummary]:
        """Two round trips: the index, then the few keys of each listed job (the report
        itself only for a job whose status was not recorded beside it)."""
        if limit <= 0:
            return []
        listed = [str(job_id) for job_id in self._r.zrevrange(JOB_INDEX, 0, limit - 1)]
        pipe = self._r.pipeline(transaction=False)
        for job_id in listed:
            pipe.get(_key(job_id, "spec"))
            self._count_states(job_id, pipe)
            pipe.exists(_key(job_id, "report"))
            pipe.get(_key(job_id, "outcome"))
            pipe.exists(_key(job_id, "cancel"))
            pipe.hget(_key(job_id, "budget"), "spent_nusd")
            pipe.get(_key(job_id, "phase"))
        found = pipe.execute()
        width = len(_SUMMARY_PARTS)
        rows = (found[i * width : (i + 1) * width] for i in range(len(listed)))
        summaries = (self._summary(job_id, row) for job_id, row in zip(listed, rows, strict=True))
        return [summary for summary in summaries if summary is not None]

    def _summary(self, job_id: str, row: Sequence[Any]) -> JobSummary | None:
        raw_spec, counts, finished, outcome, cancelled, spent, phase = row
        if raw_spec is None:
            return None  # expired (the index is trimmed at the next submit)
        spec = JobSpec.model_validate_json(raw_spec)
        if finished and outcome is None:
            outcome = str((self.report(job_id) or {}).get("status"))
        progress = progress_from_counts(len(spec.node_ids), _state_counts(counts), bool(finished))
        return JobSummary(
            job_id=job_id,
            submitted_at=spec.submitted_at,
            status=summary_status(outcome if finished else None, bool(cancelled)),
            total=progress.total,
            done=progress.done,
            failed=progress.failed,
            in_flight=progress.in_flight,
            cancelled=progress.cancelled,
            cost_usd=usd_of_nusd(int(spent or 0)),
            phase=None if finished else phase,
        )

    def set_phase(self, job_id: str, phase: str) -> None:
        self._r.set(_key(job_id, "phase"), phase, ex=self._ttl_s)

    def save_report(self, job_id: str, report: Mapping[str, Any]) -> bool:
        """The report: its nodes in lists beside it, then its summary (SET NX) and the done
        publish; the status beside it, for listing, only by the call that stored it."""
        if "nodes" not in report:
            return self._save_summary(job_id, dict(report), ())
        split = split_report(report)
        return self.save_report_parts(job_id, split.summary, split.nodes)

    def save_report_parts(
        self,
        job_id: str,
        summary: Mapping[str, Any],
        node_lines: Iterable[str],
        *,
        ok_stored: bool = False,
    ) -> bool:
        """The nodes first, in lists of a fresh name (report_pages.CHUNK per command), then
        the summary naming them (SET NX); the lists are deleted again when another report
        was stored first. ``ok_stored``: an ok node's entry names its envelope instead of
        copying it (report_pages.STORED), and the envelopes live as long as the lists."""
        ref = uuid.uuid4().hex[:12]
        nodes_key, failed_key = lists = self._node_lists(job_id, ref)
        pipe = self._r.pipeline(transaction=False)
        position = 0
        for chunk in chunks(node_lines):
            entries, failed = report_entries(chunk, position, ok_stored)
            pipe.rpush(nodes_key, *entries)
            if failed:
                pipe.rpush(failed_key, *failed)
            pipe.execute()
            position += len(chunk)
        for key in (nodes_key, failed_key, *([_key(job_id, "env")] if ok_stored else [])):
            pipe.expire(key, self._ttl_s)
        pipe.execute()
        return self._save_summary(job_id, {**summary, NODES_REF: ref}, lists)

    def _save_summary(self, job_id: str, summary: dict[str, Any], lists: Sequence[str]) -> bool:
        pipe = self._r.pipeline(transaction=False)
        pipe.set(_key(job_id, "report"), json.dumps(summary), nx=True, ex=self._ttl_s)
        pipe.publish(_key(job_id, "done"), "1")
        stored, _ = pipe.execute()
        if stored:
            self._r.set(_key(job_id, "outcome"), str(summary.get("status")), ex=self._ttl_s)
        elif lists:
            self._r.delete(*lists)
        return bool(stored)

    def _node_lists(self, job_id: str, ref: str) -> tuple[str, str]:
        return _key(job_id, f"rnodes:{ref}"), _key(job_id, f"rfailed:{ref}")

    def _stored_summary(self, job_id: str) -> dict[str, Any] | None:
        raw = self._r.get(_key(job_id, "report"))
        return json.loads(raw) if raw else None

    def wait_report(
        self, job_id: str, timeout_s: float, poll_s: float = 0.05, *, summary: bool = False
    ) -> dict[str, Any] | None:
        """Subscribed to the job's ``done`` channel, so the report is read as soon as it is
        written instead of at the next poll."""
        read = self.report_summary if summary else self.report
        pubsub = self._r.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call, unused-ignore]
        try:
            pubsub.subscribe(_key(job_id, "done"))
            deadline = time.monotonic() + timeout_s
            while (report := read(job_id)) is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                pubsub.get_message(timeout=min(remaining, REPORT_RECHECK_S))
            return report
        finally:
            pubsub.close()

    def report(self, job_id: str) -> dict[str, Any] | None:
        """The summary with every node read back (in pages of report_pages.CHUNK)."""
        summary = self._stored_summary(job_id)
        if summary is None or NODES_REF not in summary:
            return summary
        nodes = list(self.iter_report_nodes(job_id))
        return {**public_summary(summary), "nodes": nodes}

    def report_summary(self, job_id: str) -> dict[str, Any] | None:
        """One GET: the summary as stored."""
        summary = self._stored_summary(job_id)
        if summary is None:
            return None
        return {k: v for k, v in public_summary(summary).items() if k != "nodes"}

    def report_nodes(
        self, job_id: str, offset: int = 0, limit: int | None = None, *, failed: bool = False
    ) -> list[dict[str, Any]]:
        """LRANGE of the page (``failed``: of the failed positions, then those nodes)."""
        summary = self._stored_summary(job_id)
        if summary is None or NODES_REF not in summary:
            return super().report_nodes(job_id, offset, limit, failed=failed)
        nodes_key, failed_key = self._node_lists(job_id, str(summary[NODES_REF]))
        start, stop = page_bounds(offset, limit, self._r.llen(failed_key if failed else nodes_key))
        if stop <= start:
            return []
        if not failed:
            return self._resolved(job_id, self._r.lrange(nodes_key, start, stop - 1))  # type: ignore[arg-type]
        pipe = self._r.pipeline(transaction=False)
        for position in self._r.lrange(failed_key, start, stop - 1):
            pipe.lindex(nodes_key, int(position))
        return self._resolved(job_id, [str(raw) for raw in pipe.execute() if raw])

    def _resolved(self, job_id: str, entries: list[str]) -> list[dict[str, Any]]:
        """The nodes of a node list's entries, the named envelopes read in one HMGET."""
        ids = stored_ids(entries)
        found: list[str | None] = self._r.hmget(_key(job_id, "env"), ids) if ids else []  # type: ignore[assignment]
        return resolve(entries, dict(zip(ids, found, strict=True)))

    def record_call(self, job_id: str, call: BilledCall, fence: Lease | None = None) -> bool:
        key = call.answer_key if call.answer is not None and call.answer_key else ""
        answer = call.answer.model_dump_json() if call.answer is not None and key else ""
        args = RecordArgs(
            billed=_key(job_id, "billed"),
            ledger=_key(job_id, "ledger"),
            budget=_key(job_id, "budget"),
            answers=_key(job_id, "answers"),
            fence=_fence_key(job_id, fence),
            **_ledger_line(call),
            answer_key=key,
            answer=answer,
            ttl_s=self._ttl_s,
            fence_token=fence.token if fence is not None else "",
        )
        # Durable (WAIT) and tried again through an outage: a line lost in a failover is a
        # call the gateway billed that the ledger misses, and its answer lost a call made
        # again. Idempotent by call id, so a try whose reply was lost counts once. With no
        # WAIT to send, the script goes alone (EVALSHA, not a pipeline's EVAL of its text).
        return bool(self._durable.retrying(lambda: self._durable_script(args)))

    def answer(self, job_id: str, key: str) -> StoredAnswer | None:
        raw = self._r.hget(_key(job_id, "answers"), key)
        return StoredAnswer.model_validate_json(raw) if raw else None

    def reserve(
        self, job_id: str, reservation_id: str, amount_nusd: int, *, closing: bool = False
    ) -> bool:
        args = ReserveArgs(
            _key(job_id, "budget"),
            reservation_id,
            amount_nusd,
            "1" if closing else "0",
            self._ttl_s,
        )
        return bool(self._scripts.run(args))

    def release(self, job_id: str, reservation_id: str) -> None:
        self._scripts.run(ReleaseArgs(_key(job_id, "budget"), reservation_id))

    def budget(self, job_id: str) -> BudgetState:
        raw: dict[str, str] = self._r.hgetall(_key(job_id, "budget"))  # type: ignore[assignment]
        cap = raw.get("cap_nusd")
        return BudgetState(
            cap_nusd=int(cap) if cap is not None else None,
            spent_nusd=int(raw.get("spent_nusd", 0)),
            reserved_nusd=int(raw.get("reserved_nusd", 0)),
            exhausted="exhausted" in raw,
        )

    def claim_or_answer(
        self,
        job_id: str,
        slot: str,
        owner: str,
        ttl_s: float,
        key: str,
        also: Companion | None = None,
    ) -> tuple[bool, StoredAnswer | None]:
        """One round trip: SET NX the claim, read its owner and the stored answer, and
        ``also`` (swarm.store.companion) when it can go in the same pipeline. Durable
        (WAIT): a claim lost in a failover lets a duplicate run call at the same time."""
        claim = _key(job_id, f"claim:{slot}")
        queued = False

        def write(pipe: Any) -> None:
            nonlocal queued
            pipe.set(claim, owner, nx=True, px=max(int(ttl_s * 1000), 1))
            pipe.get(claim)
            pipe.hget(_key(job_id, "answers"), key)
            queued = also is not None and also.queue(pipe)

        replies = self._durable.write(write, raise_on_error=False)
        taken, holder, raw = _raised(replies[:3])
        if also is not None:
            also.take(replies[3]) if queued else also.run()
        stored = StoredAnswer.model_validate_json(raw) if raw else None
        return bool(taken) or holder == owner, stored

    def claim(self, job_id: str, slot: str, owner: str, ttl_s: float) -> bool:
        """Durable (WAIT), as claim_or_answer."""
        key = _key(job_id, f"claim:{slot}")

        def write(pipe: Any) -> None:
            pipe.set(key, owner, nx=True, px=max(int(ttl_s * 1000), 1))
            pipe.get(key)

        taken, holder = self._durable.write(write)
        return bool(taken) or holder == owner

    def unclaim(self, job_id: str, slot: str, owner: str) -> None:
        self._scripts.run(UnclaimArgs(_key(job_id, f"claim:{slot}"), owner))

    def take_task_lease(self, lease: Lease, ttl_s: float, signature: str) -> None:
        """One round trip, in this order: the signature, the lapse index, the lease. Whatever
        prefix of it Redis ran before a connection broke is safe: an indexed member whose
        lease was never set is a lapse (the key is the truth) that a sweeper sends again
        with its signature; a signature alone is a message this worker could not lease
        (the broker redelivers it). The latest delivery of a message wins the lease.
        Durable (WAIT): a lease lost in a failover fences its own run off (its renewal
        finds it gone) with no index member left for a sweeper to send the task again."""
        task_id = lease.name.partition(":")[2]
        resend = _key(lease.job_id, "resend")
        ttl_ms = _ms(ttl_s)

        def write(pipe: Any) -> None:
            pipe.hset(resend, task_id, signature)
            pipe.expire(resend, self._ttl_s)
            self._scripts.run(IndexArgs(LEASE_INDEX, ttl_ms, "add", (lease.member,)), client=pipe)
            pipe.set(_key(lease.job_id, lease.name), lease.token, px=ttl_ms)

        self._durable.write(write)

    def defer_task(self, lease: Lease, delay_s: float, signature: str) -> None:
        """One round trip, in this order: the signature, the index member due in
        ``delay_s``, then the run's own lease released (a prefix of it that ran is safe:
        a lease left set lapses within its lifetime, and the due member is sent then).
        Durable (WAIT), as a lease is."""
        task_id = lease.name.partition(":")[2]
        resend = _key(lease.job_id, "resend")
        due_ms = max(int(delay_s * 1000), 0)

        def write(pipe: Any) -> None:
            pipe.hset(resend, task_id, signature)
            pipe.expire(resend, self._ttl_s)
            self._scripts.run(IndexArgs(LEASE_INDEX, due_ms, "add", (lease.member,)), client=pipe)
            self._scripts.run(UnclaimArgs(_key(lease.job_id, lease.name), lease.token), client=pipe)

        self._durable.write(write)

    def hasten_deferred(self, job_id: str) -> int:
        """Three round trips: the job's task ids (its resend hash), which of them are listed
        and not leased, then those moved to now (``XX``: a member a sweeper took meanwhile
        stays off; one a run leased meanwhile is moved back by the run's next renewal)."""
        task_ids = [str(t) for t in self._r.hkeys(_key(job_id, "resend"))]
        if not task_ids:
            return 0
        members = [Lease(job_id, f"{TASK}{task_id}", "").member for task_id in task_ids]
        pipe = self._r.pipeline(transaction=False)
        for task_id, member in zip(task_ids, members, strict=True):
            pipe.exists(_key(job_id, f"{TASK}{task_id}"))
            pipe.zscore(LEASE_INDEX, member)
        found = pipe.execute()
        waiting = [
            member
            for member, leased, due in zip(members, found[::2], found[1::2], strict=True)
            if not leased and due is not None
        ]
        if not waiting:
            return 0
        self._scripts.run(IndexArgs(LEASE_INDEX, 0, "renew", tuple(waiting)))
        return len(waiting)

    def renew_leases(self, leases: Sequence[Lease], ttl_s: float) -> set[Lease]:
        """One round trip renews every lease (one script per job), a second moves the
        renewed task leases' expiry in the lapse index."""
        by_job: dict[str, list[Lease]] = {}
        for lease in leases:
            by_job.setdefault(lease.job_id, []).append(lease)
        if not by_job:
            return set()
        ttl_ms = _ms(ttl_s)
        pipe = self._r.pipeline(transaction=False)
        for job_id, held in by_job.items():
            keys = tuple(_key(job_id, lease.name) for lease in held)
            tokens = tuple(lease.token for lease in held)
            self._scripts.run(RenewArgs(keys, ttl_ms, tokens), client=pipe)
        results = pipe.execute()
        lost: set[Lease] = set()
        for held, kept in zip(by_job.values(), results, strict=True):
            lost.update(lease for lease, ok in zip(held, kept, strict=True) if not int(ok))
        renewed = tuple(x.member for x in leases if x.indexed and x not in lost)
        if renewed:
            self._scripts.run(IndexArgs(LEASE_INDEX, ttl_ms, "renew", renewed))
        return lost

    def release_lease(self, lease: Lease) -> None:
        """The lease, then its index member, and only while the lease holds ``lease``'s
        token: a member whose lease another run took is that run's, and without it a
        sweeper would never send the message again if that run stopped. (A sweeper that
        looks between the two sends a finished message again: it finds the work done.)"""
        released = self._scripts.run(UnclaimArgs(_key(lease.job_id, lease.name), lease.token))
        if lease.indexed and int(released):
            self._r.zrem(LEASE_INDEX, lease.member)

    def lapsed_tasks(self, limit: int) -> list[str]:
        return [str(m) for m in self._scripts.run(DueArgs(LEASE_INDEX, limit))]

    def take_lapse(self, member: str, token: str, hold_s: float) -> str | None:
        """One script: the lease key is the truth (a renewal may not have moved the index
        yet), the hold set with ``token`` picks the one winner."""
        raw = self._scripts.run(self._lapse_args("take", member, token, hold_s))
        return str(raw) if raw else None

    def settle_lapse(self, member: str, token: str) -> None:
        self._scripts.run(self._lapse_args("settle", member, token, 0))

    @staticmethod
    def _lapse_args(mode: str, member: str, token: str, hold_s: float) -> LapseArgs:
        job_id, name = parse_member(member)
        lease, resend = _key(job_id, name), _key(job_id, "resend")
        task_id = name.partition(":")[2]
        return LapseArgs(LEASE_INDEX, lease, resend, mode, member, token, _ms(hold_s), task_id)

    def held_tasks(self, job_id: str, task_ids: Sequence[str]) -> set[str]:
        """One round trip: EXISTS of the lease and ZSCORE in the lapse index per task."""
        if not task_ids:
            return set()
        pipe = self._r.pipeline(transaction=False)
        for task_id in task_ids:
            lease = Lease(job_id, f"{TASK}{task_id}", "")
            pipe.exists(_key(job_id, lease.name))
            pipe.zscore(LEASE_INDEX, lease.member)
        found = pipe.execute()
        return {
            task_id
            for task_id, exists, due in zip(task_ids, found[::2], found[1::2], strict=True)
            if exists or due is not None
        }

    def reopen(self, spec: JobSpec) -> int:
        self.spec(spec.job_id)
        job = spec.job_id
        cap = "" if spec.budget_usd is None else nusd_of_usd(spec.budget_usd)
        spec_json = spec.to_json()
        args = ReopenArgs(
            report=_key(job, "report"),
            cancel=_key(job, "cancel"),
            budget=_key(job, "budget"),
            resumes=_key(job, "resumes"),
            spec=_key(job, "spec"),
            revision=_key(job, "rev"),
            cap_nusd=cap,
            spec_json=spec_json,
            spec_rev=spec_revision(spec_json),
            ttl_s=self._ttl_s,
        )
        number = int(self._scripts.run(args))
        self._r.delete(_key(job, "phase"))  # the new run's aggregation sets its own
        return number

    def take_hedge(self, job_id: str, cap: int) -> bool:
        """Count first, give back when over the cap: never more than ``cap`` are granted
        (a concurrent refusal may refuse one more, which only errs on the safe side)."""
        key = _key(job_id, "hedges")
        pipe = self._r.pipeline(transaction=False)
        pipe.hincrby(key, "sent", 1)
        pipe.expire(key, self._ttl_s)
        sent, _ = pipe.execute()
        if int(sent) <= cap:
            return True
        self._r.hincrby(key, "sent", -1)
        return False

    def hedge_won(self, job_id: str) -> None:
        key = _key(job_id, "hedges")
        pipe = self._r.pipeline(transaction=False)
        pipe.hincrby(key, "won", 1)
        pipe.expire(key, self._ttl_s)
        pipe.execute()

    def hedges(self, job_id: str) -> HedgeCounts:
        sent, won = self._r.hmget(_key(job_id, "hedges"), ["sent", "won"])
        return HedgeCounts(sent=int(sent or 0), won=int(won or 0))

    def count_rate_limited(self, job_id: str, model: str) -> None:
        self._count(job_id, "r429", model)

    def rate_limited(self, job_id: str) -> dict[str, int]:
        return self._counts(job_id, "r429")

    def count_retry(self, job_id: str, model: str) -> None:
        self._count(job_id, "retries", model)

    def retries(self, job_id: str) -> dict[str, int]:
        return self._counts(job_id, "retries")

    def _count(self, job_id: str, part: str, model: str) -> None:
        key = _key(job_id, part)
        pipe = self._r.pipeline(transaction=False)
        pipe.hincrby(key, model, 1)
        pipe.expire(key, self._ttl_s)
        pipe.execute()

    def _counts(self, job_id: str, part: str) -> dict[str, int]:
        raw: dict[str, str] = self._r.hgetall(_key(job_id, part))  # type: ignore[assignment]
        return {model: int(count) for model, count in sorted(raw.items())}

    def load_nodes(self, job_id: str, node_ids: Sequence[str]) -> NodeBatch:
        """One round trip: envelopes, inputs and the cancel flag."""
        pipe = self._r.pipeline(transaction=False)
        pipe.hmget(_key(job_id, "env"), list(node_ids))
        pipe.hmget(_key(job_id, "inputs"), list(node_ids))
        pipe.exists(_key(job_id, "cancel"))
        envelopes, texts, cancelled = pipe.execute()
        missing = [n for n, text in zip(node_ids, texts, strict=True) if text is None]
        if missing:
            raise JobNotFoundError(f"no input {missing[0]!r} in job {job_id!r}")
        return NodeBatch(
            envelopes={
                n: NodeEnvelope.model_validate_json(raw)
                for n, raw in zip(node_ids, envelopes, strict=True)
                if raw
            },
            texts=dict(zip(node_ids, texts, strict=True)),
            cancelled=bool(cancelled),
        )

    def envelopes_of(self, job_id: str, node_ids: Sequence[str]) -> dict[str, NodeEnvelope]:
        """One HMGET."""
        if not node_ids:
            return {}
        raw = self._r.hmget(_key(job_id, "env"), list(node_ids))
        return {
            n: NodeEnvelope.model_validate_json(found)
            for n, found in zip(node_ids, raw, strict=True)
            if found
        }

    def not_ended(self, job_id: str, node_ids: Sequence[str]) -> list[str]:
        """One HEXISTS per node, pipelined (one round trip): no envelope is read."""
        if not node_ids:
            return []
        key = _key(job_id, "env")
        pipe = self._r.pipeline(transaction=False)
        for node_id in node_ids:
            pipe.hexists(key, node_id)
        return [n for n, found in zip(node_ids, pipe.execute(), strict=True) if not found]

    def mark_running_many(self, job_id: str, models: Mapping[str, str]) -> None:
        if not models:
            return
        key = _key(job_id, "state")
        pipe = self._r.pipeline(transaction=False)
        pipe.hset(key, mapping={n: f"{RUNNING}|{model}" for n, model in models.items()})
        pipe.expire(key, self._ttl_s)
        pipe.execute()

    def save_tool_result(self, job_id: str, key: str, outcome: ToolOutcome) -> ToolOutcome:
        tools = _key(job_id, "tools")
        pipe = self._r.pipeline(transaction=False)
        pipe.hsetnx(tools, key, outcome.model_dump_json())
        pipe.hget(tools, key)
        pipe.expire(tools, self._ttl_s)
        _, raw, _ = pipe.execute()
        return ToolOutcome.model_validate_json(raw) if raw else outcome

    def tool_result(self, job_id: str, key: str) -> ToolOutcome | None:
        raw = self._r.hget(_key(job_id, "tools"), key)
        return ToolOutcome.model_validate_json(raw) if raw else None

    def save_transcript(self, job_id: str, transcript: Transcript) -> None:
        key = _key(job_id, "transcripts")
        pipe = self._r.pipeline(transaction=False)
        pipe.hset(key, transcript.node_id, transcript.model_dump_json())
        pipe.expire(key, self._ttl_s)
        pipe.execute()

    def transcript(self, job_id: str, node_id: str) -> Transcript | None:
        raw = self._r.hget(_key(job_id, "transcripts"), node_id)
        return Transcript.model_validate_json(raw) if raw else None
