"""SwarmClient: submits jobs to a deployment (broker and job store) and attaches to them.

``SwarmClient()`` reads the environment (SWARM_BROKER_URL, SWARM_BASE_URL, ...; keywords
override it), checks the gateway once before its first job as the CLI does, and holds a
Redis pool and a Celery app until ``close()`` (or the end of a ``with`` block).
"""

from __future__ import annotations

import itertools
import logging
import os
import time
import uuid
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import kombu.exceptions
import redis
from celery import Celery
from celery.canvas import Signature

from swarm import tracing
from swarm.batch.fanout import poll_signatures
from swarm.batch.plan import check_deadline, plan_batches
from swarm.batch.policy import batches_within
from swarm.calls import preflight as gateway_preflight
from swarm.calls.gateway import make_client
from swarm.calls.warmup import warmup_floor
from swarm.catalog import AGGREGATE_KIND, DEFAULT_KIND, Catalog, ModelSpec, load_catalog
from swarm.client import idle
from swarm.client.handle import SwarmHandle
from swarm.client.sent import SentNodes
from swarm.cost.batch import at_batch_price
from swarm.cost.budget import check_budget, preflight
from swarm.errors import (
    BrokerUnavailableError,
    InputError,
    JobNotFinishedError,
)
from swarm.id_ranges import NodeIds, RefCollector
from swarm.jobs.context_fit import check_max_tokens, node_models
from swarm.jobs.defaults import DEFAULT_AGGREGATE, DEFAULT_INSTRUCTION, DEFAULT_PLANNED_AGGREGATE
from swarm.jobs.estimate import estimate_job
from swarm.jobs.fanout import NodeSize, header_signatures, nodes_per_task
from swarm.jobs.queueing import AGGREGATE_TASK, PLAN_TASK, make_celery
from swarm.jobs.streamed_chord import send_chord
from swarm.jobs.taskrepr import NO_KWARGS, aggregate_argsrepr
from swarm.jobs.watchdog import send_watch
from swarm.records import DEFAULT_TENANT, InputItem, JobSpec, NodeTask, check_tenant
from swarm.settings import Settings, load_settings
from swarm.sources.spool import StreamedInputs
from swarm.store import JobStore, RedisJobStore, gateways
from swarm.store.answer_lengths import typical_answers
from swarm.store.backend_holds import RedisBackendHolds
from swarm.store.batches import batch_store
from swarm.tokens import estimate_tokens
from swarm.tools.toolsets import load_toolset

PLAN_KIND = "plan"

log = logging.getLogger(__name__)


