"""The workers' app with a per-node timeline (measurement only, ops/bench/fairness_timeline.py).

``celery -A timeline_app worker`` (with ``ops/bench`` on PYTHONPATH and ``TL_DIR`` set) runs
the normal app (workers.celery) and appends one JSON line per event to
``$TL_DIR/tl-<pid>.jsonl``: a message received (``recv``) and started (``prerun``), a node
started (``nstart``) and ended (``nend``, ``nexc`` when it went back to the queue), every
admission ask (``ask``: tenant, admitted, reason) and every permit finished (``fin``).
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

from celery import signals

import swarm.calls.admission.redis as admission
import swarm.jobs.batch as batch
from workers.celery import app

__all__ = ["app"]

_out = open(os.path.join(os.environ["TL_DIR"], f"tl-{os.getpid()}.jsonl"), "a", buffering=1)  # noqa: SIM115
_lock = threading.Lock()
_local = threading.local()


def event(kind: str, **fields: Any) -> None:
    fields["t"], fields["k"] = time.time(), kind
    with _lock:
        _out.write(json.dumps(fields) + "\n")


_acquire = admission.RedisAdmission.acquire
_finish = admission.RedisAdmission.finish
_call_node = batch.call_node


def acquire(self: Any, spec: Any, job_id: str, tokens: int, *args: Any, **kwargs: Any) -> Any:
    decision = _acquire(self, spec, job_id, tokens, *args, **kwargs)
    tenant = kwargs.get("tenant", args[2] if len(args) > 2 else admission.DEFAULT)
    event("ask", job=job_id, node=getattr(_local, "node", None), ten=tenant.name,
          ok=decision.permit is not None, why=str(decision.reason))  # fmt: skip
    return decision


def finish(self: Any, spec: Any, permit: Any, outcome: Any) -> Any:
    verdict = _finish(self, spec, permit, outcome)
    event("fin", job=permit.job_id, node=getattr(_local, "node", None), ten=permit.tenant)
    return verdict


def call_node(rt: Any, spec: Any, node_id: str, *args: Any, **kwargs: Any) -> Any:
    _local.node = node_id
    event("nstart", node=node_id)
    try:
        return _call_node(rt, spec, node_id, *args, **kwargs)
    except BaseException as exc:
        event("nexc", node=node_id, exc=type(exc).__name__)
        raise
    finally:
        event("nend", node=node_id)
        _local.node = None


admission.RedisAdmission.acquire = acquire  # type: ignore[method-assign]
admission.RedisAdmission.finish = finish  # type: ignore[method-assign]
batch.call_node = call_node


def _job_and_nodes(args: Any) -> list[Any] | None:
    if not args or len(args) < 2:
        return None
    nodes = args[1] if isinstance(args[1], list) else [args[1]]
    return [args[0], [n for n in nodes if isinstance(n, str)]]


@signals.task_received.connect
def _received(request: Any = None, **_: Any) -> None:
    event("recv", id=request.id, args=_job_and_nodes(request.args), eta=str(request.eta))


@signals.task_prerun.connect
def _prerun(task_id: str | None = None, args: Any = None, **_: Any) -> None:
    event("prerun", id=task_id, args=_job_and_nodes(args))
