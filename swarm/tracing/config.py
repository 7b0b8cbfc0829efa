"""Whether a process traces, read from the standard ``OTEL_*`` environment only.

Tracing is on when an exporter is configured: ``OTEL_TRACES_EXPORTER`` (``otlp`` or
``console``) or an OTLP endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``); ``OTEL_SDK_DISABLED=true`` or
``OTEL_TRACES_EXPORTER=none`` turn it off. Everything else (service name, sampler, batch
delays, headers, timeouts) is the SDK's and the exporter's own reading of the same
environment. The SDK and the OTLP exporter are the optional extra ``swarm[otel]``: they
are imported here only when tracing is asked for.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from swarm.tracing.conventions import CAPTURE_ENV

log = logging.getLogger(__name__)

EXTRA_HINT = "pip install 'swarm[otel]'"
_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
_EXPORTERS = frozenset({"otlp", "console"})


@dataclass(frozen=True)
class TraceConfig:
    """What the environment asks for."""

    exporters: tuple[str, ...]
    """``otlp`` and/or ``console``; empty: tracing is off."""
    capture_content: bool = False
    """Prompts and answers on attempt spans (CAPTURE_ENV=true)."""

    @property
    def on(self) -> bool:
        return bool(self.exporters)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> TraceConfig:
        """Read ``environ``; an unknown exporter name is said at WARNING and left out."""
        if _true(environ.get("OTEL_SDK_DISABLED")):
            return cls(())
        named = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
        if named:
            names = tuple(n.strip() for n in named.split(",") if n.strip() not in ("", "none"))
        else:
            names = ("otlp",) if any(environ.get(name) for name in _ENDPOINTS) else ()
        for unknown in sorted(set(names) - _EXPORTERS):
            log.warning("swarm tracing: exporter %r is not supported (otlp, console); "
                        "left out", unknown)  # fmt: skip
        exporters = tuple(n for n in names if n in _EXPORTERS)
        return cls(exporters, _true(environ.get(CAPTURE_ENV)))


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


def build_provider(config: TraceConfig, service: str, environ: Mapping[str, str]) -> Any | None:
    """An SDK TracerProvider with a batch processor per exporter, or None (logged at
    WARNING) when the SDK or the exporter is not installed. ``service`` names the
    process unless OTEL_SERVICE_NAME does."""
    try:
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning("swarm tracing: OTEL_* asks for traces but the OpenTelemetry SDK is not "
                    "installed (%s); tracing is off", EXTRA_HINT)  # fmt: skip
        return None
    named = {} if environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: service}
    provider = TracerProvider(resource=Resource.create(named))
    for name in config.exporters:
        exporter = _exporter(name, environ)
        if exporter is None:
            return None
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def _exporter(name: str, environ: Mapping[str, str]) -> Any | None:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    protocol = environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
    )
    try:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        log.warning("swarm tracing: the OTLP exporter for %s is not installed (%s; grpc also "
                    "needs opentelemetry-exporter-otlp-proto-grpc); tracing is off",
                    protocol, EXTRA_HINT)  # fmt: skip
        return None
    return OTLPSpanExporter()
