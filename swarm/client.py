"""The producer API: submit a job, follow it, read its report, cancel it.

    client = SwarmClient.from_settings(load_settings())
    handle = client.submit(inputs, "Review this diff for bugs")
    report = handle.wait(timeout=600)

Job state lives in the job store (Redis), so any process can ``attach(job_id)``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

import kombu.exceptions
import redis
from celery import Celery, chord

from swarm.catalog import AGGREGATE_KIND, DEFAULT_KIND, Catalog, ModelSpec, load_catalog
from swarm.cost.budget import check_budget, preflight
from swarm.errors import (
    BrokerUnavailableError,
    InputError,
    JobNotFinishedError,
    JobTimeoutError,
)
from swarm.jobs.defaults import DEFAULT_AGGREGATE, DEFAULT_INSTRUCTION, DEFAULT_PLANNED_AGGREGATE
from swarm.jobs.estimate import estimate_job
from swarm.jobs.fanout import header_signatures, nodes_per_task
from swarm.jobs.queueing import AGGREGATE_TASK, PLAN_TASK, make_celery
from swarm.jobs.report import with_late_billing
from swarm.jobs.taskrepr import NO_KWARGS, aggregate_argsrepr
from swarm.jobs.watchdog import send_watch
from swarm.records import InputItem, JobSpec, NodeTask
from swarm.settings import Settings, load_settings
from swarm.sources.spool import StreamedInputs
from swarm.store import JobStore, Progress, RedisJobStore, gateways
from swarm.tokens import estimate_tokens
from swarm.tools.toolsets import load_toolset

PLAN_KIND = "plan"
WAIT_CHUNK_S = 60.0
"""SwarmHandle.wait without a timeout waits in chunks of this long."""


class SwarmHandle:
    """A submitted job, by id; cheap to create, safe to hold in any process."""

    def __init__(self, job_id: str, store: JobStore, catalog: Catalog | None = None) -> None:
        self.id = job_id
        self._store = store
        self._catalog = catalog

    def progress(self) -> Progress:
        """Nodes total, done, failed and in flight (per model too)."""
        return self._store.progress(self.id)

    def report(self) -> dict[str, Any] | None:
        """The final report, or None while the job runs. Its billing includes calls the
        ledger recorded after it was written (``late_calls``; needs the catalog)."""
        return self._settled(self._store.report(self.id))

    def _settled(self, report: dict[str, Any] | None) -> dict[str, Any] | None:
        if report is None or self._catalog is None:
            return report
        return with_late_billing(report, self._store.ledger(self.id), self._catalog)

    def wait(self, timeout: float | None = None, poll_s: float = 0.05) -> dict[str, Any]:
        """Block until the report exists; JobTimeoutError after ``timeout`` seconds.

        The Redis store wakes up as soon as the report is written (``poll_s`` is the
        in-memory store's polling interval)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left_s = WAIT_CHUNK_S if deadline is None else deadline - time.monotonic()
            report = self._settled(self._store.wait_report(self.id, max(left_s, 0.0), poll_s))
            if report is not None:
                return report
            if deadline is not None and time.monotonic() >= deadline:
                raise JobTimeoutError(f"job {self.id} has no report after {timeout:.0f} s")

    def cancel(self) -> None:
        """Stop the job: nodes that have not called the gateway end as cancelled without
        calling it; calls in flight finish and are billed; the report says cancelled."""
        self._store.cancel(self.id)


class SwarmClient:
    """Submits jobs as one flat chord and attaches to existing ones."""

    def __init__(self, settings: Settings, catalog: Catalog, store: JobStore, app: Celery):
        self.settings = settings
        self.catalog = catalog
        self.store = store
        self.app = app

    @classmethod
    def from_settings(cls, settings: Settings) -> SwarmClient:
        """A client for the broker and job store named by ``settings`` (not embedded)."""
        catalog = load_catalog(settings.config)
        store = RedisJobStore.from_settings(settings)
        return cls(settings, catalog, store, make_celery(settings, catalog))

    def gateway_mismatch(self, base_url: str) -> str | None:
        """One line when the running workers all call another gateway than ``base_url``
        (they publish theirs in the job store's Redis), else None."""
        redis_client = getattr(self.store, "redis", None)
        if redis_client is None:
            return None
        return gateways.mismatch(base_url, gateways.worker_gateways(redis_client))

    def attach(self, job_id: str) -> SwarmHandle:
        """A handle on an existing job; JobNotFoundError when unknown."""
        self.store.spec(job_id)
        return SwarmHandle(job_id, self.store, self.catalog)

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
    ) -> SwarmHandle:
        """Store the job, fan out one sub-agent per input, and return its handle.

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
        spec_model, aggregate = self._route(model, kind)
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
            )
            preflight(bound, budget_usd, force)
        if tasks is not None and len(tasks) != len(items):
            raise InputError(f"{len(tasks)} tasks for {len(items)} inputs")
        for task in tasks or ():
            for name in task.models():
                self.catalog.model(name)
        width = max(4, len(str(len(items) - 1)))
        node_ids = tuple(f"n{i:0{width}d}" for i in range(len(items)))
        spec = JobSpec(
            job_id=job_id or uuid.uuid4().hex,
            instruction=instruction.strip(),
            aggregate_instruction=aggregate_instruction.strip() or DEFAULT_AGGREGATE,
            model=spec_model.name,
            aggregate_model=aggregate.name,
            node_ids=node_ids,
            input_refs=tuple(item.ref for item in items),
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
        )
        try:
            self.store.create_job(spec, (item.text for item in items))
            self.fan_out(spec, [len(i.text) for i in items])
        except (redis.RedisError, kombu.exceptions.OperationalError) as exc:
            raise BrokerUnavailableError(f"cannot reach the broker: {exc}") from None
        return SwarmHandle(spec.job_id, self.store, self.catalog)

    def plan(
        self,
        documents: Sequence[InputItem],
        query: str,
        *,
        aggregate_instruction: str = DEFAULT_PLANNED_AGGREGATE,
        budget_usd: float | None = None,
        job_id: str | None = None,
        tools: str | None = None,
    ) -> SwarmHandle:
        """A planned job: the planner splits ``query`` over the documents into
        routed sub-tasks, they fan out as one chord, and the aggregation answers the query.
        With ``tools`` (e.g. ``docs``) every sub-task runs as an agent with that toolset.
        """
        items = _items(documents)
        if not query.strip():
            raise InputError("the query is empty")
        check_budget(budget_usd)
        if tools is not None:
            load_toolset(tools)
        planner = self.catalog.route(PLAN_KIND)
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
        )
        try:
            self.store.create_job(spec, [item.text for item in items])
            self.app.signature(
                PLAN_TASK,
                args=(spec.job_id,),
                queue=planner.queue,
                task_id=f"{spec.job_id}-plan",
                argsrepr=f"job={spec.job_id}",
            ).apply_async()
        except (redis.RedisError, kombu.exceptions.OperationalError) as exc:
            raise BrokerUnavailableError(f"cannot reach the broker: {exc}") from None
        return SwarmHandle(spec.job_id, self.store, self.catalog)

    def _route(self, model: str | None, kind: str) -> tuple[ModelSpec, ModelSpec]:
        """The sub-agents' model (named, or routed by kind) and the aggregation's."""
        spec_model = self.catalog.model(model) if model else self.catalog.route(kind)
        return spec_model, self.catalog.route(AGGREGATE_KIND)

    def resume(self, job_id: str, *, budget_usd: float | None = None) -> SwarmHandle:
        """Run again the nodes of an ended job that did not succeed, then aggregate again.

        Nodes that succeeded are not called again, answers already billed are reused, and
        the new report replaces the old one. ``budget_usd`` sets a new cap (default: keep
        the job's). JobNotFinishedError while the job has no report yet.
        """
        check_budget(budget_usd)
        spec = self.store.spec(job_id)
        if self.store.report(job_id) is None:
            raise JobNotFinishedError(f"job {job_id} has not ended yet; resume it once it has")
        if budget_usd is not None:
            spec = spec.model_copy(update={"budget_usd": budget_usd})
        done = {env.node_id for env in self.store.envelopes(job_id) if env.ok}
        todo = [node_id for node_id in spec.node_ids if node_id not in done]
        try:
            number = self.store.reopen(spec)
            self.fan_out(spec, only=todo, suffix=f"-r{number}")
        except (redis.RedisError, kombu.exceptions.OperationalError) as exc:
            raise BrokerUnavailableError(f"cannot reach the broker: {exc}") from None
        return SwarmHandle(job_id, self.store, self.catalog)

    def fan_out(
        self,
        spec: JobSpec,
        input_chars: Sequence[int | None] = (),
        *,
        only: Sequence[str] | None = None,
        suffix: str = "",
        watch: bool = True,
    ) -> None:
        """Send the job's chord: the sub-agent nodes on their models' queues, one or several
        per task (swarm.jobs.fanout), then the aggregation on the aggregate model's queue
        (``only``: just those nodes), and the job's watchdog (swarm.jobs.watchdog; ``watch``
        False: the watchdog itself re-sends)."""
        chars = list(input_chars) or [None] * len(spec.node_ids)
        sizes = dict(zip(spec.node_ids, chars, strict=True))
        wanted = set(spec.node_ids if only is None else only)
        nodes = [node_id for node_id in spec.node_ids if node_id in wanted]
        aggregate_queue = self.catalog.model(spec.aggregate_model).queue
        per_task = nodes_per_task(self.settings.nodes_per_task, len(spec.node_ids))
        header = header_signatures(
            self.app, self.catalog, spec, nodes, sizes, per_task=per_task, suffix=suffix
        )
        body = self.app.signature(
            AGGREGATE_TASK,
            args=(spec.job_id,),
            queue=aggregate_queue,
            task_id=f"{spec.job_id}-aggregate{suffix}",
            argsrepr=aggregate_argsrepr(spec),
            kwargsrepr=NO_KWARGS,
        )
        if header:
            # A lazy header: Celery's Redis backend then keeps only weak references to the
            # header's results. Given a list, it tracks (and SUBSCRIBEs to) each header
            # task's result for the life of this process, which reads none of them: 1.6 KB
            # and one Redis subscription per node, and a reconnect at exit (celery#4824).
            chord((sig for sig in header), app=self.app)(body)
        else:  # a resume with every node done: only the aggregation runs again
            body.clone(args=([],)).apply_async()
        if watch:
            send_watch(self.app, self.settings, spec, aggregate_queue, suffix)


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


def submit(
    inputs: Sequence[InputItem | str],
    instruction: str = DEFAULT_INSTRUCTION,
    *,
    settings: Settings | None = None,
    **options: Any,
) -> SwarmHandle:
    """Submit a job to the deployment named by ``settings`` (default: the environment).

    ``options`` are SwarmClient.submit's keyword arguments.
    """
    client = SwarmClient.from_settings(settings or load_settings())
    return client.submit(inputs, instruction, **options)


def attach(job_id: str, *, settings: Settings | None = None) -> SwarmHandle:
    """A handle on an existing job, from any process."""
    return SwarmClient.from_settings(settings or load_settings()).attach(job_id)
