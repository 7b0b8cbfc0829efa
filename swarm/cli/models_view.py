"""`swarm status --models`: the shared admission counters of every catalog model and of
every backend with limits of its own (its in-flight limit: configured, or found from latency)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.table import Table

from swarm.calls.admission import AdmissionPolicy
from swarm.calls.admission.backend import BackendAdmission
from swarm.calls.admission.redis import RedisAdmission
from swarm.calls.local.adaptive import RedisAdaptive
from swarm.catalog import Catalog, load_catalog
from swarm.cli.render import print_json, stdout_console
from swarm.errors import BrokerUnavailableError, ConfigError
from swarm.settings import Settings
from swarm.store.connect import SentinelOptions

COLUMNS = {
    "admitted": "admitted",
    "waiting": "waiting",
    "rate_limited": "429s",
    "pauses": "pauses",
    "factor": "rate factor",
    "inflight": "in flight",
    "paused_for_s": "pause s",
    "expired": "expired",
}
"""Counter -> column label."""


def model_counters(settings: Settings, catalog: Catalog) -> dict[str, dict[str, dict[str, Any]]]:
    """``{"models": ..., "backends": ...}``: counters per model, and per backend with limits
    (with its in-flight ``limit`` and whether it is ``adaptive``), from the deployment's
    Redis, keyed on its gateway (SWARM_BASE_URL)."""
    url = settings.backend_url()
    if url is None:
        raise ConfigError("`swarm status --models` needs SWARM_BROKER_URL (counters are in Redis)")
    if settings.base_url is None:
        raise ConfigError("`swarm status --models` needs SWARM_BASE_URL (counters are per gateway)")
    import redis

    sentinel = SentinelOptions.from_settings(settings)
    controller = RedisAdmission.from_url(url, settings.base_url, AdmissionPolicy(), sentinel)
    backends = BackendAdmission(
        controller, catalog, RedisAdaptive(controller.client, controller.adaptive_key)
    )
    try:
        models = {name: asdict(controller.counters(spec)) for name, spec in catalog.models.items()}
        shared: dict[str, dict[str, Any]] = {}
        for backend in catalog.backends.values():
            kind: dict[str, Any] = {"kind": backend.kind, "adaptive": backend.is_adaptive}
            if not backend.has_limits:
                shared[backend.name] = {**kind, "limit": None}
                continue
            row = asdict(backends.backend_counters(backend))
            limit = backends.backend_spec(backend).max_inflight
            shared[backend.name] = {**row, **kind, "limit": limit}
        return {"models": models, "backends": shared}
    except redis.RedisError as exc:
        raise BrokerUnavailableError(f"cannot reach Redis: {exc}") from None


def print_models(counters: dict[str, dict[str, dict[str, Any]]], console: Console) -> None:
    """One row per model: admitted, waiting, 429s, pauses, rate factor, in flight, pause,
    expired; then one per backend with limits, with its in-flight limit."""
    console.print(_table("admission per model (all workers)", "model", counters["models"]))
    if shares := tenant_rows(counters["models"]):
        title = "token shares per tenant (recent tokens, decaying)"
        console.print(_table(title, "model / tenant", shares, TENANT_COLUMNS))
    for name, row in counters["backends"].items():
        if row["limit"] is None:
            console.print(f"backend {name}: {row['kind']}, no limits of its own (each model's)")
    rows = {
        name: {**row, "limit": f"{row['limit']}{' (adaptive)' if row['adaptive'] else ''}"}
        for name, row in counters["backends"].items()
        if row["limit"] is not None
    }
    if rows:
        title = "admission per backend (all its models)"
        columns = {"kind": "kind", **COLUMNS, "limit": "in-flight limit"}
        console.print(_table(title, "backend", rows, columns))


TENANT_COLUMNS = {
    "weight": "weight",
    "tokens": "recent tokens",
    "share": "share",
    "target": "weighted share",
}
"""Tenant share field -> column label."""


def tenant_rows(models: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``"<model> / <tenant>"`` -> its share row (tokens rounded, shares in percent), for
    every model some tenant used lately."""
    rows = {}
    for name, row in models.items():
        for share in row.get("tenants", ()):
            rows[f"{name} / {share['tenant']}"] = {
                "weight": f"{share['weight']:g}",
                "tokens": f"{share['tokens']:,.0f}",
                "share": f"{share['share']:.1%}",
                "target": f"{share['target']:.1%}",
            }
    return rows


def _table(
    title: str, key: str, rows: dict[str, dict[str, Any]], columns: dict[str, str] = COLUMNS
) -> Table:
    table = Table(title=title)
    table.add_column(key, no_wrap=True)
    for label in columns.values():
        table.add_column(label, justify="right")
    for name, row in rows.items():
        cells = [f"{row[c]:.2f}" if isinstance(row[c], float) else str(row[c]) for c in columns]
        table.add_row(name, *cells)
    return table


def show_models(settings: Settings, as_json: bool) -> None:
    """`swarm status --models`: the counters as tables, or as JSON."""
    counters = model_counters(settings, load_catalog(settings.config))
    if as_json:
        print_json(counters)
    else:
        print_models(counters, stdout_console())
