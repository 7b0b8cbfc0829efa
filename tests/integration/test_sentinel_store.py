"""The job store behind Redis Sentinel: a real primary, a replica and three sentinels.

The writes that must survive a failover are followed by WAIT on their connection; the
same store object (no new client) reaches the promoted replica after the primary is
killed, and a billed call's line written during the failover lands once it is promoted.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sentinel import MASTER, SentinelGroup, sentinel_group

from swarm.records import JobSpec, Usage
from swarm.store.billing import BilledCall
from swarm.store.connect import SentinelOptions
from swarm.store.leases import task_lease
from swarm.store.redis import RedisJobStore

pytestmark = pytest.mark.integration


@pytest.fixture
def group(tmp_logs: Path) -> Iterator[SentinelGroup]:
    with sentinel_group(tmp_logs) as running:
        yield running


def store_on(group: SentinelGroup, wait_ms: int) -> RedisJobStore:
    return RedisJobStore.from_url(
        group.url(1), 3600, SentinelOptions(MASTER), wait_ms=wait_ms, outage_s=30
    )


def spec(job_id: str) -> JobSpec:
    return JobSpec(
        job_id=job_id, instruction="i", aggregate_instruction="a", model="kimi-k2.5",
        aggregate_model="kimi-k2.5", node_ids=("n0",), input_refs=("input:0",),
        submitted_at=0.0,
    )  # fmt: skip


def billed(call_id: str, tokens: int) -> BilledCall:
    return BilledCall(
        call_id=call_id, model="kimi-k2.5", cost_nusd=1,
        usage=Usage(prompt_tokens=tokens, completion_tokens=1),
    )  # fmt: skip


def waits_sent(group: SentinelGroup) -> int:
    client = group.primary_client()
    try:
        stats = client.info("commandstats").get("cmdstat_wait", {})
        return int(stats.get("calls", 0)) if isinstance(stats, dict) else 0
    finally:
        client.close()


def test_the_writes_that_must_survive_a_failover_wait_for_the_replica(
    group: SentinelGroup,
) -> None:
    store = store_on(group, wait_ms=500)
    before = waits_sent(group)
    store.create_job(spec("j1"), ["text"])
    store.record_call("j1", billed("c1", 10))
    assert store.claim("j1", "n0", "owner", 10)
    store.take_task_lease(task_lease("j1", "t1"), 10, "{}")
    store.mark_running("j1", "n0", "kimi-k2.5")  # advisory: no WAIT
    assert waits_sent(group) - before == 4
    replica = group.replica.client(db=1)
    try:  # WAIT returned: the replica has them
        assert replica.hget("swarm:{job:j1}:ledger", "kimi-k2.5|prompt_tokens") == "10"
        assert replica.get("swarm:{job:j1}:claim:n0") == "owner"
    finally:
        replica.close()


def test_no_wait_is_sent_when_it_is_off(group: SentinelGroup) -> None:
    store = store_on(group, wait_ms=0)
    before = waits_sent(group)
    store.create_job(spec("j2"), ["text"])
    store.record_call("j2", billed("c1", 10))
    assert waits_sent(group) == before


def test_the_store_reaches_the_promoted_replica_and_loses_no_durable_line(
    group: SentinelGroup,
) -> None:
    store = store_on(group, wait_ms=500)
    store.create_job(spec("j3"), ["text"])
    for i in range(20):
        store.record_call("j3", billed(f"before-{i}", 1))
    old = group.master_port()
    assert old is not None
    group.primary.kill()
    killed_at = time.monotonic()
    # Written while no primary answers: tried again until the promoted replica takes it.
    during = threading.Thread(target=store.record_call, args=("j3", billed("during", 100)))
    during.start()
    group.wait_promoted(old, 30)
    during.join(40)
    assert not during.is_alive()
    store.record_call("j3", billed("after", 1000))
    line = store.ledger("j3")["kimi-k2.5"]
    assert (line.calls, line.usage.prompt_tokens) == (22, 20 + 100 + 1000)
    print(f"\nFIGURE sentinel-store: kill_to_written_s={time.monotonic() - killed_at:.1f}")


def test_without_a_replica_one_write_waits_and_the_next_ones_do_not(
    group: SentinelGroup,
) -> None:
    group.replica.stop()  # e.g. the promoted primary before the old one rejoins
    store = store_on(group, wait_ms=100)
    before = waits_sent(group)
    store.create_job(spec("j4"), ["text"])
    for i in range(3):
        store.record_call("j4", billed(f"c{i}", 1))
    assert waits_sent(group) - before == 1
    assert store.ledger("j4")["kimi-k2.5"].calls == 3