class SwarmClient(AbstractContextManager["SwarmClient"]):
    """Submits jobs as one flat chord and attaches to existing ones.

    ``SwarmClient()`` reads the settings from the environment; the keywords override them
    (``SwarmClient(broker_url="redis://host:6379/0", base_url="http://gw/v1")``), or
    ``settings`` gives them all. ``catalog``, ``store`` and ``app`` wire a client to parts
    built elsewhere (the embedded mode, a worker); the client closes only what it built.

    Before its first job the client lists the gateway's models once, as the CLI does: an
    unreachable gateway, a rejected key or a wrong base URL is one GatewayUnavailableError
    (or MissingKeyError) with nothing enqueued. ``check_gateway=False`` skips it; without a
    base URL (the workers have their own) there is nothing to check. ``check_requests=True``
    (the CLI's way) also sends, before each job, one small request per model of the job
    shaped as its nodes' requests: a field the provider refuses stops the job there.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        catalog: Catalog | None = None,
        store: JobStore | None = None,
        app: Celery | None = None,
        *,
        broker_url: str | None = None,
        result_url: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        config: str | Path | None = None,
        check_gateway: bool = True,
        check_requests: bool = False,
    ) -> None:
        overrides = {
            name: value
            for name, value in (
                ("broker_url", broker_url),
                ("result_url", result_url),
                ("base_url", base_url),
                ("api_key", api_key),
                ("config", config),
            )
            if value is not None
        }
        self.settings = with_overrides(settings, overrides)
        if store is None and self.settings.embedded:
            raise BrokerUnavailableError(
                "SWARM_BROKER_URL is not set: a SwarmClient submits to a broker "
                "(swarm.testing.embedded() runs jobs in this process)"
            )
        self.catalog = catalog or load_catalog(self.settings.config)
        self.store = store or RedisJobStore.from_settings(self.settings)
        self.app = app or make_celery(self.settings, self.catalog)
        self._owns = (store is None, app is None)
        tracing.setup("swarm")  # on only when OTEL_* configures an exporter
        self._check_gateway = check_gateway
        self.check_requests = check_requests
        """Before a job is queued, send one small request per model of the job shaped as
        its nodes' (swarm.calls.preflight.check_requests): a field the provider refuses
        stops the job with the provider's message and the catalog line to change. The CLI
        turns it on; each check is a call the gateway bills."""
        self._closed = False
        self._requests_checked: set[tuple[str, str]] = set()
        self._check_bills: list[gateway_preflight.Bill] = []

    @classmethod
    def from_settings(cls, settings: Settings, *, check_gateway: bool = True) -> SwarmClient:
        """A client for the broker and job store named by ``settings`` (not embedded)."""
        return cls(settings, check_gateway=check_gateway)

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the Redis pool and the Celery app's broker and result connections this
        client opened (idempotent). Jobs keep running; a handle used afterwards opens a
        connection again."""
        if self._closed:
            return
        self._closed = True
        owns_store, owns_app = self._owns
        if owns_app:
            close_app(self.app)
        redis_client = getattr(self.store, "redis", None)
        if owns_store and redis_client is not None:
            redis_client.close()

    def check_gateway(self) -> None:
        """List the gateway's models once (the CLI's check), unless this client was made
        with ``check_gateway=False`` or has no base URL; warn (log) when the running workers
        all call another gateway."""
        base_url = self.settings.base_url
        if not self._check_gateway or base_url is None:
            return
        key = gateway_key(self.settings)
        openai_client = make_client(self.settings, base_url, key)
        try:
            gateway_preflight.check_gateway(
                openai_client, base_url, keyless=key == gateway_preflight.NO_KEY
            )
        finally:
            openai_client.close()
        self._check_gateway = False  # once per client
        log.debug("swarm: gateway %s answered its model list", base_url)
        if (differs := self.gateway_mismatch(base_url)) is not None:
            log.warning("swarm: %s", differs)

    def release_backends(self) -> None:
        """Clear the holds on the catalog's backends (swarm.calls.backend_health): an empty
        balance or a refused key the person resuming a job has fixed; a hold still due comes
        back at the first refusal."""
        redis_client = getattr(self.store, "redis", None)
        if redis_client is None:
            return
        backends = sorted({spec.backend for spec in self.catalog.models.values()})
        RedisBackendHolds(redis_client).release(backends)
        log.debug("swarm: holds on backends %s cleared", ", ".join(backends))

    def check_job_requests(
        self, calls: Sequence[tuple[ModelSpec, str]], *, json_mode: bool = False
    ) -> None:
        """Check (model, kind) pairs of a job in its nodes' request shape, at most once each
        per client (see ``check_requests``); nothing without a base URL."""
        calls = [c for c in calls if (c[0].name, c[1]) not in self._requests_checked]
        if not self.check_requests or self.settings.base_url is None or not calls:
            return
        key = gateway_key(self.settings)
        self._check_bills += gateway_preflight.check_job_requests(
            self.settings, self.catalog, calls, key, os.environ, json_mode=json_mode
        )
        self._requests_checked.update((model.name, kind) for model, kind in calls)

    def _bill_checks(self, job_id: str) -> None:
        """Count the checks' billed answers in the job's ledger (they were made for it)."""
        for call in gateway_preflight.billed_calls(self._check_bills):
            self.store.record_call(job_id, call)
        self._check_bills = []

    def gateway_mismatch(self, base_url: str) -> str | None:
        """One line when the running workers all call another gateway than ``base_url``
        (they publish theirs in the job store's Redis), else None."""
        redis_client = getattr(self.store, "redis", None)
        if redis_client is None:
            return None
        return gateways.mismatch(base_url, gateways.worker_gateways(redis_client))

    def _handle(self, job_id: str) -> SwarmHandle:
        """The handle of ``job_id``, its report read in pages of SWARM_REPORT_PAGE_NODES;
        its wait names the queues no worker consumes (not on an app built elsewhere: the
        embedded mode's, a worker's)."""
        check = idle.store_idle_check(self.store, self.catalog, self.app) if self._owns[1] else None
        page = self.settings.report_page_nodes
        return SwarmHandle(job_id, self.store, self.catalog, page, idle_check=check)

    def attach(self, job_id: str) -> SwarmHandle:
        """A handle on an existing job; JobNotFoundError when unknown."""
        self.store.spec(job_id)
        return self._handle(job_id)

    def submit(
        self,
        inputs: Sequence[InputItem | str],
        instruction: str = DEFAULT_INSTRUCTION,
        *,
        aggregate_instruction: str = DEFAULT_AGGREGATE,
        model: str | None = None,
        kind: str = DEFAULT_KIND,
        max_tokens: int | None = None,
        job_id: str | None = None,
        budget_usd: float | None = None,
        force: bool = False,
        output_schema: dict[str, Any] | None = None,
        tasks: Sequence[NodeTask] | None = None,
        tools: str | None = None,
        tool_root: str | None = None,
        deadline_s: float | None = None,
        tenant: str = DEFAULT_TENANT,
        context: str | None = None,
    ) -> SwarmHandle:
        """Store the job, fan out one sub-agent per input, and return its handle.

        ``context``: text every sub-agent and the aggregation read before their own input
        (a repository's conventions, a paper's background). It is stored once with the job
        and sent as the shared prompt prefix, identical across nodes, so the gateway bills
        it at its cached price after the first call (swarm.calls.warmup warms the cache).

        ``tenant``: the team the job runs for; each model's tokens are shared between the
        busy tenants by the catalog's ``[tenants]`` weights (InputError for a bad name).

        ``deadline_s``: the job must end within this many seconds; its plain nodes on
        models that batch go through the gateway's Batch API at the batch price while the
        deadline allows (swarm.batch). None: every call is live.

        With ``budget_usd``, the job's cost bound (swarm.cost.budget) is checked first:
        BudgetExceededError, with nothing stored or enqueued, when it passes the budget
        unless ``force``; while running, calls reserve against the cap and the nodes that
        would pass it end ``budget_exceeded`` without calling the gateway.

        ``output_schema`` asks every sub-agent for JSON following that schema; ``tasks``
        (aligned with ``inputs``) gives nodes their own model, instruction and schema.

        ``tools`` makes every sub-agent an agent with that toolset (``repo``, ``docs``, or
        ``pkg.module[:attr]``, which workers import too; swarm.jobs.agent); ``tool_root`` is
        the repository the ``repo`` toolset reads.
        """
        items = _items(inputs)
        if not instruction.strip():
            raise InputError("the instruction is empty")
        check_budget(budget_usd)
        check_tenant(tenant)
        spec_model, aggregate = self._route(model, kind)
        check_max_tokens(max_tokens, node_models(self.catalog, model, kind))
        self.check_gateway()
        if tools is not None:
            load_toolset(tools)
        if budget_usd is not None:
            bound = estimate_job(
                items,
                instruction,
                aggregate_instruction,
                spec_model,
                aggregate,
                max_tokens,
                **agent_bound(self.settings, spec_model, max_tokens, tools),
                context=context,
                warmup_min_tokens=warmup_floor(self.settings),
                **typical_answers(self.store, spec_model, None if model else kind, aggregate),
            )
            if tools is None and spec_model.batch and batches_within(deadline_s):
                bound = at_batch_price(bound, spec_model)  # its nodes go into batch files
            preflight(bound, budget_usd, force)
        if tasks is not None and len(tasks) != len(items):
            raise InputError(f"{len(tasks)} tasks for {len(items)} inputs")
        for task in tasks or ():
            for name in task.models():
                self.catalog.model(name)
        self.check_job_requests([(spec_model, kind), (aggregate, AGGREGATE_KIND)],
                                json_mode=output_schema is not None)  # fmt: skip
        node_ids = NodeIds.for_count(len(items))
        spec = JobSpec(
            job_id=job_id or uuid.uuid4().hex,
            instruction=instruction.strip(),
            aggregate_instruction=aggregate_instruction.strip() or DEFAULT_AGGREGATE,
            model=spec_model.name,
            aggregate_model=aggregate.name,
            node_ids=node_ids,
            input_refs=collect_refs(items),
            submitted_at=time.time(),
            max_tokens=max_tokens,
            min_success_ratio=self.settings.min_success_ratio,
            budget_usd=budget_usd,
            kind=None if model else kind,
            fallback_models=() if model else self.catalog.routing[kind][1:],
            output_schema=output_schema,
            tasks=dict(zip(node_ids, tasks, strict=True)) if tasks else {},
            tools=tools,
            tool_root=tool_root,
            deadline_at=None if deadline_s is None else time.time() + check_deadline(deadline_s),
            tenant=tenant,
            context=context or None,
        )
        try:
            with tracing.submitting(spec) as spec:  # the job's root span (when tracing)
                self.store.create_job(
                    spec, (item.text for item in items), chunk=self.settings.submit_chunk_nodes
                )
                self._bill_checks(spec.job_id)
                self.fan_out(spec, (len(item.text) for item in items))
        except (redis.RedisError, kombu.exceptions.OperationalError) as exc:
            raise BrokerUnavailableError(f"cannot reach the broker: {exc}") from None
        return self._handle(spec.job_id)

    def plan(
        self,
        documents: Sequence[InputItem],
        query: str,
        *,
        aggregate_instruction: str = DEFAULT_PLANNED_AGGREGATE,
        budget_usd: float | None = None,
        job_id: str | None = None,
        tools: str | None = None,
        deadline_s: float | None = None,
        tenant: str = DEFAULT_TENANT,
        max_tokens: int | None = None,
        context: str | None = None,
    ) -> SwarmHandle:
        """A planned job: the planner splits ``query`` over the documents into
        routed sub-tasks, they fan out as one chord, and the aggregation answers the query.
        With ``tools`` (e.g. ``docs``) every sub-task runs as an agent with that toolset;
        ``max_tokens`` caps each sub-task's answer (default: its model's); ``context`` as
        for ``submit``.
        ``deadline_s`` as for ``submit``: the planned sub-tasks on models that batch go
        through the Batch API (the planner's call is live). ``tenant`` as for ``submit``.
        """
        items = _items(documents)
        if not query.strip():
            raise InputError("the query is empty")
        check_budget(budget_usd)
        check_tenant(tenant)
        if tools is not None:
            load_toolset(tools)
        planner = self.catalog.route(PLAN_KIND)
        self.check_gateway()
        kinds = [PLAN_KIND, AGGREGATE_KIND, *self.catalog.routing]  # a plan routes by kind
        self.check_job_requests([(self.catalog.route(k), k) for k in dict.fromkeys(kinds)])
        width = max(4, len(str(len(items) - 1)))
        spec = JobSpec(
            job_id=job_id or uuid.uuid4().hex,
            instruction=query.strip(),
            aggregate_instruction=f"{aggregate_instruction}\n\nQuestion: {query.strip()}",
            model=planner.name,
            aggregate_model=self.catalog.route(AGGREGATE_KIND).name,
            node_ids=tuple(f"d{i:0{width}d}" for i in range(len(items))),
            input_refs=tuple(item.ref for item in items),
            submitted_at=time.time(),
            min_success_ratio=self.settings.min_success_ratio,
            budget_usd=budget_usd,
            tools=tools,
            deadline_at=None if deadline_s is None else time.time() + check_deadline(deadline_s),
            tenant=tenant,
            max_tokens=max_tokens,
            context=context or None,
        )
        try:
            with tracing.submitting(spec) as spec:  # the job's root span (when tracing)
                self._plan(spec, planner, items)
        except (redis.RedisError, kombu.exceptions.OperationalError) as exc:
            raise BrokerUnavailableError(f"cannot reach the broker: {exc}") from None
        return self._handle(spec.job_id)

    def _plan(self, spec: JobSpec, planner: ModelSpec, items: Sequence[InputItem]) -> None:
        """Store a planned job and send its planner task."""
        self.store.create_job(spec, [item.text for item in items])
        self._bill_checks(spec.job_id)
        self.app.signature(
            PLAN_TASK,
            args=(spec.job_id,),
            queue=planner.queue,
            task_id=f"{spec.job_id}-plan",
            argsrepr=f"job={spec.job_id}",
        ).apply_async()

    def _route(self, model: str | None, kind: str) -> tuple[ModelSpec, ModelSpec]:
        """The sub-agents' model (named, or routed by kind) and the aggregation's."""
        spec_model = self.catalog.model(model) if model else self.catalog.route(kind)
        return spec_model, self.catalog.route(AGGREGATE_KIND)

    def resume(self, job_id: str, *, budget_usd: float | None = None) -> SwarmHandle:
        """Run again the nodes of an ended job that did not succeed, then aggregate again.

        Nodes that succeeded are not called again, answers already billed are reused, and
        the new report replaces the old one. ``budget_usd`` sets a new cap (default: keep
        the job's). JobNotFinishedError while the job has no report yet, unless its submit
        stopped half way (the broker went away: Progress.sent stays below the total), when
        every node that has not succeeded is sent again in a new chord. A job that
        succeeded has nothing to resume: its handle comes back with its report untouched.
        """
        check_budget(budget_usd)
        spec = self.store.spec(job_id)
        if (handle := self._handle(job_id)).status() == "succeeded":
            log.info("swarm: job %s succeeded: nothing to resume", job_id)
            return handle
        interrupted = self.store.progress(job_id).sent is not None
        if self.store.report(job_id) is None and not interrupted:
            raise JobNotFinishedError(f"job {job_id} has not ended yet; resume it once it has")
        self.check_gateway()
        self.release_backends()
        if budget_usd is not None:
            spec = spec.model_copy(update={"budget_usd": budget_usd})
        done = {env.node_id for env in self.store.envelopes(job_id) if env.ok}
        todo = [node_id for node_id in spec.node_ids if node_id not in done]
        try:
            number = self.store.reopen(spec)
            self.fan_out(spec, only=todo, suffix=f"-r{number}")
        except (redis.RedisError, kombu.exceptions.OperationalError) as exc:
            raise BrokerUnavailableError(f"cannot reach the broker: {exc}") from None
        return self._handle(job_id)

    def fan_out(
        self,
        spec: JobSpec,
        input_chars: Iterable[int | None] = (),
        *,
        only: Sequence[str] | None = None,
        suffix: str = "",
        watch: bool = True,
    ) -> None:
        """Send the job's chord: the sub-agent nodes on their models' queues, one or several
        per task (swarm.jobs.fanout), then the aggregation on the aggregate model's queue
        (``only``: just those nodes), and the job's watchdog (swarm.jobs.watchdog; ``watch``
        False: the watchdog itself re-sends).

        ``input_chars`` (read as the nodes are sent, aligned with ``spec.node_ids``; shorter
        or empty: unknown) gives the input sizes the task summaries show. The header is made
        and published a message at a time (swarm.jobs.streamed_chord); the nodes read so far
        are recorded every SWARM_SUBMIT_CHUNK_NODES for ``swarm status``."""
        wanted = None if only is None else set(only)
        nodes: Iterable[NodeSize] = (
            (node_id, size)
            for node_id, size in itertools.zip_longest(spec.node_ids, input_chars)
            if node_id is not None and (wanted is None or node_id in wanted)
        )
        aggregate_queue = self.catalog.model(spec.aggregate_model).queue
        per_task = nodes_per_task(self.settings.nodes_per_task, len(spec.node_ids))
        polls: list[Signature] = []
        if spec.deadline_at is not None and only is None:  # resends and resumes run live
            sizes = dict(nodes)  # batch planning weighs every node at once
            planned = plan_batches(spec, self.catalog, list(sizes), sizes, time.time())
            batch_store(self.store).plan(spec.job_id, planned.files)
            nodes = [(node_id, sizes[node_id]) for node_id in planned.live]
            polls = poll_signatures(self.app, self.catalog, spec, planned.files, suffix)
        counted = SentNodes(self.store, spec.job_id, self.settings.submit_chunk_nodes)
        counted.start()
        header = itertools.chain(
            header_signatures(
                self.app, self.catalog, spec, counted.reading(nodes), per_task=per_task,
                suffix=suffix,
            ),
            polls,
        )  # fmt: skip
        body = self.app.signature(
            AGGREGATE_TASK,
            args=(spec.job_id,),
            queue=aggregate_queue,
            task_id=f"{spec.job_id}-aggregate{suffix}",
            argsrepr=aggregate_argsrepr(spec),
            kwargsrepr=NO_KWARGS,
        )
        with tracing.job_step(spec, "fan_out", resend=bool(suffix)):
            send_chord(self.app, header, body, uuid.uuid4().hex, on_sent=counted.sent)
        counted.done()
        if watch:
            send_watch(self.app, self.settings, spec, aggregate_queue, suffix, self.store)


