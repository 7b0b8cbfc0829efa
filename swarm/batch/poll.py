"""One poll step of a batch file: create or find its batch, read it, and end its nodes.

A step never waits on the batch: it returns ``done``, or the countdown after which the same
task runs the next step (any worker may run it). In order:

    no batch id    past the switch to live: every node live. Else, holding the file's
                   creation claim, find the batch by its metadata or upload and create it,
                   and store its id before returning (before the message is acknowledged)
    not ended      store its request_counts; past the switch: cancel it and settle
    ended          settle: record its output lines (swarm.batch.ingest), then run every node
                   without an envelope through the sub-agent code (a node whose line was
                   answered reuses that answer, ``via`` batch; the others call live)

A batch still ``cancelling`` when settled leaves a settle step behind (``settle_later``):
it polls until the batch ends and records what the gateway billed for it.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Literal

import openai

from swarm import tracing
from swarm.batch.gateway import BatchGateway, BatchView
from swarm.batch.ingest import record_output
from swarm.batch.lines import FileLines, file_lines
from swarm.batch.policy import TERMINAL, poll_countdown_s, switch_at
from swarm.calls.runtime import Runtime
from swarm.jobs.batch import run_nodes
from swarm.records import JobSpec
from swarm.store.batches import FileState, batch_store
from swarm.store.leases import Lease

log = logging.getLogger(__name__)
CREATE_CLAIM_S = 120.0
"""How long one run holds a file's creation claim (a run killed holding it delays the
next one by at most this)."""
CLAIMED_RETRY_S = 1.0
"""Countdown of a step that found the creation claim held by another run."""
TRANSIENT = (openai.APIConnectionError, openai.APITimeoutError, openai.RateLimitError,
             openai.InternalServerError)  # fmt: skip
"""Gateway errors after which the step is simply tried again later."""


@dataclass(frozen=True)
class PollOutcome:
    """What one step did."""

    state: FileState
    done: bool
    """True once every node of the file has its envelope (the task returns)."""
    countdown_s: float = 0.0
    """Else: when to run the next step."""
    settle_later: bool = False
    """The batch was cancelled but has not ended: a settle step records its billing later."""


@dataclass
class _Step:
    rt: Runtime
    spec: JobSpec
    state: FileState
    pool: Executor | None
    fence: Lease | None
    now: float

    @property
    def gateway(self) -> BatchGateway:
        model = self.rt.catalog.model(self.state.model)
        return BatchGateway(self.rt.client_for(model.backend))

    def save(self, **update: object) -> FileState:
        self.state = self.state.model_copy(update=update)
        batch_store(self.rt.store).put(self.spec.job_id, self.state)
        return self.state

    def later(self, countdown_s: float | None = None) -> PollOutcome:
        state = self.save()
        if countdown_s is None:
            countdown_s = poll_countdown_s(self.now, self.spec.submitted_at, switch_at(self.spec))
        return PollOutcome(state, done=False, countdown_s=countdown_s)


def poll_file(
    rt: Runtime,
    job_id: str,
    index: int,
    *,
    pool: Executor | None = None,
    fence: Lease | None = None,
    settle: bool = False,
) -> PollOutcome:
    """One step of file ``index`` of ``job_id`` (see the module docstring); ``settle``:
    the follow-up of a cancelled batch, done once it ended and its output is recorded."""
    found = batch_store(rt.store).get(job_id, index)
    if found is None:  # the job expired from the store
        return PollOutcome(FileState(index=index, model="", node_ids=()), done=True)
    step = _Step(rt, rt.store.spec(job_id), found, pool, fence, time.time())
    step.state = step.state.model_copy(update={"polls": step.state.polls + 1})
    if settle:
        return _settle_billing(step)
    if step.state.ended:
        return PollOutcome(step.state, done=True)
    if rt.store.cancelled(job_id):
        return _cancelled(step)
    if step.state.batch_id is None:
        return _start(step)
    try:
        view = step.gateway.retrieve(step.state.batch_id)
    except TRANSIENT as exc:
        log.debug("batch %s: status not read (%s); polling again", step.state.batch_id, exc)
        return step.later()
    except openai.APIStatusError as exc:
        return _settle(step, None, f"batch {step.state.batch_id} unreadable: {_short(exc)}")
    _counted(step, view)
    if view.status in TERMINAL:
        return _settle(step, view)
    if step.now < switch_at(step.spec):
        return step.later()
    log.debug("batch %s: the deadline nears with %d of %d lines done; cancelling",
              view.id, view.completed, view.total)  # fmt: skip
    return _settle(step, _cancel(step, view.id, view))


def _counted(step: _Step, view: BatchView) -> None:
    step.state = step.state.model_copy(update={
        "status": view.status, "total": view.total, "completed": view.completed,
        "failed": view.failed,
    })  # fmt: skip


def _start(step: _Step) -> PollOutcome:
    """Find or create the file's batch and store its id; past the switch, all live (a
    batch a dead run created is cancelled, and what it did is recorded)."""
    store, job_id = step.rt.store, step.spec.job_id
    slot, owner = f"batch-create:{step.state.index}", uuid.uuid4().hex
    if not store.claim(job_id, slot, owner, CREATE_CLAIM_S):
        return step.later(CLAIMED_RETRY_S)
    try:
        view = _find_or_create(step, create=step.now < switch_at(step.spec))
    except TRANSIENT as exc:
        log.debug("batch: job %s file %d not created (%s); trying again", job_id,
                  step.state.index, exc)  # fmt: skip
        return step.later()
    except openai.APIStatusError as exc:
        return _settle(step, None, f"the gateway refused the batch ({_short(exc)})")
    finally:
        store.unclaim(job_id, slot, owner)
    if view is None:  # past the switch, or no node has a line: they all run live
        return _settle(step, None)
    step.save(batch_id=view.id, status=view.status, total=view.total)
    if step.now >= switch_at(step.spec):
        return _settle(step, view if view.status in TERMINAL else _cancel(step, view.id, view))
    return step.later()


def _find_or_create(step: _Step, *, create: bool) -> BatchView | None:
    job_id, index = step.spec.job_id, step.state.index
    found = step.gateway.find(job_id, index, step.spec.submitted_at)
    if found is not None or not create:
        return found
    lines = _lines(step, step.state.node_ids)
    if not lines.requests:
        return None
    view = step.gateway.create(job_id, index, lines.jsonl())
    log.debug("batch %s created for job %s file %d: %d lines", view.id, job_id, index,
              len(lines.requests))  # fmt: skip
    return view


def _lines(step: _Step, node_ids: Sequence[str]) -> FileLines:
    texts = step.rt.store.load_nodes(step.spec.job_id, node_ids).texts
    return file_lines(step.rt, step.spec, node_ids, texts)


def _cancel(step: _Step, batch_id: str, known: BatchView | None = None) -> BatchView | None:
    """The batch's status once the gateway was asked to cancel it; ``known`` when it
    could not be asked."""
    try:
        return step.gateway.cancel(batch_id)
    except openai.APIError as exc:
        log.debug("batch %s: cancel failed (%s)", batch_id, exc)
        return known


def _settle(step: _Step, view: BatchView | None, problem: str | None = None) -> PollOutcome:
    """Record the batch's output (when it ended), then end every node of the file."""
    spec, state = step.spec, step.state
    loaded = step.rt.store.load_nodes(spec.job_id, state.node_ids)
    ok = {n for n, envelope in loaded.envelopes.items() if envelope.ok}
    pending = [n for n in state.node_ids if n not in ok]
    problem = problem or (view.error if view is not None else None)
    if problem is not None:
        log.warning("swarm: job %s batch file %d: %s; its %d nodes run live", spec.job_id,
                    state.index, problem, len(pending))  # fmt: skip
    via: dict[str, Literal["live", "batch"]] = {}
    ended = view is not None and view.status in TERMINAL
    # a line's node span: from the batch's creation through its wait and ingest
    with tracing.batch_file(view.id if view else None, view.created_at if view else None):
        if view is not None and ended:
            via = _ingest(step, view, pending, loaded.texts)
        run_nodes(step.rt, spec.job_id, pending, pool=step.pool, fence=step.fence, via=via)
    status = view.status if view is not None else "live"
    done = step.save(status=status, ingested=ended, ended=True, error=problem,
                     live_nodes=state.live_nodes + len(pending) - len(via))  # fmt: skip
    return PollOutcome(done, done=True, settle_later=view is not None and not ended)


