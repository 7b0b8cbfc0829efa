"""The worker's Prometheus listener: what each hook counts, and the endpoint serving it."""

from __future__ import annotations

import json
import re
import socket
import urllib.request
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from swarm.calls.admission import AdmissionPolicy, MemoryAdmission, Outcome
from swarm.calls.admission.base import Ask
from swarm.calls.admission.shares import Tenant
from swarm.calls.listeners import CallListener, Listeners
from swarm.catalog import load_catalog
from swarm.cost.pricing import cost_usd
from swarm.records import ErrorKind, Usage
from workers.metrics import SwarmMetrics, find

USAGE = Usage(prompt_tokens=1000, completion_tokens=200, cached_tokens=400, reasoning_tokens=150)


def _value(metrics: SwarmMetrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def test_hooks_count_calls_tokens_cost_429s_and_latency() -> None:
    catalog = load_catalog()
    m = SwarmMetrics(catalog)
    m.attempt_finished("kimi-k2.5", ErrorKind.RATE_LIMITED, Usage(), 0.05)
    m.attempt_finished("kimi-k2.5", None, USAGE, 1.5)
    m.node_finished("kimi-k2.5", True, 2, 1.6)
    kimi = {"model": "kimi-k2.5"}
    assert _value(m, "swarm_calls_total", outcome="ok", **kimi) == 1
    assert _value(m, "swarm_calls_total", outcome="rate_limited", **kimi) == 1
    assert _value(m, "swarm_rate_limited_total", **kimi) == 1
    assert _value(m, "swarm_nodes_total", outcome="ok", **kimi) == 1
    assert _value(m, "swarm_input_tokens_total", **kimi) == 1000
    assert _value(m, "swarm_cached_input_tokens_total", **kimi) == 400
    assert _value(m, "swarm_output_tokens_total", **kimi) == 200
    assert _value(m, "swarm_reasoning_output_tokens_total", **kimi) == 150
    expected = cost_usd(catalog.model("kimi-k2.5"), USAGE)
    assert abs(_value(m, "swarm_cost_usd_total", **kimi) - expected) < 1e-12
    assert _value(m, "swarm_call_latency_seconds_count", **kimi) == 2
    assert _value(m, "swarm_call_latency_seconds_bucket", le="0.1", **kimi) == 1


def test_a_late_answer_counts_its_tokens_and_cost_not_another_call() -> None:
    catalog = load_catalog()
    m = SwarmMetrics(catalog)
    m.attempt_finished("kimi-k2.5", ErrorKind.TIMEOUT, Usage(), 45.0)
    Listeners([CallListener(), m]).late_answer("kimi-k2.5", USAGE, 80.0)
    kimi = {"model": "kimi-k2.5"}
    assert _value(m, "swarm_late_answers_total", **kimi) == 1
    assert _value(m, "swarm_calls_total", outcome="timeout", **kimi) == 1
    assert _value(m, "swarm_calls_total", outcome="ok", **kimi) == 0
    assert _value(m, "swarm_output_tokens_total", **kimi) == 200
    assert _value(m, "swarm_reasoning_output_tokens_total", **kimi) == 150
    expected = cost_usd(catalog.model("kimi-k2.5"), USAGE)
    assert abs(_value(m, "swarm_cost_usd_total", **kimi) - expected) < 1e-12


def test_in_flight_follows_tasks_by_queue() -> None:
    m = SwarmMetrics(load_catalog())
    m.task_started("llm.gemini-2.5-flash")
    m.task_started("llm.gemini-2.5-flash")
    m.task_ended("llm.gemini-2.5-flash")
    m.task_started("not-a-catalog-queue")  # ignored
    assert _value(m, "swarm_tasks_in_flight", model="gemini-2.5-flash") == 1


def test_admission_gauges_read_the_controller_at_each_scrape() -> None:
    catalog = load_catalog()
    admission = MemoryAdmission(AdmissionPolicy())
    m = SwarmMetrics(catalog, admission)
    gpt = catalog.model("gpt-4.1")
    permit = admission.acquire(gpt, Ask("j", 1)).permit
    assert permit is not None
    assert _value(m, "swarm_admission_in_flight", model="gpt-4.1") == 1
    assert _value(m, "swarm_admission_in_flight", model="kimi-k2.5") == 0
    admission.finish(gpt, permit, Outcome(used_tokens=1))
    assert _value(m, "swarm_admission_in_flight", model="gpt-4.1") == 0
    assert _value(m, "swarm_admission_waiting", model="gpt-4.1") == 0


def test_tenant_share_gauges_follow_the_tenants_tokens() -> None:
    catalog = load_catalog()
    now = [1_000_000.0]
    admission = MemoryAdmission(AdmissionPolicy(), lambda: now[0])
    m = SwarmMetrics(catalog, admission)
    gpt = catalog.model("gpt-4.1")
    for tenant, used in ((Tenant("team-a", 3.0), 300), (Tenant("team-b"), 100)):
        now[0] += 1000  # past the request spacing
        permit = admission.acquire(gpt, Ask("j", 10, tenant=tenant)).permit
        assert permit is not None
        admission.finish(gpt, permit, Outcome(used_tokens=used))
    a, b = {"model": "gpt-4.1", "tenant": "team-a"}, {"model": "gpt-4.1", "tenant": "team-b"}
    assert _value(m, "swarm_admission_tenant_share", **a) == pytest.approx(0.75, abs=0.01)
    assert _value(m, "swarm_admission_tenant_target_share", **b) == 0.25
    assert _value(m, "swarm_admission_tenant_tokens", **b) == pytest.approx(100)


def test_find_looks_inside_listeners() -> None:
    m = SwarmMetrics(load_catalog())
    assert find(m) is m
    assert find(Listeners([CallListener(), Listeners([m])])) is m
    assert find(CallListener()) is None


def test_endpoint_serves_the_registry() -> None:
    m = SwarmMetrics(load_catalog())
    m.attempt_finished("deepseek-v3.2", None, USAGE, 0.2)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = m.serve(port, addr="127.0.0.1")
    try:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
    finally:
        server.shutdown()
        server.server_close()
    samples = {
        (s.name, s.labels.get("model")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert samples[("swarm_output_tokens_total", "deepseek-v3.2")] == 200
    assert samples[("swarm_cost_usd_total", "deepseek-v3.2")] > 0
    assert not any(name.endswith("_created") for name, _ in samples)


def test_dashboard_queries_only_exported_metrics() -> None:
    root = Path(__file__).resolve().parents[3]
    dashboard = json.loads((root / "ops" / "grafana" / "swarm-dashboard.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    used = {name for expr in exprs for name in re.findall(r"\bswarm_[a-z_]+", expr)}
    m = SwarmMetrics(load_catalog(), MemoryAdmission(AdmissionPolicy()))
    m.attempt_finished("kimi-k2.5", ErrorKind.RATE_LIMITED, USAGE, 0.1)
    m.node_finished("kimi-k2.5", True, 1, 0.1)
    m.task_started("llm.kimi-k2.5")
    exported = {s.name for family in m.registry.collect() for s in family.samples}
    assert used and used <= exported
    scrape = yaml.safe_load((root / "ops" / "prometheus.yml").read_text())
    assert {job["job_name"] for job in scrape["scrape_configs"]} == {"swarm-workers", "flower"}
