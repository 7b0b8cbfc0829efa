"""Completion budgets fitted to the node timeout from each model's measured speed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx2
import pytest
from doubles import Handler, MockGateway, completion, new_job

from swarm.calls.pacing import MIN_BUDGET, Pace, Pacing
from swarm.calls.pipeline import run_call
from swarm.calls.request import CallRequest
from swarm.calls.runtime import Runtime

DEADLINE = 45.0
PREFILL, GENERATE = 0.006, 0.03
"""Seconds per prompt token and per completion token of a small model on a CPU."""
CALLS = [(2800, 64), (900, 300), (1500, 120), (400, 510), (2000, 40), (1200, 200)]


def cpu_server() -> Pace:
    pace = Pace()
    for prompt, done in CALLS:
        pace = pace.observe(prompt, done, PREFILL * prompt + GENERATE * done, DEADLINE)
    return pace


def test_reading_and_generating_are_told_apart() -> None:
    rates = cpu_server().rates()
    assert rates is not None
    assert rates[0] == pytest.approx(PREFILL) and rates[1] == pytest.approx(GENERATE)


def test_a_slow_server_gets_what_ends_within_the_deadline() -> None:
    pace = cpu_server()
    # 0.6 x 45 s, less 2800 x 6 ms of reading, at 30 ms a token
    assert pace.budget(2800, 2048, DEADLINE) == pytest.approx(340, abs=1)
    assert pace.budget(200, 2048, DEADLINE) == pytest.approx(860, abs=1)
    assert pace.budget(6000, 2048, DEADLINE) == MIN_BUDGET  # reading alone takes the time


def test_no_cap_before_an_answer_nor_on_a_fast_gateway() -> None:
    assert Pace().budget(2800, 2048, DEADLINE) == 2048
    fast = Pace()
    for prompt, done in CALLS:
        fast = fast.observe(prompt, done, 0.0001 * prompt + 0.008 * done, DEADLINE)
    assert fast.budget(2800, 2048, DEADLINE) == 2048


def test_answers_that_cannot_be_told_apart_put_the_time_on_generating() -> None:
    pace = Pace().observe(1000, 100, 9.0, DEADLINE).observe(2000, 200, 18.0, DEADLINE)
    assert pace.rates() == pytest.approx((0.0, 0.09))


def test_a_timeout_halves_the_cap_and_answers_in_time_let_it_grow_back() -> None:
    pace = Pace().timed_out(2048)
    assert pace.budget(100, 2048, DEADLINE) == 1024
    assert pace.timed_out(2048).budget(100, 2048, DEADLINE) == 1024  # sent together: once
    pace = pace.timed_out(1024)
    assert pace.budget(100, 2048, DEADLINE) == 512
    grown = pace.observe(100, 50, 1.0, DEADLINE)
    assert grown.loss_cap == 768
    assert Pace().timed_out(40).loss_cap == MIN_BUDGET


def test_the_cap_changes_the_body_only(
    make_runtime: Callable[[Handler], tuple[Runtime, MockGateway]],
) -> None:
    rt, gw = make_runtime(lambda body, n: completion("ok", prompt=10, completion_tokens=5))
    spec = new_job(rt, n=1)
    model = rt.catalog.model("kimi-k2.5")
    for prompt, done in CALLS:  # the model measured at 30 ms a token
        rt.pacing.answered(
            model.name, model.backend, prompt, done, PREFILL * prompt + GENERATE * done, 5.0
        )
    request = CallRequest.of(spec.job_id, "n0", model, [{"role": "user", "content": "hi"}], 2048)
    result = run_call(rt, request)
    assert result.ok
    sent = gw.requests[-1]["max_tokens"]
    assert sent == pytest.approx(0.6 * 5.0 / GENERATE, abs=2)  # 0.6 x 5 s at 30 ms a token
    assert rt.store.answer(spec.job_id, request.key) is not None  # under the caller's key


def test_a_timed_out_call_lowers_the_next_attempts_budget(
    make_runtime: Callable[[Handler], tuple[Runtime, MockGateway]],
) -> None:
    def handle(body: dict[str, Any], n: int) -> httpx2.Response:
        if n == 1:
            raise httpx2.ReadTimeout("slow")
        return completion("ok", prompt=10, completion_tokens=5)

    rt, gw = make_runtime(handle)
    spec = new_job(rt, n=1)
    model = rt.catalog.model("kimi-k2.5")
    request = CallRequest.of(spec.job_id, "n0", model, [{"role": "user", "content": "hi"}], 2048)
    assert run_call(rt, request).ok
    assert [body["max_tokens"] for body in gw.requests] == [2048, 1024]


def test_a_model_not_answered_yet_starts_from_its_backends_pace() -> None:
    pacing = Pacing()
    for prompt, done in CALLS:
        pacing.answered("kimi", "local", prompt, done, PREFILL * prompt + GENERATE * done, 45.0)
    assert pacing.budget("fallback", "local", 2800, 2048, DEADLINE) == pytest.approx(340, abs=1)
    assert pacing.budget("elsewhere", "hosted", 2800, 2048, DEADLINE) == 2048
    pacing.timed_out("fallback", "local", 300)
    assert pacing.budget("fallback", "local", 200, 2048, DEADLINE) == 150  # its own from now
