"""The review as Markdown: a weak model's answer that missed the schema is still shown."""

from __future__ import annotations

from typing import Any

from swarm.jobs.review import NOT_IN_FORMAT, review_markdown


def node(
    ref: str, status: str, content: str, error_kind: str | None = None, **extra: Any
) -> dict[str, Any]:
    return {
        "input_ref": ref,
        "status": status,
        "content": content,
        "error_kind": error_kind,
        "error": "schema mismatch" if error_kind else None,
        **extra,
    }


def report(*nodes: dict[str, Any]) -> dict[str, Any]:
    ok = sum(1 for n in nodes if n["status"] == "ok")
    return {
        "job_id": "job-123",
        "total": len(nodes),
        "succeeded": ok,
        "status": "partial",
        "final": "overall fine",
        "cost_usd": 0.0,
        "nodes": list(nodes),
    }


def test_bad_output_shows_the_raw_answer_under_a_note_never_just_not_reviewed() -> None:
    md = review_markdown(
        report(node("abc123 fix", "error", "The commit adds a loop.\nLooks ok.", "bad_output"))
    )
    assert NOT_IN_FORMAT in md and "> The commit adds a loop." in md and "not reviewed" not in md
    assert "_job job-123_" in md


def test_failures_without_an_answer_are_still_not_reviewed() -> None:
    md = review_markdown(report(node("abc123 fix", "error", "", "timeout")))
    assert "_not reviewed: timeout: schema mismatch_" in md


def test_an_ok_answer_that_does_not_parse_is_shown_raw_and_a_cut_input_says_so() -> None:
    cut = {"summarized_chars": 4_000_000, "original_chars": 4_500_000, "original_tokens": 1_125_000}
    md = review_markdown(report(node("abc123 big", "ok", "plain words", truncation=cut)))
    assert NOT_IN_FORMAT in md and "> plain words" in md
    assert "4,000,000 of 4,500,000 characters" in md
