"""A submit streams: the producer holds one task message's signature at a time, the spec
names its nodes as a range, and the nodes sent so far are recorded for `swarm status`."""

from __future__ import annotations

import weakref
from typing import Any

import pytest
from celery import Celery
from celery.canvas import Signature

from swarm.catalog import load_catalog
from swarm.client.core import SwarmClient
from swarm.id_ranges import NodeIds, RefRuns
from swarm.jobs.queueing import SUBAGENTS_TASK, make_celery
from swarm.records import InputItem, JobSpec
from swarm.settings import Settings
from swarm.store import MemoryJobStore

CATALOG = load_catalog()


class Recording(MemoryJobStore):
    """The memory store, recording each count note_sent was given."""

    def __init__(self) -> None:
        super().__init__()
        self.notes: list[int | None] = []

    def note_sent(self, job_id: str, nodes: int | None) -> None:
        self.notes.append(nodes)
        super().note_sent(job_id, nodes)


def streaming_app(settings: Settings, alive: list[weakref.ref[Signature]]) -> Celery:
    """The client's app on the in-memory broker with a Redis result backend it never
    reaches (header results are ignored; the chord's size is recorded instead), whose
    header signatures are tracked while they live."""
    app = make_celery(settings, CATALOG)
    app.conf.broker_url = "memory://"
    app.sizes = []
    app.backend.set_chord_size = lambda group_id, size: app.sizes.append(size)
    app.backend.on_task_call = lambda producer, task_id: None  # the watchdog's result
    app.peak = 0
    made = app.signature

    def signature(name: str, *args: Any, **kwargs: Any) -> Signature:
        sig = made(name, *args, **kwargs)
        if name == SUBAGENTS_TASK:
            alive.append(weakref.ref(sig))
            app.peak = max(app.peak, sum(ref() is not None for ref in alive))
        return sig

    app.signature = signature
    return app


def test_the_producer_holds_a_few_header_signatures_whatever_the_job() -> None:
    settings = Settings(broker_url="redis://127.0.0.1:9/0", nodes_per_task=4, submit_chunk_nodes=40)
    alive: list[weakref.ref[Signature]] = []
    app = streaming_app(settings, alive)
    store = Recording()
    client = SwarmClient(settings, CATALOG, store, app, check_gateway=False)
    inputs = [InputItem(ref=f"stdin:{i + 1}", text=f"line {i}") for i in range(400)]
    handle = client.submit(inputs, "Summarise")
    assert app.sizes == [100]  # 400 nodes, 4 per message, one chord
    assert app.peak <= 3  # one message in hand, one read ahead (Celery's chord: all 100)
    assert store.notes == [0, 40, 80, 120, 160, 200, 240, 280, 320, 360, 400, None]
    assert store.progress(handle.id).sent is None
    spec = store.spec(handle.id)
    assert isinstance(spec.node_ids, NodeIds) and isinstance(spec.input_refs, RefRuns)
    assert spec.input_ref("n0399") == "stdin:400"
    assert store.input_text(handle.id, "n0123") == "line 123"


def test_a_spec_of_ranges_reads_back_equal_and_small() -> None:
    ids = NodeIds.for_count(100_000)
    refs = RefRuns([("stdin", 1, 50_000), ("stdin", 50_002, 50_000)])
    spec = JobSpec(
        job_id="j", instruction="i", aggregate_instruction="a", model="m",
        aggregate_model="m", node_ids=ids, input_refs=refs, submitted_at=1.0,
    )  # fmt: skip
    text = spec.model_dump_json()
    assert len(text) < 600
    again = JobSpec.model_validate_json(text)
    assert again == spec
    assert again.input_ref("n50000") == "stdin:50002"
    assert list(again.node_ids[:2]) == ["n00000", "n00001"] and "n99999" in again.node_ids
    assert "n100000" not in again.node_ids and again.node_ids.index("n00007") == 7
    with pytest.raises(KeyError):
        again.input_ref("x1")
    listed = JobSpec.model_validate_json(
        spec.model_copy(
            update={"node_ids": tuple(ids), "input_refs": tuple(refs)}
        ).model_dump_json()
    )
    assert listed == spec and isinstance(listed.node_ids, tuple)
