"""What a probe of the Redis broker decides for a stalled job's missing nodes, and when the
job's watch probes (swarm.jobs.lost_messages, swarm.jobs.watchdog)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from swarm.catalog import load_catalog
from swarm.jobs.broker_census import AGGREGATION, Census, Sighting
from swarm.jobs.lost_messages import ProbeVerdict, classify, probe_after_s, probes_broker
from swarm.jobs.queueing import make_celery
from swarm.jobs.watchdog import (
    MAX_RESENDS,
    Action,
    Check,
    Seen,
    after_probe,
    check_every_s,
    check_job,
    decide,
    needs_missing,
    probe_job,
    stall_s,
)
from swarm.records import JobSpec, NodeEnvelope
from swarm.settings import Settings
from swarm.store import MemoryJobStore
from swarm.store.leases import task_lease

NOW = 1000.0
STALE_S = 30.0
MISSING = ("n1", "n2", "n3")


def new_job(store: MemoryJobStore, nodes: int, job_id: str) -> None:
    node_ids, refs = tuple(f"n{i}" for i in range(nodes)), tuple(f"f{i}" for i in range(nodes))
    spec = JobSpec(
        job_id=job_id, instruction="i", aggregate_instruction="a", model="kimi-k2.5",
        aggregate_model="kimi-k2.5", node_ids=node_ids, input_refs=refs, submitted_at=0.0,
    )  # fmt: skip
    store.create_job(spec, [f"text {i}" for i in range(nodes)])


def queued(task_id: str, *nodes: str) -> Sighting:
    return Sighting(task_id, nodes)


def unacked(task_id: str, *nodes: str, age_s: float, tag: str | None = None) -> Sighting:
    return Sighting(task_id, nodes, tag or f"tag-{task_id}", NOW - age_s)


def verdict(
    census: Census, held: frozenset[str] = frozenset(), suspects: tuple[str, ...] = ()
) -> ProbeVerdict:
    return classify(census, MISSING, held, suspects, now=NOW, stale_after_s=STALE_S)


# -- classify: lost nodes ---------------------------------------------------------------------
def test_a_missing_node_no_message_carries_is_a_suspect_then_lost() -> None:
    census = Census((queued("j-n1", "n1"),), (unacked("j-n2", "n2", age_s=5),), complete=True)
    first = verdict(census)
    assert first == ProbeVerdict(suspects=("n3",))  # not lost yet: a message may be in transit
    assert verdict(census, suspects=first.suspects).lost == ("n3",)
    # A suspect found since (re-sent by a sweeper, or in unacked by now) is no longer one.
    found = Census((queued("j-n3", "n3"),), census.unacked, complete=True)
    assert verdict(found, suspects=("n3",)) == ProbeVerdict(suspects=("n1",))


def test_with_every_node_ended_the_aggregation_message_is_what_is_looked_for() -> None:
    def probe(census: Census, suspects: tuple[str, ...] = ()) -> ProbeVerdict:
        return classify(census, (), frozenset(), suspects, now=NOW, stale_after_s=STALE_S)

    running = Census((), (unacked("j-aggregate", AGGREGATION, age_s=60),), complete=True)
    assert probe(running) == ProbeVerdict(restore=("tag-j-aggregate",))  # stale and not leased
    assert probe(Census((queued("j-aggregate", AGGREGATION),), (), True)) == ProbeVerdict()
    nowhere = Census((), (), complete=True)
    assert probe(nowhere) == ProbeVerdict(suspects=(AGGREGATION,))
    assert probe(nowhere, (AGGREGATION,)).lost == (AGGREGATION,)


def test_an_incomplete_census_finds_nothing_lost() -> None:
    assert verdict(Census((), (), complete=False), suspects=MISSING) == ProbeVerdict()


# -- classify: unacked messages of dead receivers ----------------------------------------------
@pytest.mark.parametrize(
    ("census", "held", "restored"),
    [
        # delivered long ago, no lease, no other copy: its receiver died before leasing it
        (Census((), (unacked("j-n1", "n1", age_s=60),), True), frozenset(), ("tag-j-n1",)),
        # ... restored even when a list is too long to read (restoring is always safe)
        (Census((), (unacked("j-n1", "n1", age_s=60),), False), frozenset(), ("tag-j-n1",)),
        # delivered a moment ago: its receiver may be leasing it now
        (Census((), (unacked("j-n1", "n1", age_s=10),), True), frozenset(), ()),
        # leased (running, or lapsed and waiting for a sweeper): the lease covers it
        (Census((), (unacked("j-n1", "n1", age_s=60),), True), frozenset({"j-n1"}), ()),
        # a copy is queued already (a retry, a sweeper's re-send)
        (Census((queued("j-n1", "n1"),), (unacked("j-n1", "n1", age_s=60),), True),
         frozenset(), ()),
        # another copy was delivered recently
        (Census((), (unacked("j-n1", "n1", age_s=60, tag="a"),
                     unacked("j-n1", "n1", age_s=1, tag="b")), True), frozenset(), ()),
        # every copy stale: the newest goes back, once
        (Census((), (unacked("j-n1", "n1", age_s=90, tag="a"),
                     unacked("j-n1", "n1", age_s=60, tag="b")), True), frozenset(), ("b",)),
        # its nodes all ended: nothing to run again
        (Census((), (unacked("j-n7", "n7", age_s=60),), True), frozenset(), ()),
    ],
)  # fmt: skip
def test_which_unacked_messages_go_back_to_their_queue(
    census: Census, held: frozenset[str], restored: tuple[str, ...]
) -> None:
    assert verdict(census, held).restore == restored


# -- the Redis broker only -------------------------------------------------------------------
def test_only_the_redis_broker_is_probed() -> None:
    assert probes_broker(Settings(broker_url="redis://127.0.0.1:6379/0"))
    assert probes_broker(Settings(broker_url="rediss://h:6380/0"))
    assert not probes_broker(Settings(broker_url="amqp://guest:guest@127.0.0.1:5672//"))
    assert not probes_broker(Settings())  # embedded
    redis_broker = Settings(broker_url="redis://h/0")
    assert probe_after_s(redis_broker) == 3 * redis_broker.lease_s
    # The watch checks every lease on Redis; on AMQP as before (RabbitMQ requeues itself).
    assert check_every_s(redis_broker) == redis_broker.lease_s
    amqp = Settings(broker_url="amqp://h//")
    assert check_every_s(amqp) == min(stall_s(amqp) / 4, amqp.visibility_timeout_s / 2)


# -- when the watch probes ---------------------------------------------------------------------
def test_probes_come_after_a_few_leases_then_back_off_until_the_stall() -> None:
    seen = Seen("3/0/0", 0.0)
    probe = {"stall_after_s": 1000.0, "probe_after_s": 30.0}
    assert decide(seen, "3/0/0", MISSING, now=29.9, **probe).action is Action.WAIT
    times = []
    for now in range(30, 1000):
        check = decide(seen, "3/0/0", MISSING, now=float(now), **probe)
        if check.action is Action.PROBE:
            times.append(now)
            seen = check.seen
    assert times == [30, 60, 120, 240, 480, 960]  # a job only queued costs a few probes
    assert decide(seen, "3/0/0", MISSING, now=1000.0, **probe).action is Action.RESEND_NODES
    # no probe where the broker is not probed, nor while moving
    assert decide(Seen("3/0/0", 0.0), "3/0/0", MISSING, now=60.0, stall_after_s=1000.0
                  ).action is Action.WAIT  # fmt: skip
    assert decide(Seen("3/0/0", 0.0), "4/0/0", MISSING, now=60.0, **probe).seen.probes == 0


def test_suspects_are_confirmed_at_the_next_check_then_the_missing_nodes_are_sent() -> None:
    probing = decide(Seen("3/0/0", 0.0), "3/0/0", MISSING, now=30.0, stall_after_s=1000.0,
                     probe_after_s=30.0)  # fmt: skip
    waiting = after_probe(probing, ProbeVerdict(suspects=("n3",)))
    assert waiting.action is Action.WAIT and waiting.seen.suspects == ("n3",)
    again = decide(waiting.seen, "3/0/0", MISSING, now=32.0, stall_after_s=1000.0,
                   probe_after_s=30.0)  # fmt: skip
    assert again.action is Action.PROBE  # at once, not after the back-off
    resend = after_probe(again, ProbeVerdict(suspects=("n3",), lost=("n3",)))
    assert resend.action is Action.RESEND_NODES and resend.missing == MISSING
    assert resend.seen.resends == 1 and "n3" in resend.reason
    # Every node ended and no report: the aggregation was probed, and is sent again.
    aggregation = decide(Seen("3/0/0", 0.0, probes=1, suspects=(AGGREGATION,)), "3/0/0", (),
                         now=31.0, stall_after_s=1000.0, probe_after_s=30.0)  # fmt: skip
    assert aggregation.action is Action.PROBE and aggregation.missing == ()
    lost = after_probe(aggregation, ProbeVerdict(suspects=(AGGREGATION,), lost=(AGGREGATION,)))
    assert lost.action is Action.AGGREGATE and lost.seen.resends == 1
    spent = Check(Action.PROBE, Seen("3/0/0", 0.0, MAX_RESENDS), MISSING)
    assert after_probe(spent, ProbeVerdict(lost=("n3",))).action is Action.WAIT  # the stall decides


def test_a_check_reads_the_envelopes_only_when_a_probe_or_the_stall_is_due() -> None:
    due = {"stall_after_s": 1000.0, "probe_after_s": 30.0}
    assert not needs_missing(None, "1/0/0", now=0.0, **due)
    assert not needs_missing(Seen("1/0/0", 0.0), "1/0/0", now=29.0, **due)
    assert needs_missing(Seen("1/0/0", 0.0), "1/0/0", now=30.0, **due)
    assert not needs_missing(Seen("1/0/0", 0.0), "2/0/0", now=30.0, **due)


def test_check_job_asks_for_a_probe_of_the_missing_nodes() -> None:
    store, settings = MemoryJobStore(), Settings(broker_url="redis://h/0")
    new_job(store, 2, "j")
    store.finish_node("j", NodeEnvelope(node_id="n0", input_ref="f0", model="m", status="ok"))
    first = check_job(store, settings, "j", None)
    stalled = Seen(first.seen.fingerprint, first.seen.since - probe_after_s(settings))
    check = check_job(store, settings, "j", stalled)
    assert check.action is Action.PROBE and check.missing == ("n1",)


class PagedChecks(MemoryJobStore):
    """A store that answers which nodes ended only a page at a time."""

    def __init__(self) -> None:
        super().__init__()
        self.pages: list[int] = []

    def envelopes(self, job_id: str) -> list[NodeEnvelope]:
        raise AssertionError("every envelope read at once")

    def not_ended(self, job_id: str, node_ids: Sequence[str]) -> list[str]:
        self.pages.append(len(node_ids))
        return super().not_ended(job_id, node_ids)


def test_a_check_asks_which_nodes_ended_a_page_at_a_time() -> None:
    store, settings = PagedChecks(), Settings(broker_url="redis://h/0", report_page_nodes=10)
    new_job(store, 25, "j")
    for node in ("n0", "n11", "n24"):
        store.finish_node("j", NodeEnvelope(node_id=node, input_ref="f", model="m", status="ok"))
    first = check_job(store, settings, "j", None)
    stalled = Seen(first.seen.fingerprint, first.seen.since - stall_s(settings) - 1)
    check = check_job(store, settings, "j", stalled)
    assert check.missing == tuple(f"n{i}" for i in range(25) if i not in (0, 11, 24))
    assert store.pages == [10, 10, 5]


def test_a_watch_message_carries_its_seen_as_json() -> None:
    assert Seen.load(None) is None
    assert Seen.load({"fingerprint": "f", "since": 1.0, "resends": 0}) == Seen("f", 1.0)
    raw = {"fingerprint": "f", "since": 1.0, "resends": 1, "probes": 2, "suspects": ["n1"]}
    assert Seen.load(raw) == Seen("f", 1.0, 1, 2, ("n1",))


def test_held_tasks_are_those_with_a_lease() -> None:
    store = MemoryJobStore()
    new_job(store, 1, "j")
    store.take_task_lease(task_lease("j", "j-n0"), 10.0, "{}")
    assert store.held_tasks("j", ["j-n0", "j-n1"]) == {"j-n0"}
    assert store.held_tasks("other", ["j-n0"]) == set()


def test_a_probe_of_a_broker_that_is_not_redis_finds_nothing_and_an_expired_job_ends() -> None:
    store, catalog = MemoryJobStore(), load_catalog()
    new_job(store, 2, "j")
    app = make_celery(Settings(), catalog)  # the embedded, in-memory broker
    check = Check(Action.PROBE, Seen("0/0/0", 0.0, probes=1, suspects=("n1",)), ("n0", "n1"))
    settings = Settings(broker_url="redis://h/0")
    waited = probe_job(app, store, catalog, settings, "j", check)
    assert waited.action is Action.WAIT and waited.seen.suspects == ()
    assert probe_job(app, store, catalog, settings, "gone", check).action is Action.DONE
