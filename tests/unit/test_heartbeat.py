"""The heartbeat renews every lease of a process and notices the ones lost."""

from __future__ import annotations

import time

from swarm.records import JobSpec
from swarm.store import MemoryJobStore
from swarm.store.heartbeat import LeaseKeeper
from swarm.store.leases import task_lease


def job(store: MemoryJobStore) -> None:
    spec = JobSpec(
        job_id="j",
        instruction="i",
        aggregate_instruction="a",
        model="m",
        aggregate_model="m",
        node_ids=("n0",),
        input_refs=("r0",),
        submitted_at=time.time(),
    )
    store.create_job(spec, ["t"])


def test_beats_keep_leases_alive_and_report_a_take_over() -> None:
    store = MemoryJobStore()
    job(store)
    keeper = LeaseKeeper(store, lease_s=1.0)
    mine, taken = task_lease("j", "t1"), task_lease("j", "t2")
    store.take_task_lease(mine, keeper.lease_s, "{}")
    keeper.hold(mine)
    store.take_task_lease(taken, 0.05, "{}")  # its renewals come too late: it lapses
    keeper.hold(taken)
    while store.lapsed_tasks(10) != [taken.member]:
        time.sleep(0.01)
    assert store.take_task_lease(task_lease("j", "t2"), 1.0, "{}")  # sent again, elsewhere
    assert keeper.beat() == {taken}
    assert keeper.lost(taken) and not keeper.lost(mine)
    assert keeper.held() == [mine]
    keeper.drop(mine)
    assert keeper.held() == [] and keeper.beat() == set()
    keeper.stop()


def test_the_thread_renews_past_the_lease_lifetime() -> None:
    store = MemoryJobStore()
    job(store)
    keeper = LeaseKeeper(store, lease_s=1.5)
    lease = task_lease("j", "t1")
    store.take_task_lease(lease, keeper.lease_s, "{}")
    keeper.hold(lease)
    time.sleep(3.0)  # two lifetimes
    assert store.lapsed_tasks(10) == [] and not keeper.lost(lease)
    keeper.stop()
    deadline = time.monotonic() + 5
    while store.lapsed_tasks(10) != [lease.member]:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_the_thread_also_runs_other_renewals_even_when_one_fails() -> None:
    keeper = LeaseKeeper(MemoryJobStore(), lease_s=1.0)  # a beat every third of a second
    runs: list[str] = []

    def broken() -> None:
        runs.append("broken")
        raise ConnectionError("Redis down")

    keeper.also(broken)
    keeper.also(lambda: runs.append("permits"))
    deadline = time.monotonic() + 10
    while runs.count("permits") < 2:
        assert time.monotonic() < deadline, runs
        time.sleep(0.02)
    keeper.stop()
    assert runs.count("broken") >= 2
