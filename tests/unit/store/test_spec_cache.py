"""The per-process spec cache: kept per revision, bounded, never a spec of another revision."""

from __future__ import annotations

from swarm.records import JobSpec
from swarm.store.spec_cache import SpecCache, spec_revision


def spec_json(job_id: str, nodes: int = 2) -> str:
    return JobSpec(
        job_id=job_id,
        instruction="i",
        aggregate_instruction="a",
        model="m",
        aggregate_model="m",
        node_ids=tuple(f"n{i}" for i in range(nodes)),
        input_refs=tuple(f"r{i}" for i in range(nodes)),
        submitted_at=0.0,
    ).model_dump_json()


def test_a_spec_is_served_for_its_own_revision_only() -> None:
    cache = SpecCache()
    raw = spec_json("a")
    assert cache.get("a", spec_revision(raw)) is None
    parsed = cache.put("a", raw, spec_revision(raw))
    assert cache.get("a", spec_revision(raw)) is parsed
    assert cache.get("a", spec_revision(spec_json("a", 3))) is None
    assert cache.get("a", None) is None


def test_a_spec_read_under_another_revision_is_not_kept() -> None:
    cache = SpecCache()
    stale = spec_revision(spec_json("a", 3))
    assert len(cache.put("a", spec_json("a"), stale).node_ids) == 2
    assert cache.get("a", stale) is None


def test_the_least_recently_read_spec_goes_first() -> None:
    cache = SpecCache(size=2)
    revs = {job: spec_revision(spec_json(job)) for job in "abc"}
    cache.put("a", spec_json("a"), revs["a"])
    cache.put("b", spec_json("b"), revs["b"])
    assert cache.get("a", revs["a"]) is not None
    cache.put("c", spec_json("c"), revs["c"])
    assert cache.get("b", revs["b"]) is None
    assert cache.get("a", revs["a"]) is not None and cache.get("c", revs["c"]) is not None
