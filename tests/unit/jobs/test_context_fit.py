from __future__ import annotations

import pytest

from swarm.catalog import load_catalog
from swarm.errors import InputError
from swarm.jobs.context_fit import (
    check_max_tokens,
    clip_to_tokens,
    cut_by_cap,
    input_budget_tokens,
    node_models,
    split_for_budget,
)
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


def test_an_answer_cap_that_leaves_no_room_for_an_input_is_refused_naming_the_window() -> None:
    catalog = load_catalog()
    kimi = node_models(catalog, "kimi-k2.5", "default")
    check_max_tokens(None, kimi)
    check_max_tokens(262_144 - 256, kimi)
    with pytest.raises(InputError) as refused:
        check_max_tokens(10_000_000, kimi)
    assert str(refused.value) == (
        "max_tokens 10,000,000 (--max-tokens) does not fit kimi-k2.5's context window of "
        "262,144 tokens, which also holds the input: at most 261,888"
    )


def test_the_cap_is_held_to_the_window_of_every_model_the_route_may_fall_back_to() -> None:
    review = node_models(load_catalog(), None, "review")
    assert [m.name for m in review] == ["kimi-k2.5", "claude-sonnet-4.5"]
    with pytest.raises(InputError, match=r"claude-sonnet-4\.5's context window of 200,000"):
        check_max_tokens(210_000, review)


def test_a_cut_is_blamed_on_the_cap_only_when_the_models_own_cap_would_have_fit_it() -> None:
    text = "word " * 8000  # about 9,000 tokens
    assert cut_by_cap(text, 262_144, 300, 258_000, 2048) == 258_000
    assert cut_by_cap(text, 262_144, 300, None, 2048) is None
    assert cut_by_cap(text, 8_000, 300, 4_000, 2048) is None  # too big for the window anyway
    assert cut_by_cap(text, 262_144, 300, 1_000, 2048) is None  # below the model's own cap
