"""Which of a waiting job's queues no worker consumes: asked through Celery's remote control
(``inspect().active_queues()``, every worker answers with its queues; INSPECT_TIMEOUT_S
bounds the wait for answers). One line names them all, the aggregation's with the
sub-agents', so a user starts every worker the job needs at once. The CLI's waiting
(swarm.cli.follow) and SwarmHandle.wait say the same line."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from swarm.catalog import Catalog
from swarm.records import JobSpec
from swarm.store import JobStore, Progress

if TYPE_CHECKING:
    from celery import Celery

log = logging.getLogger(__name__)

INSPECT_TIMEOUT_S = 1.0
"""How long the workers' answers are awaited (the call always takes about this long)."""


def job_queues(spec: JobSpec, catalog: Catalog, stage: str) -> list[str]:
    """The queues the job still needs from a stage on: before its nodes ran (``nodes``)
    its nodes' and its aggregation's, once they ended (``aggregate``) its aggregation's."""
    names = {spec.aggregate_model}
    if stage != "aggregate":
        names |= {spec.task(node_id).model for node_id in spec.node_ids} or {spec.model}
    return sorted({catalog.model(name).queue for name in names if name in catalog.models})


def idle_line(queues: list[str], consumed: set[str] | None, answered: int) -> str | None:
    """One line when some of ``queues`` has no consumer among the ``answered`` workers
    (``consumed``: the queues they consume; None: the broker could not be asked)."""
    if consumed is None:
        return None
    missing = [queue for queue in queues if queue not in consumed]
    if not missing:
        return None
    names = ", ".join(missing)
    if answered == 0:
        said = f"no worker answered on the broker (none running?): nothing consumes {names}"
    else:
        said = f"no worker of the {answered} running consumes {names}"
    return f"{said}; start one: celery -A workers worker -Q {','.join(missing)} (still waiting)"


def consumers(app: Celery) -> tuple[set[str] | None, int]:
    """The queues the running workers consume and how many workers answered; (None, 0)
    when the broker cannot be asked."""
    try:
        replies = app.control.inspect(timeout=INSPECT_TIMEOUT_S).active_queues()
    except Exception as exc:  # the broker is down: the wait itself will say so
        log.debug("cannot ask the workers for their queues: %s", exc)
        return None, 0
    replies = replies or {}
    consumed = {q["name"] for queues in replies.values() for q in queues or ()}
    return consumed, len(replies)


def celery_idle_check(
    app: Callable[[], Celery], catalog: Catalog
) -> Callable[[JobSpec, str], str | None]:
    """The follow loop's idle check on the deployment's Celery app (``app`` builds it: on
    first use only)."""

    def check(spec: JobSpec, stage: str) -> str | None:
        consumed, answered = consumers(app())
        return idle_line(job_queues(spec, catalog, stage), consumed, answered)

    return check


def waiting_stage(progress: Progress) -> str:
    """``nodes`` while no sub-agent started, ``aggregate`` while the aggregation waits to
    start, else empty (something runs, or the job ended)."""
    if progress.finished or progress.in_flight or progress.phase:
        return ""
    ended = progress.ended
    if ended == 0:
        return "nodes"
    return "aggregate" if ended >= progress.total else ""


def store_idle_check(store: JobStore, catalog: Catalog, app: Celery) -> Callable[[str], str | None]:
    """SwarmHandle.wait's idle check: a job id's line, from its spec and progress."""

    def check(job_id: str) -> str | None:
        stage = waiting_stage(store.progress(job_id)) or "nodes"
        consumed, answered = consumers(app)
        return idle_line(job_queues(store.spec(job_id), catalog, stage), consumed, answered)

    return check
