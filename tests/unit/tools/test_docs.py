from __future__ import annotations

import pytest
from doubles import job_spec

from swarm.store import MemoryJobStore
from swarm.tools import Tool
from swarm.tools.toolsets import ToolContext, load_toolset


@pytest.fixture
def docs() -> dict[str, Tool]:
    store = MemoryJobStore()
    spec = job_spec(2, tools="docs")
    store.create_job(
        spec, ["# A\nLatency fell by 30%.\nCost rose.", "# B\nThroughput rose; latency flat."]
    )
    return load_toolset("docs", ToolContext(spec, "n00", store))


def test_search_ranks_lines_with_more_query_words_first(docs: dict[str, Tool]) -> None:
    hits = docs["search_documents"].fn(query="latency fell").splitlines()
    assert (
        hits[0] == "f0:2: Latency fell by 30%."
        and hits[1] == "f1:2: Throughput rose; latency flat."
    )
    assert docs["search_documents"].fn(query="nothing-like-this") == "no matches"


def test_read_a_range_of_one_document(docs: dict[str, Tool]) -> None:
    assert docs["read_document"].fn(document="f1", start_line=2, end_line=9) == (
        "f1 lines 2-2 of 2\n    2  Throughput rose; latency flat."
    )
    with pytest.raises(KeyError, match="no document 'f9'"):
        docs["read_document"].fn(document="f9")
