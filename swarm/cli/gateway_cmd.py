"""``swarm gateway check``: the gateway answers, and takes every request the catalog makes.

One small request per distinct request shape of the catalog's routed models (each model,
for each kind it serves), built by the request code the nodes use: a field a provider
refuses is named with the provider's message and the catalog line to change, before any
job runs. Each request is a call the gateway bills (16 completion tokens at most).
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

import click

from swarm.cli.decorators import one_line_errors
from swarm.errors import ConfigError

if TYPE_CHECKING:
    from swarm.catalog import Catalog, ModelSpec


@click.group(name="gateway", short_help="Check the gateway against the model catalog.")
def gateway_group() -> None:
    """The gateway and the model catalog."""


@gateway_group.command(name="check")
@one_line_errors
def check_command() -> None:
    """Check that the gateway answers, and that it takes the requests of every model and
    task kind the catalog routes (one small, billed request per distinct request shape)."""
    from swarm.calls.gateway import make_client
    from swarm.calls.preflight import NO_KEY, check_gateway, check_job_requests
    from swarm.catalog import load_catalog
    from swarm.cli.execute import gateway
    from swarm.settings import load_settings

    settings = load_settings()
    catalog = load_catalog(settings.config)
    base_url, key = gateway(settings)
    client = make_client(settings, base_url, key)
    try:
        check_gateway(client, base_url, keyless=key == NO_KEY)
    finally:
        client.close()
    click.echo(f"gateway {base_url}: answers")
    refused = 0
    for model, kind in _shapes(catalog):
        try:
            check_job_requests(settings, catalog, [(model, kind)], key, os.environ)
        except ConfigError as exc:
            refused += 1
            click.echo(f"refused: {exc}", err=True)
            continue
        click.echo(f"{model.name} ({kind}): not refused")
    if refused:
        raise ConfigError(f"{refused} request shape(s) of the catalog refused (see above)")


def _shapes(catalog: Catalog) -> list[tuple[ModelSpec, str]]:
    """Each routed (model, kind) whose request differs from those before it."""
    from swarm.calls.preflight import probe_request

    seen: set[str] = set()
    shapes = []
    for kind, names in catalog.routing.items():
        for name in names:
            model = catalog.model(name)
            body = {k: v for k, v in probe_request(model, kind).body().items() if k != "messages"}
            key = json.dumps(body, sort_keys=True, default=str)
            if key not in seen:
                seen.add(key)
                shapes.append((model, kind))
    return shapes
