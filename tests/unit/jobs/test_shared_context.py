"""A job's shared context: in the system message every node shares byte for byte (the
cached prefix), the node's own input last; the aggregation's shared part the same way; the
pre-flight counts the expected cache hits of that prefix."""

from __future__ import annotations

from pathlib import Path

import pytest

from swarm.catalog import load_catalog
from swarm.cli.context_option import conventions, read_context
from swarm.cost.batch import at_batch_price
from swarm.errors import InputError
from swarm.jobs.estimate import estimate_job
from swarm.jobs.prompts import aggregate_messages, subagent_messages
from swarm.records import InputItem, NodeEnvelope

CONTEXT = "Repository conventions: " + "keep functions small. " * 300
CATALOG = load_catalog(None)


def test_every_node_shares_the_context_in_one_identical_system_message() -> None:
    one = subagent_messages("Review it", "pr-1", "diff one", CONTEXT)
    two = subagent_messages("Review it", "pr-2", "diff two", CONTEXT)
    assert one[0] == two[0] and one[0]["role"] == "system"
    assert CONTEXT in one[0]["content"] and "diff one" not in one[0]["content"]
    assert one[-1]["content"].endswith("diff one")  # the node's own input last
    assert subagent_messages("Review it", "pr-1", "diff one")[0]["content"].count("Shared") == 0


def test_the_aggregation_shares_role_and_context_before_the_results() -> None:
    env = NodeEnvelope(node_id="n0", input_ref="a", status="ok", content="fine", model="m")
    messages = aggregate_messages("Summarise", [env], 100_000, 1000, CONTEXT)
    again = aggregate_messages("Summarise", [env, env], 100_000, 1000, CONTEXT)
    assert messages[0] == again[0] and CONTEXT in messages[0]["content"]
    assert messages[1]["content"].startswith("Task:\nSummarise")
    assert "<result" in messages[1]["content"]
    assert aggregate_messages("Summarise", [env], 100_000, 1000)[0]["content"].count("Shared") == 0


def test_the_estimate_counts_the_shared_prefix_as_cached_after_the_first_call() -> None:
    items = [InputItem(ref=f"pr-{i}", text=f"diff {i}") for i in range(10)]
    model, aggregate = CATALOG.model("kimi-k2.5"), CATALOG.model("kimi-k2.5")
    warm = estimate_job(
        items, "Review it", "Sum up", model, aggregate, context=CONTEXT, warmup_min_tokens=1024
    )
    cold = estimate_job(items, "Review it", "Sum up", model, aggregate, context=CONTEXT)
    bare = estimate_job(items, "Review it", "Sum up", model, aggregate, warmup_min_tokens=1024)
    assert warm.cached_tokens > 9 * 1500 and warm.cache_saving_nusd > 0
    assert warm.expected_usd < warm.total_usd == cold.total_usd  # the bound stays the bound
    assert cold.cached_tokens == 0 and bare.cached_tokens == 0  # too short a prefix
    assert warm.prompt_tokens > bare.prompt_tokens
    assert at_batch_price(warm, model).cache_saving_nusd == 0  # batch lines are not warmed


def test_context_files_are_read_with_their_names(tmp_path: Path) -> None:
    (tmp_path / "CONTRIBUTING.md").write_text("Use typed records.\n")
    (tmp_path / "map.txt").write_text("swarm/ is the library\n")
    found = conventions(tmp_path)
    text = read_context([*found, tmp_path / "map.txt"])
    assert text == (
        "File: CONTRIBUTING.md\n\nUse typed records.\n\nFile: map.txt\n\nswarm/ is the library"
    )
    assert read_context([]) is None and conventions(tmp_path / "map.txt") == []
    with pytest.raises(InputError, match=r"missing\.txt"):
        read_context([tmp_path / "missing.txt"])