def agent_bound(
    settings: Settings, model: ModelSpec, max_tokens: int | None, tools: str | None
) -> dict[str, int]:
    """How estimate_job bounds an agent node: max steps, each prompt longer than the last by
    the model's turn and an even share of the node's tool calls at their full output cap."""
    if tools is None:
        return {}
    turn = max_tokens or model.max_tokens
    calls_per_step = -(-settings.agent_max_tool_calls // settings.agent_max_steps)
    outputs = estimate_tokens("x" * settings.tool_max_output_chars) * calls_per_step
    return {"steps": settings.agent_max_steps, "step_growth_tokens": turn + outputs}


def _items(inputs: Sequence[InputItem | str]) -> Sequence[InputItem]:
    """The inputs as InputItems; StreamedInputs (swarm.sources.spool) as they are, read
    again on each pass instead of held in memory."""
    if not inputs:
        raise InputError("no inputs: a swarm needs at least one")
    if isinstance(inputs, StreamedInputs):
        return inputs
    return [
        item if isinstance(item, InputItem) else InputItem(ref=f"input:{i}", text=item)
        for i, item in enumerate(inputs)
    ]


def collect_refs(items: Iterable[InputItem]) -> Sequence[str]:
    """The items' refs, as runs of numbered refs when they are (swarm.id_ranges)."""
    refs = RefCollector()
    for item in items:
        refs.add(item.ref)
    return refs.result()


def with_overrides(settings: Settings | None, overrides: dict[str, Any]) -> Settings:
    """``settings`` (default: the environment) with ``overrides`` validated over them."""
    if settings is None:
        return load_settings(**overrides)
    if not overrides:
        return settings
    return load_settings(**{**dict(settings), **overrides})


def gateway_key(settings: Settings) -> str:
    """The key the gateway check sends: the configured one (MissingKeyError for an empty
    or placeholder one), or NO_KEY when none is set at all (a local server may need none)."""
    return settings.gateway_key() or gateway_preflight.NO_KEY


def close_app(app: Celery) -> None:
    """Close the broker connections and the result backend (its Redis pool and the result
    consumer's subscription) of ``app``; Celery's own ``close()`` only forgets its pool.

    Kombu keeps one producer and connection pool per broker URL for the whole process:
    their connections are closed but the pools stay usable (another client of the same
    broker opens new connections when it next sends)."""
    backend = app._backend  # the backend made so far, if any (reading .backend makes one)
    if backend is not None:
        consumer = getattr(backend, "result_consumer", None)
        if consumer is not None:
            consumer.stop()
        client = vars(backend).get("client")  # made on first use (a cached property)
        if client is not None:  # its pool is Celery's: Redis.close() would leave it open
            client.connection_pool.disconnect()
    for pool in (app.amqp._producer_pool, app._pool):
        if pool is not None:  # closes every connection, then refills with unopened ones
            pool.resize(pool.limit, reset=True)
    app.close()
