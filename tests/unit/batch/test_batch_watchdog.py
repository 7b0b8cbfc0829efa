"""The watchdog never takes a job whose batches are being polled for stalled."""

from __future__ import annotations

import time

from doubles import job_spec

from swarm.jobs.watchdog import Action, Seen, check_job, stall_s
from swarm.settings import Settings
from swarm.store import MemoryJobStore
from swarm.store.batches import FileState, batch_store


def test_batch_polls_move_the_fingerprint_and_their_absence_stalls() -> None:
    store, settings = MemoryJobStore(), Settings(broker_url="redis://127.0.0.1:1/0")
    spec = job_spec(2, deadline_at=time.time() + 3600)
    store.create_job(spec, ["a", "b"])
    files = batch_store(store)
    files.plan("j1", [FileState(index=0, model="kimi-k2.5", node_ids=spec.node_ids)])
    first = check_job(store, settings, "j1", None)
    long_ago = Seen(first.seen.fingerprint, first.seen.since - stall_s(settings) - 1)
    state = files.get("j1", 0)
    assert state is not None
    files.put("j1", state.model_copy(update={"polls": 1, "batch_id": "batch_1"}))
    assert check_job(store, settings, "j1", long_ago).action is Action.WAIT  # polled since
    polled = check_job(store, settings, "j1", long_ago).seen
    stalled = Seen(polled.fingerprint, polled.since - stall_s(settings) - 1)
    check = check_job(store, settings, "j1", stalled)  # no poll for a stall's time
    assert check.action is Action.RESEND_NODES and check.missing == spec.node_ids
