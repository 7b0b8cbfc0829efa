"""SwarmClient: submits jobs to a deployment (broker and job store) and attaches to them.

``SwarmClient()`` reads the environment (SWARM_BROKER_URL, SWARM_BASE_URL, ...; keywords
override it), checks the gateway once before its first job as the CLI does, and holds a
Redis pool and a Celery app until ``close()`` (or the end of a ``with`` block).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from celery import Celery

from swarm import tracing
from swarm.catalog import AGGREGATE_KIND, DEFAULT_KIND, Catalog, ModelSpec, load_catalog
from swarm.client import idle
from swarm.client.checks import GatewayChecks
from swarm.client.handle import SwarmHandle
from swarm.client.sending import send_job
from swarm.client.setup import broker_errors, close_app, with_overrides
from swarm.client.specs import JobOptions, Submitted, items_of, plan_spec, submit_bound, submit_spec
from swarm.cost.budget import check_budget, preflight
from swarm.errors import BrokerUnavailableError, InputError, JobNotFinishedError
from swarm.jobs.context_fit import check_max_tokens, node_models
from swarm.jobs.defaults import DEFAULT_AGGREGATE, DEFAULT_INSTRUCTION, DEFAULT_PLANNED_AGGREGATE
from swarm.jobs.planner import PLAN_KIND
from swarm.jobs.queueing import PLAN_TASK, make_celery
from swarm.records import DEFAULT_TENANT, InputItem, JobSpec, NodeTask, check_tenant
from swarm.settings import Settings
from swarm.store import JobStore, RedisJobStore
from swarm.tools.toolsets import load_toolset

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
        self.checks = GatewayChecks(
            self.settings, self.catalog, self.store, check_gateway, check_requests
        )
        self._closed = False

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

    @property
    def check_requests(self) -> bool:
        """Before a job is queued, send one small request per model of the job shaped as
        its nodes' (swarm.calls.preflight.check_requests): a field the provider refuses
        stops the job with the provider's message and the catalog line to change. The CLI
        turns it on; each check is a call the gateway bills."""
        return self.checks.shapes

    @check_requests.setter
    def check_requests(self, on: bool) -> None:
        self.checks.shapes = on

    def check_gateway(self) -> None:
        """List the gateway's models once (the CLI's check), unless this client was made
        with ``check_gateway=False`` or has no base URL; warn (log) when the running workers
        all call another gateway."""
        self.checks.models()

    def release_backends(self) -> None:
        """Clear the holds on the catalog's backends (swarm.calls.backend_health): an empty
        balance or a refused key the person resuming a job has fixed; a hold still due comes
        back at the first refusal."""
        self.checks.release_backends()

    def check_job_requests(
        self, calls: Sequence[tuple[ModelSpec, str]], *, json_mode: bool = False
    ) -> None:
        """Check (model, kind) pairs of a job in its nodes' request shape, at most once each
        per client (see ``check_requests``); nothing without a base URL."""
        self.checks.requests(calls, json_mode)

    def gateway_mismatch(self, base_url: str) -> str | None:
        """One line when the running workers all call another gateway than ``base_url``
        (they publish theirs in the job store's Redis), else None."""
        return self.checks.mismatch(base_url)

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
        items = items_of(inputs)
        if not instruction.strip():
            raise InputError("the instruction is empty")
        check_budget(budget_usd)
        check_tenant(tenant)
        spec_model = self.catalog.model(model) if model else self.catalog.route(kind)
        aggregate = self.catalog.route(AGGREGATE_KIND)
        check_max_tokens(max_tokens, node_models(self.catalog, model, kind))
        self.check_gateway()
        if tools is not None:
            load_toolset(tools)
        options = JobOptions(budget_usd, job_id, tools, deadline_s, tenant, max_tokens, context)
        job = Submitted(items, instruction, aggregate_instruction, spec_model, aggregate,
                        None if model else kind)  # fmt: skip
        if budget_usd is not None:
            preflight(submit_bound(self.settings, self.store, job, options), budget_usd, force)
        if tasks is not None and len(tasks) != len(items):
            raise InputError(f"{len(tasks)} tasks for {len(items)} inputs")
        for task in tasks or ():
            for name in task.models():
                self.catalog.model(name)
        self.check_job_requests([(spec_model, kind), (aggregate, AGGREGATE_KIND)],
                                json_mode=output_schema is not None)  # fmt: skip
        spec = submit_spec(
            self.settings, job, options, output_schema=output_schema, tasks=tasks,
            fallback_models=() if model else self.catalog.routing[kind][1:], tool_root=tool_root,
        )  # fmt: skip
        with broker_errors(), tracing.submitting(spec) as spec:  # the job's root span
            self.store.create_job(
                spec, (item.text for item in items), chunk=self.settings.submit_chunk_nodes
            )
            self.checks.bill(spec.job_id)
            self.fan_out(spec, (len(item.text) for item in items))
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
        items = items_of(documents)
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
        options = JobOptions(budget_usd, job_id, tools, deadline_s, tenant, max_tokens, context)
        models = (planner, self.catalog.route(AGGREGATE_KIND))
        spec = plan_spec(self.settings, items, query, aggregate_instruction, models, options)
        with broker_errors(), tracing.submitting(spec) as spec:  # the job's root span
            self.store.create_job(spec, [item.text for item in items])
            self.checks.bill(spec.job_id)
            self.app.signature(
                PLAN_TASK,
                args=(spec.job_id,),
                queue=planner.queue,
                task_id=f"{spec.job_id}-plan",
                argsrepr=f"job={spec.job_id}",
            ).apply_async()
        return self._handle(spec.job_id)

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
        with broker_errors():
            number = self.store.reopen(spec)
            self.fan_out(spec, only=todo, suffix=f"-r{number}")
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
        parts = (self.app, self.settings, self.catalog, self.store)
        send_job(parts, spec, input_chars, only, suffix, watch)
