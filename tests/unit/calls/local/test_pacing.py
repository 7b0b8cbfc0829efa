"""Completion budgets fitted to the node timeout from each model's measured speed."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Any

import httpx2
import pytest
from doubles import Handler, MockGateway, as_local, completion, new_job

from swarm.calls.local.kit import LocalKit
from swarm.calls.local.pacing import MIN_BUDGET, Pace, Pacing, _pace_of
from swarm.calls.local_steps import kit_of
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


def local_runtime(
    make_runtime: Callable[[Handler], tuple[Runtime, MockGateway]], handler: Handler
) -> tuple[Runtime, MockGateway]:
    rt, gw = make_runtime(handler)
    return replace(rt, catalog=as_local(rt.catalog), local=LocalKit()), gw


def test_reading_and_generating_are_told_apart() -> None:
    rates = cpu_server().rates()
    assert rates is not None
    assert rates.fixed_s == pytest.approx(0.0, abs=1e-6)
    assert rates.per_prompt_s == pytest.approx(PREFILL)
    assert rates.per_completion_s == pytest.approx(GENERATE)


def test_the_time_to_the_first_token_is_a_fixed_term_not_generation() -> None:
    pace = Pace()
    for prompt, done in CALLS:  # a hosted-like shape: 1.8 s to the first token, 80 tokens/s
        pace = pace.observe(prompt, done, 1.8 + done / 80, DEADLINE)
    rates = pace.rates()
    assert rates is not None
    assert rates.fixed_s == pytest.approx(1.8) and rates.per_completion_s == pytest.approx(1 / 80)
    assert pace.budget(500, 2048, DEADLINE) == 2048  # 1.8 s + 25.6 s ends in time: as asked


def test_short_answers_of_one_length_never_cap_a_long_one() -> None:
    """Sixty 20-token answers of about 2 s (1.8 s to the first token) say nothing of the
    generation rate: a 2,048-token request afterwards is sent as asked (the fit without a
    fixed term charged the 1.8 s to 20 tokens and sent 247)."""
    pace = Pace()
    for _ in range(60):
        pace = pace.observe(300, 20, 1.8 + 20 / 80, DEADLINE)
    assert pace.rates() is None
    assert pace.budget(300, 2048, DEADLINE) == 2048


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


def test_prompts_growing_with_answers_put_their_time_on_generating() -> None:
    pace = Pace()
    for prompt, done in ((1000, 100), (2000, 200), (3000, 300)):
        pace = pace.observe(prompt, done, 0.09 * done, DEADLINE)
    rates = pace.rates()
    assert rates is not None
    assert rates.per_prompt_s == 0.0 and rates.per_completion_s == pytest.approx(0.09)
    assert rates.fixed_s == pytest.approx(0.0, abs=1e-6)


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
    caplog: pytest.LogCaptureFixture,
) -> None:
    rt, gw = local_runtime(
        make_runtime, lambda body, n: completion("ok", prompt=10, completion_tokens=5)
    )
    spec = new_job(rt, n=1)
    model = rt.catalog.model("kimi-k2.5")
    for prompt, done in CALLS:  # the model measured at 30 ms a token
        kit_of(rt).pacing.answered(
            model.name, model.backend, prompt, done, PREFILL * prompt + GENERATE * done, 5.0
        )
    request = CallRequest.of(spec.job_id, "n0", model, [{"role": "user", "content": "hi"}], 2048)
    with caplog.at_level(logging.WARNING, logger="swarm.calls.local_steps"):
        result = run_call(rt, request)
    assert result.ok and result.answer is not None
    sent = gw.requests[-1]["max_tokens"]
    assert sent == pytest.approx(0.6 * 5.0 / GENERATE, abs=2)  # 0.6 x 5 s at 30 ms a token
    assert result.answer.max_tokens_sent == sent  # said in the node's envelope
    (warning,) = caplog.records
    assert f"max_tokens {sent} instead of 2048" in warning.getMessage()
    assert "tokens/s" in warning.getMessage()
    stored = rt.store.answer(spec.job_id, request.key)  # under the caller's key
    assert stored is not None and stored.max_tokens_sent == sent


def test_a_hosted_backends_request_is_never_capped(
    make_runtime: Callable[[Handler], tuple[Runtime, MockGateway]],
) -> None:
    rt, gw = make_runtime(lambda body, n: completion("ok", prompt=10, completion_tokens=5))
    rt = replace(rt, local=LocalKit())  # a process with a local backend besides
    spec = new_job(rt, n=1)
    model = rt.catalog.model("kimi-k2.5")
    for prompt, done in CALLS:  # even a pace that would cap a local server's request
        kit_of(rt).pacing.answered(
            model.name, model.backend, prompt, done, PREFILL * prompt + GENERATE * done, 5.0
        )
    request = CallRequest.of(spec.job_id, "n0", model, [{"role": "user", "content": "hi"}], 2048)
    result = run_call(rt, request)
    assert result.ok and result.answer is not None and result.answer.max_tokens_sent is None
    assert gw.requests[-1]["max_tokens"] == 2048


def test_a_timed_out_call_lowers_the_next_attempts_budget(
    make_runtime: Callable[[Handler], tuple[Runtime, MockGateway]],
) -> None:
    def handle(body: dict[str, Any], n: int) -> httpx2.Response:
        if n == 1:
            raise httpx2.ReadTimeout("slow")
        return completion("ok", prompt=10, completion_tokens=5)

    rt, gw = local_runtime(make_runtime, handle)
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


def test_a_stored_pace_reads_back_and_another_shape_starts_afresh() -> None:
    pace = cpu_server().timed_out(600)
    assert _pace_of(json.dumps(asdict(pace))) == pace
    assert _pace_of(json.dumps({"w": 3.0, "sp": 900.0, "loss_cap": 300.0})) == Pace()
