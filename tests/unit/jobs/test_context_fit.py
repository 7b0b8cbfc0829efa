from __future__ import annotations

from swarm.jobs.context_fit import clip_to_tokens, input_budget_tokens, split_for_budget
from swarm.jobs.reduce import needs_reduction, pack
from swarm.tokens import estimate_tokens


def test_small_input_is_left_alone() -> None:
    assert split_for_budget("short text", 100) is None


def test_large_input_keeps_head_and_tail() -> None:
    text = "".join(f"line {i:06d}\n" for i in range(100_000))  # ~1.2 MB
    split = split_for_budget(text, 10_000)
    assert split is not None
    assert text.startswith(split.head) and text.endswith(split.tail)
    assert split.head + split.middle + split.tail == text
    assert estimate_tokens(split.head) <= 7_001 and estimate_tokens(split.tail) <= 2_001
    fitted = split.join("SUMMARY")
    assert "SUMMARY" in fitted and estimate_tokens(fitted) < 10_000
    t = split.truncation("SUMMARY")
    assert t.original_chars == len(text) and t.kept_chars + t.summarized_chars == len(text)
    assert t.summary_chars == 7


def test_budget_and_clip() -> None:
    assert input_budget_tokens(8000, 1000, 500) == 6500
    assert input_budget_tokens(1000, 1000, 500) == 256
    assert estimate_tokens(clip_to_tokens("x" * 40_000, 1000)) <= 1000


def test_pack_groups_in_order_under_budget() -> None:
    assert pack([3, 3, 3, 3], 7) == [[0, 1], [2, 3]]
    assert pack([10, 1, 1], 5) == [[0], [1, 2]]
    assert pack([], 5) == []
    assert needs_reduction([3, 3, 3], 7) and not needs_reduction([3, 3], 7)
    assert not needs_reduction([100], 7)  # a single item is cut, not reduced
