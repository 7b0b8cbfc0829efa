"""Prometheus metrics of a worker process, per model: calls by outcome, tokens, cost, 429s,
call latency and calls in flight.

``SwarmMetrics`` is a CallListener (swarm/calls/listeners.py), so the domain reports to it without
knowing Prometheus exists. Each instance owns its registry (tests build many; the default
global registry would refuse duplicate names). ``serve`` starts the HTTP endpoint of one
worker process; prefork children would each need their own, so the endpoint is meant for the
threads pool (the default here), where one process runs every call.

Given the process's admission controller, the endpoint also exports its shared view of each
model (calls admitted and waiting, every worker's), read from the controller at each scrape.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    start_http_server,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from swarm.calls.admission import AdmissionController
from swarm.calls.listeners import CallListener, Listeners
from swarm.catalog import Catalog
from swarm.cost.pricing import cost_usd
from swarm.records import ErrorKind, Usage

log = logging.getLogger(__name__)

OK = "ok"
LATENCY_BUCKETS_S = (0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 45.0, 60.0, 120.0)
"""Gateway calls take from a fraction of a second to the 45 s node timeout and beyond."""


class SwarmMetrics(CallListener):
    """Counters, histogram and gauges of one worker process, labelled by model."""

    def __init__(self, catalog: Catalog, admission: AdmissionController | None = None) -> None:
        self.catalog = catalog
        self._model_of_queue = {spec.queue: name for name, spec in catalog.models.items()}
        self.registry = CollectorRegistry(auto_describe=True)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        reg = self.registry

        def counter(name: str, doc: str, *labels: str) -> Counter:
            return Counter(name, doc, ["model", *labels], registry=reg)

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, ["model"], registry=reg)

        self.calls = counter("swarm_calls", "Gateway call attempts (ok or error kind).", "outcome")
        self.nodes = counter("swarm_nodes", "Sub-agent nodes finished after retries.", "outcome")
        self.input_tokens = counter("swarm_input_tokens", "Prompt tokens billed (cached too).")
        self.cached_input_tokens = counter(
            "swarm_cached_input_tokens", "Prompt tokens served from the gateway's cache."
        )
        self.output_tokens = counter("swarm_output_tokens", "Completion tokens billed.")
        self.reasoning_tokens = counter(
            "swarm_reasoning_output_tokens", "Of the completion tokens, the reasoning ones."
        )
        self.cost = counter("swarm_cost_usd", "Cost of billed tokens at catalog prices, USD.")
        self.rate_limited = counter("swarm_rate_limited", "429 answers seen from the gateway.")
        self.late_answers = counter(
            "swarm_late_answers", "Answers billed after their call had timed out (overtime)."
        )
        self.latency = Histogram(
            "swarm_call_latency_seconds",
            "Latency of one gateway call attempt.",
            ["model"],
            buckets=LATENCY_BUCKETS_S,
            registry=reg,
        )
        self.in_flight = gauge("swarm_tasks_in_flight", "Tasks running in this process.")
        if admission is not None:
            reg.register(AdmissionCollector(catalog, admission))

    # -- CallListener hooks -------------------------------------------------------------------
    def attempt_finished(
        self, model: str, error_kind: ErrorKind | None, usage: Usage, latency_s: float
    ) -> None:
        """Count the attempt, its tokens and cost, and observe its latency."""
        self.calls.labels(model, error_kind.value if error_kind else OK).inc()
        self.latency.labels(model).observe(latency_s)
        if error_kind is ErrorKind.RATE_LIMITED:
            self.rate_limited.labels(model).inc()
        if usage.total_tokens:
            self._bill(model, usage)

    def node_finished(self, model: str, ok: bool, attempts: int, latency_s: float) -> None:
        """Count the node by outcome."""
        self.nodes.labels(model, OK if ok else "error").inc()

    def late_answer(self, model: str, usage: Usage, latency_s: float) -> None:
        """Count a late answer and its tokens and cost (its attempt counted as a timeout)."""
        self.late_answers.labels(model).inc()
        self._bill(model, usage)

    def _bill(self, model: str, usage: Usage) -> None:
        self.input_tokens.labels(model).inc(usage.prompt_tokens)
        self.cached_input_tokens.labels(model).inc(usage.cached_tokens)
        self.output_tokens.labels(model).inc(usage.completion_tokens)
        self.reasoning_tokens.labels(model).inc(usage.reasoning_tokens)
        spec = self.catalog.models.get(model)
        if spec is not None:
            self.cost.labels(model).inc(cost_usd(spec, usage))

    # -- task and admission hooks -------------------------------------------------------------
    def task_started(self, queue: str | None) -> None:
        """A task from ``queue`` began running in this process."""
        model = self._model_of_queue.get(queue or "")
        if model is not None:
            self.in_flight.labels(model).inc()

    def task_ended(self, queue: str | None) -> None:
        """A task from ``queue`` ended (any outcome)."""
        model = self._model_of_queue.get(queue or "")
        if model is not None:
            self.in_flight.labels(model).dec()

    def serve(self, port: int, addr: str = "0.0.0.0") -> WSGIServer:
        """Start the /metrics endpoint on ``port`` in a daemon thread; ``.shutdown()`` stops it."""
        disable_created_metrics()  # type: ignore[no-untyped-call]  # no `*_created` series
        server, _thread = start_http_server(port, addr=addr, registry=self.registry)
        return server


class AdmissionCollector(Collector):
    """The admission controller's shared counters of every catalog model, read per scrape."""

    def __init__(self, catalog: Catalog, admission: AdmissionController) -> None:
        self.catalog = catalog
        self.admission = admission

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(self._families())

    def collect(self) -> Iterator[GaugeMetricFamily]:
        families = self._families()
        in_flight, waiting, tokens, share, target = families
        try:
            for name, spec in self.catalog.models.items():
                counters = self.admission.counters(spec)
                in_flight.add_metric([name], counters.inflight)
                waiting.add_metric([name], counters.waiting)
                for row in counters.tenants:
                    tokens.add_metric([name, row.tenant], row.tokens)
                    share.add_metric([name, row.tenant], row.share)
                    target.add_metric([name, row.tenant], row.target)
        except Exception:  # a scrape while Redis is away: skip these gauges this time
            log.debug("admission counters unavailable for this scrape", exc_info=True)
            return iter(())
        return iter(families)

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, ...]:
        tenant = ["model", "tenant"]
        return (
            *AdmissionCollector._model_families(),
            GaugeMetricFamily(
                "swarm_admission_tenant_tokens",
                "A tenant's recent tokens on a model (decaying sum, admission).",
                labels=tenant,
            ),
            GaugeMetricFamily(
                "swarm_admission_tenant_share",
                "A tenant's share of a model's recent tokens (0..1).",
                labels=tenant,
            ),
            GaugeMetricFamily(
                "swarm_admission_tenant_target_share",
                "The share of a model's tokens a tenant's weight gives it among the busy "
                "tenants (0..1).",
                labels=tenant,
            ),
        )

    @staticmethod
    def _model_families() -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
        return (
            GaugeMetricFamily(
                "swarm_admission_in_flight",
                "Calls admitted and not yet finished, every worker's (admission).",
                labels=["model"],
            ),
            GaugeMetricFamily(
                "swarm_admission_waiting",
                "Calls waiting for admission, every worker's.",
                labels=["model"],
            ),
        )


def find(listener: CallListener) -> SwarmMetrics | None:
    """The SwarmMetrics inside ``listener`` (itself or one of a Listeners), if any."""
    if isinstance(listener, SwarmMetrics):
        return listener
    if isinstance(listener, Listeners):
        for inner in listener.listeners:
            found = find(inner)
            if found is not None:
                return found
    return None
