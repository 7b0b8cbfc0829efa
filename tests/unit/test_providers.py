"""Request fields as catalog data: the body each provider's rules give, and the catalog
lines refused because a provider documents them as refused (swarm.providers)."""

from __future__ import annotations

from typing import Any

import pytest
from doubles import completion, job_spec

from swarm.batch.lines import line_of, node_request
from swarm.calls.request import CallRequest
from swarm.catalog import ModelSpec, load_catalog, parse_catalog
from swarm.errors import ConfigError
from swarm.records import NodeTask

MESSAGES = [{"role": "user", "content": "hi"}]


def body(model: ModelSpec, kind: str = "default", max_tokens: int = 100) -> dict[str, object]:
    return CallRequest.of("j", "n", model, MESSAGES, max_tokens, kind=kind).body()


def catalog(model_lines: str, backend_lines: str = "") -> str:
    return f"""
[backends.default]
kind = "hosted"
{backend_lines}

[models.m]
gateway_name = "m-1"
queue = "llm.m"
input_per_mtok_usd = 1.0
output_per_mtok_usd = 2.0
cached_input_per_mtok_usd = 0.1
rpm = 60
tpm = 100000
max_inflight = 4
context_window = 32768
max_tokens = 2048
{model_lines}

[routing]
default = ["m"]
aggregate = ["m"]
"""


def model(model_lines: str, backend_lines: str = "") -> ModelSpec:
    return parse_catalog(catalog(model_lines, backend_lines)).model("m")


def test_kimi_k2_5_sends_no_sampling_field_and_thinks_except_for_cheap_kinds() -> None:
    kimi = load_catalog().model("kimi-k2.5")
    sent = body(kimi, "default")
    assert not {"temperature", "top_p", "n", "presence_penalty", "frequency_penalty"} & set(sent)
    assert sent["thinking"] == {"type": "enabled"} and sent["max_tokens"] == 100
    assert body(kimi, "aggregate")["thinking"] == {"type": "enabled"}
    assert body(kimi, "extract")["thinking"] == {"type": "disabled"}
    assert body(kimi, "summarize")["thinking"] == {"type": "disabled"}
    assert kimi.max_tokens >= 16_000  # Moonshot's recommendation with thinking on
    assert kimi.shape("default").echo_reasoning and kimi.shape("default").thinks


def test_a_catalog_without_the_new_keys_sends_what_it_always_sent() -> None:
    plain = model("")
    assert body(plain) == {
        "model": "m-1",
        "messages": MESSAGES,
        "max_tokens": 100,
        "temperature": 0.2,
    }
    assert not plain.shape("default").echo_reasoning


def test_an_openai_reasoning_model_takes_max_completion_tokens_and_no_temperature() -> None:
    o_model = model('provider = "openai"\nreasoning = true')
    sent = body(o_model, max_tokens=4000)
    assert sent["max_completion_tokens"] == 4000
    assert "max_tokens" not in sent and "temperature" not in sent
    chat = model('provider = "openai"')
    assert body(chat)["max_tokens"] == 100 and body(chat)["temperature"] == 0.2


def test_the_backend_provider_holds_for_its_models_unless_one_names_its_own() -> None:
    deepseek = model("", 'provider = "deepseek"')
    assert "temperature" not in body(deepseek) and deepseek.shape("default").echo_reasoning
    own = model('provider = "plain"', 'provider = "deepseek"')
    assert body(own)["temperature"] == 0.2


def test_sampling_and_extra_body_are_sent_as_the_catalog_says() -> None:
    tuned = model("sampling = { temperature = 0.7, top_p = 0.9 }\nextra_body = { seed = 7 }")
    sent = body(tuned)
    assert (sent["temperature"], sent["top_p"], sent["seed"]) == (0.7, 0.9, 7)
    none = model("sampling = {}")
    assert "temperature" not in body(none)


def test_a_batch_line_carries_the_live_body() -> None:
    kimi = load_catalog().model("kimi-k2.5")
    request = CallRequest.of("j", "n", kimi, MESSAGES, 100)
    assert line_of(request)["body"] == request.body()


@pytest.mark.parametrize(
    ("lines", "backend", "expected"),
    [
        ('provider = "moonshot"\nthinking = "enabled"\nsampling = { temperature = 0.2 }', "",
         "sampling.temperature in [models.m] (provider moonshot): moonshot takes only 1"),
        ('thinking = "enabled"\nthinking_by_kind = { extract = "disabled" }\n'
         "sampling = { temperature = 1.0 }", 'provider = "moonshot"',
         "takes only 0.6 or 1 here"),
        ('provider = "moonshot"\nthinking = "disabled"\nsampling = { top_p = 0.9 }', "",
         "sampling.top_p in [models.m] (provider moonshot): moonshot fixes it at 0.95"),
        ('provider = "openai"\nreasoning = true\nmax_tokens_field = "max_tokens"', "",
         "max_tokens_field in [models.m] (provider openai): openai refuses max_tokens"),
        ('provider = "openai"\nreasoning = true\nsampling = { temperature = 0.2 }', "",
         "openai takes only 1 on a reasoning model"),
        ('provider = "openai"\nthinking = "enabled"', "", "takes no thinking field"),
        ("max_tokens_field = \"max_tokens\"\nsampling = { max_tokens = 5 }", "",
         "sampling.max_tokens in [models.m] (provider plain): swarm sets this field itself"),
        ('thinking_by_kind = { extrakt = "disabled" }', "", "unknown kind 'extrakt'"),
        ("context_window = 2048", "", "max_tokens in [models.m]: 2048 leaves no room"),
        ("max_output_tokens = 1024", "", "2048 is more than max_output_tokens 1024"),
    ],
)  # fmt: skip
def test_a_line_the_provider_refuses_stops_the_catalog(
    lines: str, backend: str, expected: str
) -> None:
    text = catalog(lines, backend)
    if "context_window" in lines:  # this case's own window replaces the template's
        text = text.replace("context_window = 32768\n", "", 1)
    with pytest.raises(ConfigError, match="invalid model catalog") as info:
        parse_catalog(text)
    assert expected in str(info.value)


def test_the_values_a_provider_fixes_may_be_written_out() -> None:
    kimi = model('provider = "moonshot"\nthinking = "enabled"\n'
                 "sampling = { temperature = 1.0, top_p = 0.95, n = 1 }")  # fmt: skip
    assert body(kimi)["temperature"] == 1.0 and body(kimi)["n"] == 1


def test_a_copied_model_resolves_its_own_request_shape() -> None:
    kimi = load_catalog().model("kimi-k2.5")
    assert "temperature" not in body(kimi)  # its shape resolved (and kept) first
    plain = kimi.model_copy(update={"provider": None, "thinking": None, "thinking_by_kind": {}})
    assert body(plain)["temperature"] == 0.2 and "thinking" not in body(plain)
    assert body(kimi)["thinking"] == {"type": "enabled"}


def test_a_batch_line_has_its_nodes_kind_fields(make_runtime: Any) -> None:
    rt, _ = make_runtime(lambda body, n: completion("x"))
    tasks = {"n00": NodeTask(model="kimi-k2.5", instruction="pull the dates", kind="extract")}
    spec = job_spec(2, tasks=tasks)
    request = node_request(rt, spec, "n00", "text")
    assert request is not None and request.kind == "extract"
    assert line_of(request)["body"]["thinking"] == {"type": "disabled"}
    default = node_request(rt, spec, "n01", "text")
    assert default is not None and line_of(default)["body"]["thinking"] == {"type": "enabled"}
