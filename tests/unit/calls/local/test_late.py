"""A call's late answer: kept once for its next attempt, refused once the call ended."""

from __future__ import annotations

from swarm.calls.local.late import LateAnswers
from swarm.calls.request import Answer
from swarm.records import Usage

ONE = Answer("one", Usage(prompt_tokens=1), "stop")
TWO = Answer("two", Usage(prompt_tokens=2), "stop")


def test_an_answer_is_taken_once() -> None:
    late = LateAnswers()
    assert late.take() is None
    assert late.offer(ONE, 1.0) and not late.offer(TWO, 2.0)  # one kept at a time
    assert late.take() == ONE and late.take() is None
    assert late.offer(TWO, 2.0) and late.take() == TWO


def test_after_the_call_ended_offers_are_refused_and_the_untaken_one_returned() -> None:
    late = LateAnswers()
    assert late.offer(ONE, 1.5)
    assert late.close() == (ONE, 1.5)
    assert not late.offer(TWO, 2.0) and late.take() is None and late.close() is None


def test_a_request_still_read_may_bring_the_next_answer() -> None:
    late = LateAnswers()
    assert not late.coming()
    late.expect()
    late.expect()
    assert late.coming() and not late.ready()
    late.failed()  # one ended without an answer
    assert late.coming()
    assert late.offer(ONE, 3.0)
    assert late.ready() and not late.coming()  # the answer is here: nothing more to wait for
    assert late.take() == ONE and not late.coming()
