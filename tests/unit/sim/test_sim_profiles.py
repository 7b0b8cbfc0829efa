"""Provider profiles of the simulator (``swarm sim --provider``): each provider's refusals
with its own wording, thinking inside max_tokens, the reasoning_content echo rule and its
usage format; over HTTP against a simulator in a thread."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from click.testing import CliRunner

from swarm.calls.usage import usage_of
from swarm.cli import sim_cmd
from swarm.cli.sim_cmd import build_config
from swarm.records import Usage
from swarm.sim import RunningSim, SimConfig, start_in_thread
from swarm.sim.profiles import PROFILES, PROVIDERS
from swarm.sim.usage import USAGE_FORMATS, usage_body

LONG = "a shared instruction that a gateway caches " * 200
"""A system message long enough (> 1024 estimated tokens) for the prompt cache."""


@pytest.fixture(scope="module")
def sims() -> Iterator[dict[str, RunningSim]]:
    running: dict[str, RunningSim] = {}
    try:
        for name in PROFILES:
            running[name] = start_in_thread(SimConfig(provider=name)).__enter__()
        yield running
    finally:
        for sim in running.values():
            sim.__exit__(None, None, None)


def post(sim: RunningSim, model: str, text: str = "hello", **fields: Any) -> httpx2.Response:
    """One request; a ``text`` starting with LONG sends LONG as a system message."""
    messages = [{"role": "user", "content": text.removeprefix(LONG)}]
    if text.startswith(LONG):
        messages.insert(0, {"role": "system", "content": LONG})
    body = {"model": model, "messages": messages, **fields}
    return httpx2.post(sim.base_url + "/chat/completions", json=body, timeout=30)


def tool_loop(echo: bool) -> list[dict[str, Any]]:
    """A tool loop's second request: the assistant's tool call sent back (index 2)."""
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    assistant: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
    if echo:
        assistant["reasoning_content"] = "I should call f."
    return [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        assistant,
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
    ]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"temperature": 0.2}, "invalid temperature: only 1 is allowed for this model"),
        ({"top_p": 0.5}, "invalid top_p: only 0.95 is allowed for this model"),
        ({"n": 2}, "invalid n: only 1 is allowed for this model"),
        ({"presence_penalty": 0.5}, "invalid presence_penalty: only 0 is allowed for this model"),
        ({"frequency_penalty": 1}, "invalid frequency_penalty: only 0 is allowed for this model"),
        (
            {"temperature": 1.0, "thinking": {"type": "disabled"}},
            "invalid temperature: only 0.6 is allowed for this model",
        ),
    ],
)
def test_moonshot_refuses_another_value_of_a_fixed_field(
    sims: dict[str, RunningSim], fields: dict[str, Any], message: str
) -> None:
    response = post(sims["moonshot"], "kimi-k2.5", **fields)
    assert response.status_code == 400
    assert response.json() == {"error": {"message": message, "type": "invalid_request_error"}}


def test_moonshot_takes_the_fixed_values_or_none(sims: dict[str, RunningSim]) -> None:
    moonshot = sims["moonshot"]
    fixed = {"temperature": 1, "top_p": 0.95, "n": 1, "presence_penalty": 0}
    assert post(moonshot, "kimi-k2.5", **fixed).status_code == 200
    off = {"thinking": {"type": "disabled"}, "temperature": 0.6}
    assert post(moonshot, "kimi-k2.5", **off).status_code == 200
    assert post(moonshot, "kimi-k2.5").status_code == 200
    assert post(moonshot, "moonshot-v1-8k", temperature=0.2).status_code == 200  # not fixed


def test_moonshot_thinks_by_default_inside_max_tokens(sims: dict[str, RunningSim]) -> None:
    answer = post(sims["moonshot"], "kimi-k2.5", "think first", max_tokens=4000).json()
    message = answer["choices"][0]["message"]
    assert message["reasoning_content"].startswith("thinking: ") and message["content"]
    usage = answer["usage"]
    assert set(usage) == {
        "prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens"
    }  # fmt: skip
    off = post(sims["moonshot"], "kimi-k2.5", "think first", thinking={"type": "disabled"})
    assert "reasoning_content" not in off.json()["choices"][0]["message"]
    assert usage["completion_tokens"] > off.json()["usage"]["completion_tokens"]


def test_a_small_cap_is_used_up_by_the_reasoning() -> None:
    with start_in_thread(SimConfig(provider="moonshot", reasoning_tokens=300)) as sim:
        cut = post(sim, "kimi-k2.5", max_tokens=200).json()
        roomy = post(sim, "kimi-k2.5", max_tokens=16000).json()
        stats = sim.stats()
    choice = cut["choices"][0]
    assert (choice["message"]["content"], choice["finish_reason"]) == ("", "length")
    assert cut["usage"]["completion_tokens"] == 200
    assert roomy["choices"][0]["finish_reason"] == "stop" and roomy["choices"][0]["message"]
    assert roomy["usage"]["completion_tokens"] > 300
    assert stats["models"]["kimi-k2.5"]["reasoning_tokens"] == 200 + 300
    assert stats["truncated"] == 1


@pytest.mark.parametrize(
    ("provider", "model", "message"),
    [
        (
            "moonshot",
            "kimi-k2.5",
            "thinking is enabled but reasoning_content is missing in assistant tool call "
            "message at index 2",
        ),
        (
            "deepseek",
            "deepseek-reasoner",
            "The reasoning_content in the thinking mode must be passed back to the API.",
        ),
    ],
)
def test_a_tool_call_sent_back_without_its_reasoning_is_refused(
    sims: dict[str, RunningSim], provider: str, model: str, message: str
) -> None:
    sim = sims[provider]
    body = {"model": model, "messages": tool_loop(echo=False)}
    refused = httpx2.post(sim.base_url + "/chat/completions", json=body, timeout=30)
    assert refused.status_code == 400
    assert refused.json()["error"]["message"] == message
    assert refused.json()["error"]["type"] == "invalid_request_error"
    body["messages"] = tool_loop(echo=True)
    assert httpx2.post(sim.base_url + "/chat/completions", json=body).status_code == 200


def test_without_thinking_the_reasoning_is_not_asked_back(sims: dict[str, RunningSim]) -> None:
    for provider, model, fields in (
        ("moonshot", "kimi-k2.5", {"thinking": {"type": "disabled"}, "temperature": 0.6}),
        ("deepseek", "deepseek-v3.2", {}),  # thinking off unless enabled
        ("plain", "kimi-k2.5", {}),
    ):
        body = {"model": model, "messages": tool_loop(echo=False), **fields}
        response = httpx2.post(sims[provider].base_url + "/chat/completions", json=body)
        assert response.status_code == 200, (provider, response.text)


def test_openai_reasoning_models_refuse_max_tokens_and_temperature(
    sims: dict[str, RunningSim],
) -> None:
    openai_sim = sims["openai"]
    refused = post(openai_sim, "gpt-5-mini", max_tokens=100)
    assert refused.status_code == 400
    assert refused.json()["error"] == {
        "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead.",
        "type": "invalid_request_error",
        "param": "max_tokens",
        "code": "unsupported_parameter",
    }
    hot = post(openai_sim, "o3", temperature=0.2).json()["error"]
    assert hot["message"] == (
        "Unsupported value: 'temperature' does not support 0.2 with this model. "
        "Only the default (1) value is supported."
    )
    assert (hot["param"], hot["code"]) == ("temperature", "unsupported_value")
    assert post(openai_sim, "gpt-4.1", max_tokens=100, temperature=0.2).status_code == 200


def test_openai_reasoning_is_counted_not_shown(sims: dict[str, RunningSim]) -> None:
    answer = post(sims["openai"], "gpt-5", max_completion_tokens=4000).json()
    assert "reasoning_content" not in answer["choices"][0]["message"]
    details = answer["usage"]["completion_tokens_details"]
    assert 64 <= details["reasoning_tokens"] < answer["usage"]["completion_tokens"]
    plain = post(sims["openai"], "gpt-4.1").json()["usage"]["completion_tokens_details"]
    assert plain["reasoning_tokens"] == 0


def test_deepseek_thinking_follows_the_body_and_reports_hit_and_miss(
    sims: dict[str, RunningSim],
) -> None:
    deepseek = sims["deepseek"]
    assert (
        "reasoning_content" not in post(deepseek, "deepseek-v3.2").json()["choices"][0]["message"]
    )
    on = post(deepseek, "deepseek-v3.2", thinking={"type": "enabled"}).json()
    assert on["choices"][0]["message"]["reasoning_content"]
    post(deepseek, "deepseek-reasoner", LONG + "first")
    usage = post(deepseek, "deepseek-reasoner", LONG + "second").json()["usage"]
    assert usage["prompt_cache_hit_tokens"] > 0
    assert (
        usage["prompt_cache_hit_tokens"] + usage["prompt_cache_miss_tokens"]
        == (usage["prompt_tokens"])
    )
    assert usage["completion_tokens_details"]["reasoning_tokens"] > 0


def test_anthropic_compat_counts_cache_reads_on_top(sims: dict[str, RunningSim]) -> None:
    sim = sims["anthropic-compat"]
    post(sim, "claude-sonnet-4.5", LONG + "first")
    usage = post(sim, "claude-sonnet-4.5", LONG + "second").json()["usage"]
    read = usage["cache_read_input_tokens"]
    assert read > usage["prompt_tokens"] > 0  # the uncached rest only
    assert usage["total_tokens"] == (
        usage["prompt_tokens"] + read + usage["cache_creation_input_tokens"]
        + usage["completion_tokens"]
    )  # fmt: skip


def test_plain_keeps_the_simulators_own_format(sims: dict[str, RunningSim]) -> None:
    answer = post(sims["plain"], "gpt-5", max_tokens=10, temperature=0.2).json()  # no rules
    assert set(answer["usage"]) == {
        "prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details"
    }  # fmt: skip
    assert "reasoning_content" not in answer["choices"][0]["message"]


def test_the_usage_format_can_differ_from_the_profile() -> None:
    with start_in_thread(SimConfig(provider="plain", usage_format="moonshot")) as sim:
        usage = post(sim, "kimi-k2.5", temperature=0.2).json()["usage"]
    assert "cached_tokens" in usage


@pytest.mark.parametrize("usage_format", USAGE_FORMATS)
def test_the_stats_equal_what_the_answers_reported(usage_format: str) -> None:
    """Per model, /stats counts what the answers' usage says, in every format (reasoning:
    where the format reports it)."""
    config = SimConfig(provider="deepseek", usage_format=usage_format)  # type: ignore[arg-type]
    with start_in_thread(config) as sim:
        seen = Usage()
        for text in (LONG + "one", LONG + "two", "short"):
            seen += usage_of(post(sim, "deepseek-reasoner", text).json()["usage"])
        stats = sim.stats()["models"]["deepseek-reasoner"]
    assert seen.cached_tokens > 0 and stats["reasoning_tokens"] > 0
    reports_reasoning = usage_format in ("openai", "deepseek")
    assert seen == Usage(
        prompt_tokens=stats["prompt_tokens"],
        completion_tokens=stats["completion_tokens"],
        cached_tokens=stats["cached_tokens"],
        reasoning_tokens=stats["reasoning_tokens"] if reports_reasoning else 0,
    )


@pytest.mark.parametrize("usage_format", USAGE_FORMATS)
def test_every_format_reads_back_into_the_same_usage(usage_format: str) -> None:
    raw = usage_body(usage_format, 1500, 400, cached_tokens=1024, reasoning_tokens=100)  # type: ignore[arg-type]
    reported = 100 if usage_format in ("openai", "deepseek") else 0
    assert usage_of(raw) == Usage(
        prompt_tokens=1500, completion_tokens=400, cached_tokens=1024, reasoning_tokens=reported
    )


def test_anthropic_cache_writes_read_back_on_top() -> None:
    raw = usage_body("anthropic", 1500, 400, cached_tokens=1000, cache_write_tokens=300)
    assert raw["prompt_tokens"] == 200
    assert usage_of(raw) == Usage(prompt_tokens=1500, completion_tokens=400, cached_tokens=1000)


def test_the_cli_flags_choose_the_profile() -> None:
    config = build_config({"provider": "moonshot", "usage_format": "deepseek",
                           "reasoning_tokens": 0})  # fmt: skip
    assert (config.provider, config.usage_format, config.reasoning_tokens) == (
        "moonshot", "deepseek", 0
    )  # fmt: skip
    assert (sim_cmd.PROVIDERS, sim_cmd.USAGE_FORMATS) == (PROVIDERS, USAGE_FORMATS)
    refused = CliRunner().invoke(sim_cmd.sim_command, ["--provider", "bedrock"])
    assert refused.exit_code == 2 and "--provider" in refused.output