def _ingest(
    step: _Step, view: BatchView, pending: Sequence[str], texts: Mapping[str, str]
) -> dict[str, Literal["live", "batch"]]:
    """Record every output line (billing), and the pending nodes whose stored answer is a
    batch line."""
    lines = file_lines(step.rt, step.spec, step.state.node_ids, texts)
    model = step.rt.catalog.model(step.state.model)
    rows = step.gateway.lines(view.output_file_id)
    record_output(step.rt, step.spec.job_id, model, view.id, rows, lines.by_key())
    via: dict[str, Literal["live", "batch"]] = {}
    for node_id in pending:
        request = lines.requests.get(node_id)
        stored = None if request is None else step.rt.store.answer(step.spec.job_id, request.key)
        if stored is not None and stored.via == "batch":
            via[node_id] = "batch"
    return via


def _settle_billing(step: _Step) -> PollOutcome:
    """The follow-up of a cancelled batch: once it ended, record what it billed."""
    batch_id = step.state.batch_id
    if batch_id is None:
        return PollOutcome(step.state, done=True)
    try:
        view = step.gateway.retrieve(batch_id)
    except TRANSIENT:
        return step.later()
    if view.status not in TERMINAL:
        return step.later()
    _record_billing(step, view)
    return PollOutcome(step.save(ingested=True), done=True)


def _record_billing(step: _Step, view: BatchView) -> None:
    """Record every answered line of an ended batch (billing; answers kept if first)."""
    lines = _lines(step, step.state.node_ids)
    model = step.rt.catalog.model(step.state.model)
    rows = step.gateway.lines(view.output_file_id)
    record_output(step.rt, step.spec.job_id, model, view.id, rows, lines.by_key())
    _counted(step, view)


def _cancelled(step: _Step) -> PollOutcome:
    """The job was cancelled: cancel the batch, end the nodes (as cancelled)."""
    batch_id = step.state.batch_id
    view = None if batch_id is None else _cancel(step, batch_id)
    run_nodes(step.rt, step.spec.job_id, step.state.node_ids, pool=step.pool, fence=step.fence)
    ended = view is not None and view.status in TERMINAL
    if view is not None and ended:
        _record_billing(step, view)  # what it did before the cancel is billed
    status = view.status if view is not None else "cancelled"
    done = step.save(status=status, ended=True, ingested=ended)
    return PollOutcome(done, done=True, settle_later=view is not None and not ended)


def _short(exc: openai.APIStatusError) -> str:
    return f"{exc.status_code} {exc.message}"[:200]
