"""`swarm status --models`: the shared admission counters of every catalog model."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.table import Table

from swarm.calls.admission import AdmissionPolicy
from swarm.calls.admission.redis import RedisAdmission
from swarm.catalog import Catalog, load_catalog
from swarm.cli.render import print_json
from swarm.errors import BrokerUnavailableError, ConfigError
from swarm.settings import Settings

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


def model_counters(settings: Settings, catalog: Catalog) -> dict[str, dict[str, Any]]:
    """Counters per model from the deployment's Redis, keyed on its gateway (SWARM_BASE_URL)."""
    url = settings.backend_url()
    if url is None:
        raise ConfigError("`swarm status --models` needs SWARM_BROKER_URL (counters are in Redis)")
    if settings.base_url is None:
        raise ConfigError("`swarm status --models` needs SWARM_BASE_URL (counters are per gateway)")
    import redis

    controller = RedisAdmission.from_url(url, settings.base_url, AdmissionPolicy())
    try:
        return {name: asdict(controller.counters(spec)) for name, spec in catalog.models.items()}
    except redis.RedisError as exc:
        raise BrokerUnavailableError(f"cannot reach Redis: {exc}") from None


def print_models(counters: dict[str, dict[str, Any]], console: Console) -> None:
    """One row per model: admitted, waiting, 429s, pauses, rate factor, in flight, pause,
    expired."""
    table = Table(title="admission per model (all workers)")
    table.add_column("model", no_wrap=True)
    for label in COLUMNS.values():
        table.add_column(label, justify="right")
    for name, row in counters.items():
        cells = [f"{row[c]:.2f}" if isinstance(row[c], float) else str(row[c]) for c in COLUMNS]
        table.add_row(name, *cells)
    console.print(table)


def show_models(settings: Settings, as_json: bool) -> None:
    """`swarm status --models`: the counters as a table, or as JSON."""
    counters = model_counters(settings, load_catalog(settings.config))
    if as_json:
        print_json({"models": counters})
    else:
        print_models(counters, Console())
