"""The same behaviour from both job stores (RedisJobStore on a real redis-server: its
Lua scripts run there)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis

from swarm.errors import JobNotFoundError
from swarm.records import ErrorKind, JobSpec, NodeEnvelope, Usage
from swarm.store import JobStore, LedgerLine, MemoryJobStore, RedisJobStore
from swarm.store.billing import BilledCall

pytestmark = pytest.mark.integration


@pytest.fixture(params=["memory", "redis"])
def store(request: pytest.FixtureRequest) -> Iterator[JobStore]:
    if request.param == "memory":
        yield MemoryJobStore()
    else:
        client = redis.Redis.from_url(request.getfixturevalue("redis_url"), decode_responses=True)
        try:
            yield RedisJobStore(client, ttl_s=60)
        finally:
            client.close()


def spec(n: int = 3, job_id: str = "job", submitted_at: float | None = None) -> JobSpec:
    return JobSpec(
        job_id=job_id,
        instruction="i",
        aggregate_instruction="a",
        model="m",
        aggregate_model="m",
        node_ids=tuple(f"n{i}" for i in range(n)),
        input_refs=tuple(f"r{i}" for i in range(n)),
        submitted_at=time.time() if submitted_at is None else submitted_at,
    )


def env(node: str, ok: bool, model: str = "m") -> NodeEnvelope:
    return NodeEnvelope(
        node_id=node,
        input_ref="r",
        model=model,
        status="ok" if ok else "error",
        content="c" if ok else "",
        error_kind=None if ok else ErrorKind.TIMEOUT,
    )


def test_job_round_trip_and_unknown_job(store: JobStore) -> None:
    store.create_job(spec(), ["a", "b", "c"])
    assert store.spec("job") == spec().model_copy(
        update={"submitted_at": store.spec("job").submitted_at}
    )
    assert store.input_text("job", "n1") == "b"
    with pytest.raises(JobNotFoundError):
        store.spec("nope")
    with pytest.raises(JobNotFoundError):
        store.progress("nope")


def test_progress_counts_states_per_model(store: JobStore) -> None:
    store.create_job(spec(4), ["a", "b", "c", "d"])
    store.mark_running("job", "n0", "m")
    store.mark_running("job", "n1", "m")
    store.mark_running("job", "n2", "x")
    store.finish_node("job", env("n1", ok=True))
    store.finish_node("job", env("n2", ok=False, model="x"))
    p = store.progress("job")
    assert (p.total, p.done, p.failed, p.in_flight, p.pending) == (4, 1, 1, 1, 1)
    assert p.models["m"].in_flight == 1 and p.models["x"].failed == 1
    assert not p.finished


def test_ok_envelope_is_final_error_can_be_replaced(store: JobStore) -> None:
    store.create_job(spec(), ["a", "b", "c"])
    assert store.finish_node("job", env("n0", ok=False))
    assert store.finish_node("job", env("n0", ok=True))
    assert not store.finish_node("job", env("n0", ok=False))
    assert store.envelope("job", "n0") == env("n0", ok=True)
    store.finish_node("job", env("n2", ok=True))
    assert [e.node_id for e in store.envelopes("job")] == ["n0", "n2"]


def test_envelopes_of_reads_the_named_nodes_that_ended(store: JobStore) -> None:
    store.create_job(spec(4), ["a", "b", "c", "d"])
    store.finish_node("job", env("n1", ok=True))
    store.finish_node("job", env("n3", ok=False))
    assert store.envelopes_of("job", ["n3", "n0", "n1"]) == {
        "n3": env("n3", ok=False),
        "n1": env("n1", ok=True),
    }
    assert store.envelopes_of("job", []) == {}


def billed(call_id: str, model: str, usage: Usage) -> BilledCall:
    return BilledCall(call_id=call_id, model=model, usage=usage, cost_nusd=1)


def test_ledger_adds_calls_and_tokens(store: JobStore) -> None:
    store.create_job(spec(), ["a", "b", "c"])
    usage = Usage(prompt_tokens=10, completion_tokens=2, cached_tokens=4)
    store.record_call("job", billed("c1", "m", usage))
    store.record_call("job", billed("c2", "m", Usage(prompt_tokens=5, completion_tokens=1)))
    store.record_call("job", billed("c2", "m", Usage(prompt_tokens=5, completion_tokens=1)))
    store.record_call("job", billed("c3", "k", Usage(prompt_tokens=1)))
    assert store.ledger("job") == {
        "k": LedgerLine(calls=1, usage=Usage(prompt_tokens=1)),
        "m": LedgerLine(
            calls=2, usage=Usage(prompt_tokens=15, completion_tokens=3, cached_tokens=4)
        ),
    }


def test_report_is_written_once_and_cancel_flag(store: JobStore) -> None:
    store.create_job(spec(), ["a", "b", "c"])
    assert store.report("job") is None and not store.cancelled("job")
    assert store.save_report("job", {"status": "succeeded"})
    assert not store.save_report("job", {"status": "failed"})
    assert store.report("job") == {"status": "succeeded"}
    assert store.progress("job").finished
    store.cancel("job")
    assert store.cancelled("job")


def test_redis_keys_share_one_hash_slot_and_expire(redis_url: str) -> None:
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    store = RedisJobStore(r, ttl_s=60)
    store.create_job(spec(), ["a", "b", "c"])
    store.mark_running("job", "n0", "m")
    store.finish_node("job", env("n0", ok=True))
    store.record_call("job", billed("c1", "m", Usage(prompt_tokens=1)))
    store.set_phase("job", "final merge")
    store.save_report("job", {"status": "succeeded"})
    keys = r.keys("*")
    index = "swarm:{jobs}:submitted"
    assert index in keys
    jobs = [k for k in keys if k != index]
    assert len(jobs) == 11 and all("{job:job}" in k for k in jobs)
    assert all(0 < r.ttl(k) <= 60 for k in keys)


def test_recent_jobs_newest_first_with_counts_cost_and_status(store: JobStore) -> None:
    now = time.time()
    for i, job_id in enumerate(["old", "mid", "new"]):
        store.create_job(spec(3, job_id, now - 30 + i), ["a", "b", "c"])
    store.mark_running("mid", "n0", "m")
    store.finish_node("mid", env("n1", ok=True))
    store.finish_node("mid", env("n2", ok=False))
    store.record_call("mid", BilledCall(call_id="c", model="m", usage=Usage(), cost_nusd=2500))
    store.set_phase("mid", "reduce level 1 of at most 2: 3 calls")
    store.save_report("old", {"status": "partial"})
    store.cancel("new")
    listed = store.recent_jobs(10)
    assert [j.job_id for j in listed] == ["new", "mid", "old"]
    new, mid, old = listed
    assert (new.status, old.status, mid.status) == ("cancelling", "partial", "running")
    assert (mid.total, mid.done, mid.failed, mid.in_flight) == (3, 1, 1, 1)
    assert mid.cost_usd == pytest.approx(2.5e-6) and new.cost_usd == 0
    assert mid.phase == "reduce level 1 of at most 2: 3 calls" and old.phase is None
    assert [j.job_id for j in store.recent_jobs(2)] == ["new", "mid"]
    assert store.recent_jobs(0) == []
    store.save_report("new", {"status": "cancelled"})
    assert store.recent_jobs(1)[0].status == "cancelled"


def test_progress_shows_the_phase_until_a_resume(store: JobStore) -> None:
    store.create_job(spec(), ["a", "b", "c"])
    assert store.progress("job").phase is None
    store.set_phase("job", "final merge")
    assert store.progress("job").phase == "final merge"
    store.save_report("job", {"status": "succeeded"})
    store.reopen(spec())
    assert store.progress("job").phase is None


def test_redis_index_drops_expired_jobs_and_old_members(redis_url: str) -> None:
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    store = RedisJobStore(r, ttl_s=60)
    store.create_job(spec(1, "ancient", time.time() - 3600), ["a"])  # trimmed by the next
    store.create_job(spec(1, "gone"), ["a"])
    store.create_job(spec(1, "kept"), ["a"])
    r.delete("swarm:{job:gone}:spec")  # its keys expired
    assert [j.job_id for j in store.recent_jobs(10)] == ["kept"]
    assert r.zrange("swarm:{jobs}:submitted", 0, -1) == ["gone", "kept"]
    r.close()


def test_tool_results_first_one_wins_and_transcripts_replace(store: JobStore) -> None:
    from swarm.store.agents import ToolOutcome, Transcript

    store.create_job(spec(), ["a", "b", "c"])
    assert store.tool_result("job", "n0:step:0:tool:0:x") is None
    first = ToolOutcome(content="3")
    assert store.save_tool_result("job", "n0:step:0:tool:0:x", first) == first
    later = ToolOutcome(content="error: late", error=True)
    assert store.save_tool_result("job", "n0:step:0:tool:0:x", later) == first
    assert store.tool_result("job", "n0:step:0:tool:0:x") == first
    assert store.transcript("job", "n0") is None
    messages = ({"role": "user", "content": "hi"},)
    store.save_transcript("job", Transcript(node_id="n0", messages=messages))
    done = Transcript(node_id="n0", messages=messages, ended="answered")
    store.save_transcript("job", done)
    assert store.transcript("job", "n0") == done


def test_redis_spec_is_parsed_once_per_revision_and_updates_are_seen(redis_url: str) -> None:
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    producer, worker = RedisJobStore(r, ttl_s=60), RedisJobStore(r, ttl_s=60)
    producer.create_job(spec(), ["a", "b", "c"])
    assert worker.spec("job").budget_usd is None
    # The spec key alone changed (its revision did not): the worker keeps its parsed spec.
    r.set("swarm:{job:job}:spec", spec(1).model_dump_json())
    assert len(worker.spec("job").node_ids) == 3
    producer.update_job(spec(5), ["a", "b", "c", "d", "e"])
    assert len(worker.spec("job").node_ids) == 5
    producer.reopen(spec(5).model_copy(update={"budget_usd": 2.0}))
    assert worker.spec("job").budget_usd == 2.0


def report_of(statuses: str) -> dict[str, object]:
    nodes = [
        {"node_id": f"n{i}", "status": "ok" if s == "o" else "error", "content": f"c{i}"}
        for i, s in enumerate(statuses)
    ]
    return {"job_id": "job", "status": "partial", "total": len(nodes), "nodes": nodes}


def test_report_nodes_are_read_in_pages_and_the_summary_alone(store: JobStore) -> None:
    store.create_job(spec(), ["a", "b", "c"])
    assert store.report_summary("job") is None and store.report_nodes("job") == []
    report = report_of("oxooxo")
    assert store.save_report("job", report)
    assert store.report("job") == report
    assert store.report_summary("job") == {"job_id": "job", "status": "partial", "total": 6}
    ids = lambda nodes: [n["node_id"] for n in nodes]  # noqa: E731
    assert ids(store.report_nodes("job", 2, 3)) == ["n2", "n3", "n4"]
    assert ids(store.report_nodes("job", 4)) == ["n4", "n5"]
    assert store.report_nodes("job", 9, 3) == []
    assert ids(store.report_nodes("job", failed=True)) == ["n1", "n4"]
    assert ids(store.report_nodes("job", 1, 5, failed=True)) == ["n4"]
    assert ids(store.iter_report_nodes("job", page=4)) == [f"n{i}" for i in range(6)]


def test_redis_report_written_second_leaves_no_node_lists(redis_url: str) -> None:
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    store = RedisJobStore(r, ttl_s=60)
    store.create_job(spec(), ["a", "b", "c"])
    assert store.save_report("job", report_of("ox"))
    assert not store.save_report("job", report_of("xxxx"))
    lists = sorted(k.split(":")[3] for k in r.keys("swarm:{job:job}:r*") if "report" not in k)
    assert lists == ["rev", "rfailed", "rnodes"]
    assert store.report("job") == report_of("ox")


def test_redis_report_names_the_ok_envelopes_instead_of_copying_them(redis_url: str) -> None:
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    store = RedisJobStore(r, ttl_s=60)
    store.create_job(spec(), ["a", "b", "c"])
    store.finish_node("job", env("n0", ok=True))
    store.finish_node("job", env("n2", ok=False))
    lines = [env(n, ok=n == "n0").model_dump_json() for n in ("n0", "n1", "n2")]
    assert store.save_report_parts("job", {"total": 3}, lines, ok_stored=True)
    (nodes_key,) = r.keys("swarm:{job:job}:rnodes:*")
    entries = r.lrange(nodes_key, 0, -1)
    assert entries[0] == "@n0" and entries[1:] == lines[1:]


def test_the_nodes_of_a_page_that_have_not_ended_are_those_without_an_envelope(
    store: JobStore,
) -> None:
    store.create_job(spec(4), ["a", "b", "c", "d"])
    store.mark_running("job", "n0", "m")
    store.finish_node("job", env("n1", ok=True))
    store.finish_node("job", env("n3", ok=False))
    assert store.not_ended("job", ["n3", "n0", "n1", "n2"]) == ["n0", "n2"]
    assert store.not_ended("job", []) == []


def test_report_saved_in_parts_reads_like_a_whole_one(store: JobStore) -> None:
    store.create_job(spec(), ["a", "b", "c"])
    report = report_of("oxo" * 900)  # more nodes than one write of report_pages.CHUNK
    summary = {k: v for k, v in report.items() if k != "nodes"}
    lines = (json.dumps(node) for node in report["nodes"])  # type: ignore[attr-defined]
    assert store.save_report_parts("job", summary, lines)
    assert store.report("job") == report
    failed = store.report_nodes("job", 800, 2, failed=True)
    assert [n["node_id"] for n in failed] == ["n2401", "n2404"]


def test_a_report_naming_its_stored_ok_envelopes_reads_like_a_copied_one(
    store: JobStore,
) -> None:
    store.create_job(spec(4), ["a", "b", "c", "d"])
    nodes = [env("n0", ok=True), env("n1", ok=False), env("n2", ok=True), env("n3", ok=False)]
    for node in nodes[:3]:
        store.finish_node("job", node)
    summary = {"job_id": "job", "status": "partial", "total": 4}
    lines = [node.model_dump_json() for node in nodes]
    assert store.save_report_parts("job", summary, lines, ok_stored=True)
    store.finish_node("job", env("n1", ok=True))  # a later run: the report keeps its copy
    expected = [node.model_dump(mode="json") for node in nodes]
    assert store.report("job") == {**summary, "nodes": expected}
    assert store.report_nodes("job", 1, 2) == expected[1:3]
    assert store.report_nodes("job", failed=True) == [expected[1], expected[3]]


def test_inputs_are_stored_from_a_stream_longer_than_one_write(store: JobStore) -> None:
    texts = (f"text {i}" for i in range(2500))
    store.create_job(spec(2500), texts)
    assert store.input_text("job", "n0") == "text 0"
    assert store.input_text("job", "n2499") == "text 2499"
    with pytest.raises(ValueError):  # more texts than nodes: refused, as before
        store.create_job(spec(2).model_copy(update={"job_id": "other"}), ["a", "b", "c"])


def test_redis_threads_starting_a_job_at_once_share_one_parsed_spec(redis_url: str) -> None:
    import threading
    from concurrent.futures import ThreadPoolExecutor

    r = redis.Redis.from_url(redis_url, decode_responses=True)
    RedisJobStore(r, ttl_s=60).create_job(spec(5000), [f"t{i}" for i in range(5000)])
    worker = RedisJobStore(r, ttl_s=60)
    start = threading.Barrier(16)

    def read(_: int) -> JobSpec:
        start.wait()
        return worker.spec("job")

    with ThreadPoolExecutor(16) as pool:
        specs = list(pool.map(read, range(16)))
    assert len({id(s) for s in specs}) == 1


def test_a_progress_read_moves_counts_not_the_state_hash(redis_url: str) -> None:
    """The watchdog reads progress every lease: its reply must not grow with the job (an
    HGETALL of a 2,000-node state hash sends ~40 KB to the worker, and a 100,000-node one
    leaves megabytes of freed buffers in the worker's allocator at every check)."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    store = RedisJobStore(client, ttl_s=60)
    nodes = 2000
    store.create_job(spec(nodes), ["x"] * nodes)
    store.mark_running_many("job", {f"n{i}": "m" if i % 2 else "x" for i in range(nodes)})
    for i in range(0, 600, 3):
        store.finish_node("job", env(f"n{i}", ok=i % 2 == 0, model="m" if i % 2 else "x"))
    store.progress("job")  # the script is loaded, the spec cached
    client.config_resetstat()
    p = store.progress("job")
    stats, commands = client.info("stats"), client.info("commandstats")
    assert (p.total, p.done, p.failed, p.in_flight) == (2000, 100, 100, 1800)
    assert p.models["x"].done == 100 and p.models["m"].failed == 100
    assert not {"cmdstat_hgetall", "cmdstat_hkeys", "cmdstat_hscan"} & set(commands)
    assert stats["total_net_output_bytes"] < 2000
    client.close()


def test_cancelled_nodes_are_counted_apart_from_failed(store: JobStore) -> None:
    """A node cancelled with its job is not a failure: progress, its model's line and the
    jobs list count it apart."""
    store.create_job(spec(4), ["a", "b", "c", "d"])
    store.finish_node("job", env("n0", ok=True))
    store.finish_node("job", env("n1", ok=False))
    cancelled = env("n2", ok=False).model_copy(update={"error_kind": ErrorKind.CANCELLED})
    store.finish_node("job", cancelled)
    p = store.progress("job")
    assert (p.done, p.failed, p.cancelled, p.in_flight, p.pending) == (1, 1, 1, 0, 1)
    assert (p.models["m"].failed, p.models["m"].cancelled) == (1, 1)
    [job] = store.recent_jobs(1)
    assert (job.done, job.failed, job.cancelled) == (1, 1, 1)


def test_wait_report_returns_the_report_written_while_it_waits(store: JobStore) -> None:
    store.create_job(spec(), ["a", "b", "c"])
    read_once = threading.Event()
    read = store.report_summary

    def reading(job_id: str) -> dict[str, object] | None:
        found = read(job_id)
        read_once.set()
        return found

    store.report_summary = reading  # type: ignore[method-assign]
    with ThreadPoolExecutor(max_workers=1) as pool:
        waited = pool.submit(store.wait_report, "job", 60.0, 0.01, summary=True)
        assert read_once.wait(30)  # the waiter found no report and waits
        assert store.save_report("job", {"status": "ok", "nodes": []})
        assert waited.result(timeout=60) == {"status": "ok"}
    assert store.wait_report("job", 0.0) is not None
    store.create_job(spec(job_id="other"), ["a", "b", "c"])
    assert store.wait_report("other", 0.0) is None
