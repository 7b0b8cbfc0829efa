"""When a process traces (the standard OTEL_* environment only) and the conventions' values
swarm derives from its catalog."""

from __future__ import annotations

import logging

import pytest

from swarm.catalog import load_catalog
from swarm.records import Usage
from swarm.tracing.config import TraceConfig
from swarm.tracing.conventions import provider_name, server_address, usage_attributes


@pytest.mark.parametrize(
    ("environ", "exporters", "capture"),
    [
        ({}, (), False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, ("otlp",), False),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, ("otlp",), False),
        ({"OTEL_TRACES_EXPORTER": "console"}, ("console",), False),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}, (), False),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, (), False),
        ({"OTEL_TRACES_EXPORTER": "otlp",
          "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}, ("otlp",), True),
        ({"OTEL_TRACES_EXPORTER": "otlp",
          "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "1"}, ("otlp",), False),
    ],
)  # fmt: skip
def test_tracing_is_on_only_when_an_exporter_is_configured(
    environ: dict[str, str], exporters: tuple[str, ...], capture: bool
) -> None:
    config = TraceConfig.from_env(environ)
    assert (config.exporters, config.on, config.capture_content) == (
        exporters,
        bool(exporters),
        capture,
    )


def test_an_unknown_exporter_is_said_and_left_out(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="swarm.tracing.config"):
        config = TraceConfig.from_env({"OTEL_TRACES_EXPORTER": "zipkin,console"})
    assert config.exporters == ("console",)
    assert "'zipkin' is not supported" in caplog.text


def test_providers_come_from_the_catalog_then_the_host_then_the_model_name() -> None:
    catalog = load_catalog()
    names = {m: provider_name(catalog, catalog.model(m)) for m in catalog.models}
    assert names["kimi-k2.5"] == "moonshot_ai"
    assert names["gpt-4.1"] == "openai"
    assert names["deepseek-v3.2"] == "deepseek"
    assert names["claude-sonnet-4.5"] == "anthropic"
    declared = catalog.model("claude-sonnet-4.5").model_copy(update={"gateway_name": "house-model"})
    assert provider_name(catalog, declared) == "_OTHER"
    assert server_address("https://gw.example:8443/v1?key=x") == "gw.example"


def test_usage_attributes_name_the_same_counts_in_both_conventions() -> None:
    attributes = usage_attributes(Usage(prompt_tokens=100, completion_tokens=40, cached_tokens=30))
    assert attributes["gen_ai.usage.input_tokens"] == attributes["llm.token_count.prompt"] == 100
    assert attributes["gen_ai.usage.output_tokens"] == 40
    assert attributes["gen_ai.usage.cache_read.input_tokens"] == 30
    assert attributes["llm.token_count.total"] == 140
    assert attributes["gen_ai.usage.reasoning.output_tokens"] == 0
