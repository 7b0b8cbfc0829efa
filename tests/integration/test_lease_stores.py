"""Leases, fencing and lapses from both job stores (RedisJobStore on a real redis-server:
its Lua scripts run there)."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis
from redis.client import Pipeline
from test_job_stores import env, spec, store  # noqa: F401  (the parametrized fixture)

from swarm.records import Usage
from swarm.store import JobStore, RedisJobStore
from swarm.store.billing import BilledCall, StoredAnswer
from swarm.store.core import job_key
from swarm.store.leases import Lease, claim_lease, parse_member, task_lease
from swarm.store.redis import LEASE_INDEX

pytestmark = pytest.mark.integration
SIGNATURE = '{"task": "swarm.subagent", "args": ["job", "n0"]}'


def billed(call_id: str, key: str) -> BilledCall:
    usage = Usage(prompt_tokens=10, completion_tokens=5)
    answer = StoredAnswer(content="late", usage=usage)
    return BilledCall(
        call_id=call_id, model="m", usage=usage, cost_nusd=7, answer_key=key, answer=answer
    )


def lapsed(jobs: JobStore, member: str, keep: Lease | None = None) -> None:
    """Wait until ``member``'s lease lapsed (its holder renewed it no more): due in the lapse
    index and, on Redis, its key gone. The index is a hint that may say due a moment before
    Redis expires the key (it expires one after the key's last millisecond; a take writes
    the index member just before the key), which is why a sweeper's take_lapse reads the key.
    ``keep``: a lease renewed meanwhile (it stays out of the index)."""
    deadline = time.monotonic() + 5
    while member not in jobs.lapsed_tasks(10) or _key_lives(jobs, member):
        assert keep is None or jobs.renew_leases([keep], 0.4) == set()
        assert time.monotonic() < deadline, f"{member} never lapsed"
        time.sleep(0.02)


def _key_lives(jobs: JobStore, member: str) -> bool:
    if not isinstance(jobs, RedisJobStore):
        return False  # the memory store's index and lease are one record
    return bool(jobs._r.exists(job_key(*parse_member(member))))


def test_a_delivery_leaves_a_live_runs_lease_and_takes_a_lapsed_one(store: JobStore) -> None:  # noqa: F811
    store.create_job(spec(), ["a", "b", "c"])
    live, duplicate = task_lease("job", "t1"), task_lease("job", "t1")
    assert store.take_task_lease(live, 5, SIGNATURE)
    assert store.take_task_lease(live, 5, SIGNATURE)  # its own again
    assert not store.take_task_lease(duplicate, 5, SIGNATURE)  # delivered again meanwhile
    assert store.renew_leases([live, duplicate], 5) == {duplicate}
    held = task_lease("job", "t2")
    assert store.take_task_lease(held, 0.2, SIGNATURE)
    lapsed(store, held.member)
    assert store.take_lapse(held.member, "sweeper", 5) == SIGNATURE  # the sweeper's hold
    sent = task_lease("job", "t2")
    assert store.take_task_lease(sent, 5, SIGNATURE)  # the message it sent takes it over
    store.settle_lapse(held.member, "sweeper")  # leaves the new run's lease
    assert store.renew_leases([sent], 5) == set()
    assert store.held_tasks("job", ["t2"]) == {"t2"}


def test_a_task_lease_taken_over_fences_its_first_holder(store: JobStore) -> None:  # noqa: F811
    store.create_job(spec(), ["a", "b", "c"])
    first, second = task_lease("job", "t1"), task_lease("job", "t1")
    store.take_task_lease(first, 0.2, SIGNATURE)
    assert store.renew_leases([first], 0.2) == set()
    lapsed(store, first.member)  # its process froze
    assert store.take_task_lease(second, 5, SIGNATURE)  # the message delivered again
    assert store.renew_leases([first, second], 5) == {first}
    assert not store.finish_node("job", env("n0", ok=True), fence=first)
    assert store.envelope("job", "n0") is None
    assert store.finish_node("job", env("n0", ok=True), fence=second)


def test_a_fenced_call_is_billed_but_its_answer_is_not_stored(store: JobStore) -> None:  # noqa: F811
    store.create_job(spec(), ["a", "b", "c"])
    assert store.claim("job", "n0", "old", 0.2)
    time.sleep(0.3)  # the old holder froze; its claim lapsed and another run took it
    assert store.claim("job", "n0", "new", 5)
    old = claim_lease("job", "n0", "old")
    assert store.renew_leases([old], 5) == {old}
    assert store.record_call("job", billed("c1", "k"), fence=old)
    assert store.answer("job", "k") is None
    assert store.ledger("job")["m"].calls == 1  # what the gateway billed is counted
    assert store.record_call("job", billed("c2", "k"), fence=claim_lease("job", "n0", "new"))
    assert store.answer("job", "k") is not None


def test_an_answer_stored_under_its_claim_releases_the_claim(store: JobStore) -> None:  # noqa: F811
    store.create_job(spec(), ["a", "b", "c"])
    assert store.claim("job", "n0", "me", 5)
    mine = claim_lease("job", "n0", "me")
    no_answer = billed("c1", "k").model_copy(update={"answer_key": None, "answer": None})
    assert store.record_call("job", no_answer, fence=mine)  # billed, nothing stored
    assert not store.claim("job", "n0", "other", 5)  # still held
    assert store.record_call("job", billed("c2", "k"), fence=mine)
    assert store.answer("job", "k") is not None
    assert store.claim("job", "n0", "other", 5)  # the slot is done: the claim went with it
    store.unclaim("job", "n0", "me")  # what a run without a lease does: no effect now
    assert not store.claim("job", "n0", "third", 5)


def test_a_lapsed_task_lease_has_one_winner(store: JobStore) -> None:  # noqa: F811
    store.create_job(spec(), ["a", "b", "c"])
    kept, lapsing, released = (task_lease("job", t) for t in ("t1", "t2", "t3"))
    for lease in (kept, lapsing, released):
        store.take_task_lease(lease, 0.4, SIGNATURE)
    store.release_lease(released)
    lapsed(store, lapsing.member, keep=kept)
    assert store.lapsed_tasks(10) == [lapsing.member]  # renewed and released: not lapsed
    takes = [store.take_lapse(lapsing.member, f"sweeper{i}", 0.3) for i in range(3)]
    assert takes == [SIGNATURE, None, None]
    lapsed(store, lapsing.member, keep=kept)  # the winner died before it sent the message
    assert store.lapsed_tasks(10) == [lapsing.member]  # ``kept`` stays out of the index
    assert store.take_lapse(lapsing.member, "heir", 5) == SIGNATURE
    assert store.held_tasks("job", ["t2"]) == {"t2"}  # in flight
    store.settle_lapse(lapsing.member, "heir")  # sent
    assert store.lapsed_tasks(10) == []
    assert store.held_tasks("job", ["t2"]) == set()
    assert store.renew_leases([lapsing], 0.4) == {lapsing}  # its holder is fenced off


@pytest.mark.parametrize("ran", range(5))
def test_a_lease_cut_short_by_a_lost_connection_is_swept_or_was_never_listed(
    redis_url: str, ran: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis ran only the first ``ran`` commands of take_task_lease's round trip (the
    worker's connection broke): the message is either not listed (this worker could not
    lease it: the broker redelivers it) or listed with its signature, and then a sweeper
    sends it again once the lease time is over, leased or not."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    jobs = RedisJobStore(client, ttl_s=60)
    jobs.create_job(spec(), ["a", "b", "c"])
    execute = Pipeline.execute

    def cut_short(pipe: Pipeline, raise_on_error: bool = True) -> list[Any]:
        pipe.command_stack = pipe.command_stack[:ran]
        return execute(pipe, raise_on_error)

    monkeypatch.setattr(Pipeline, "execute", cut_short)
    jobs.take_task_lease(task_lease("job", "t1"), 0.3, SIGNATURE)
    monkeypatch.undo()
    try:
        listed = client.zrange(LEASE_INDEX, 0, -1)
        if not listed:
            return  # nothing listed: no lease either, the message is the broker's
        time.sleep(0.4)
        assert jobs.lapsed_tasks(10) == listed
        assert jobs.take_lapse(listed[0], "sweeper", 5) == SIGNATURE
    finally:
        client.close()


def test_a_run_that_lost_its_lease_leaves_the_new_holders_lapse_watched(
    store: JobStore,  # noqa: F811
) -> None:
    """A run ends after its message was delivered again and leased by another run: its
    release must not take the other run's lease off the index, or nothing would send the
    message again once that run stopped renewing."""
    store.create_job(spec(), ["a", "b", "c"])
    first, second = task_lease("job", "t1"), task_lease("job", "t1")
    store.take_task_lease(first, 0.2, SIGNATURE)
    lapsed(store, first.member)  # its process froze
    assert store.take_task_lease(second, 0.3, SIGNATURE)  # delivered again; that run stops
    store.release_lease(first)
    lapsed(store, second.member)
    assert store.lapsed_tasks(10) == [second.member]  # the new holder's lease is watched
    assert store.take_lapse(second.member, "sweeper", 5) == SIGNATURE


def test_a_task_is_held_while_its_lease_lives_or_waits_for_a_sweeper(store: JobStore) -> None:  # noqa: F811
    store.create_job(spec(), ["a", "b", "c"])
    live, lapsing, released = (task_lease("job", t) for t in ("t1", "t2", "t3"))
    store.take_task_lease(live, 5, SIGNATURE)
    store.take_task_lease(lapsing, 0.1, SIGNATURE)
    store.take_task_lease(released, 5, SIGNATURE)
    store.release_lease(released)
    time.sleep(0.3)
    assert store.held_tasks("job", ["t1", "t2", "t3", "t4"]) == {"t1", "t2"}
    assert store.take_lapse(lapsing.member, "sweeper", 5) is not None  # a sweeper sends it
    store.settle_lapse(lapsing.member, "sweeper")
    assert store.held_tasks("job", ["t1", "t2"]) == {"t1"}
    assert store.held_tasks("job", []) == set()


def test_pipelined_lease_scripts_need_no_loading_and_no_script_exists(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    jobs = RedisJobStore(client, ttl_s=60)
    jobs.create_job(spec(), ["a", "b", "c"])
    client.script_flush()  # as after a restart: no script is loaded
    before = client.info("commandstats").get("cmdstat_script|exists", {}).get("calls", 0)
    lease = task_lease("job", "t1")
    jobs.take_task_lease(lease, 5, SIGNATURE)
    assert jobs.renew_leases([lease], 5) == set()
    assert jobs.held_tasks("job", ["t1"]) == {"t1"}
    after = client.info("commandstats").get("cmdstat_script|exists", {}).get("calls", 0)
    assert after == before  # each pipeline was one round trip


def test_a_deferred_task_waits_held_until_due_and_a_cancel_hastens_it(store: JobStore) -> None:  # noqa: F811
    """workers.deferral: a run defers its task's next run; the run's own lease goes with it,
    the task stays held (the watchdog's probe does not call it lost) and falls due."""
    store.create_job(spec(), ["a", "b", "c"])
    run, other = task_lease("job", "t1"), task_lease("job", "t2")
    store.take_task_lease(run, 5, SIGNATURE)
    store.defer_task(run, 60, SIGNATURE)
    store.defer_task(task_lease("job", "t3", ""), 0.1, SIGNATURE)  # a new message, unleased
    store.take_task_lease(other, 5, SIGNATURE)
    store.defer_task(task_lease("job", "t2"), 0.1, SIGNATURE)  # another run's lease stays
    assert store.renew_leases([run], 5) == {run}  # released by its deferral
    assert store.held_tasks("job", ["t1", "t2", "t3"]) == {"t1", "t2", "t3"}
    deadline = time.monotonic() + 5
    while task_lease("job", "t3").member not in store.lapsed_tasks(10):
        assert time.monotonic() < deadline, "the deferred task never fell due"
        time.sleep(0.05)
    assert store.take_lapse(other.member, "sweeper", 5) is None  # its run's lease lives
    assert store.take_lapse(task_lease("job", "t3").member, "sweeper", 5) == SIGNATURE
    store.settle_lapse(task_lease("job", "t3").member, "sweeper")
    assert store.renew_leases([other], 5) == set()
    assert store.hasten_deferred("job") == 1  # t1: t2 is leased, t3 was sent
    assert store.lapsed_tasks(10) == [run.member]
    assert store.take_lapse(run.member, "sweeper", 5) == SIGNATURE
