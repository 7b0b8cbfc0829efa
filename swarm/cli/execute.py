"""Running a job from the CLI: embedded or through the broker, then waiting and printing.

Shared by `run`, `demo`, `review`, `analyze` and `resume`, which import it in their bodies:
it loads Celery and the OpenAI client. A job that ends failed, cancelled or over budget exits 1.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import ExitStack
from typing import Any

import click

from swarm.calls.gateway import make_client
from swarm.calls.preflight import NO_KEY, check_gateway
from swarm.catalog import Catalog, load_catalog
from swarm.cli.decorators import JobFlags
from swarm.cli.estimate_line import announce_estimate
from swarm.cli.follow import Watch, follow, interrupted
from swarm.cli.idle import celery_idle_check
from swarm.cli.render import SIMULATED, Render, finish, print_report
from swarm.client import SwarmClient, SwarmHandle
from swarm.errors import ConfigError
from swarm.records import InputItem
from swarm.settings import Settings

Submit = Callable[[SwarmClient], SwarmHandle]


def submitter(
    items: Sequence[InputItem],
    instruction: str,
    aggregate: str,
    model: str | None,
    kind: str,
    job: JobFlags,
    **options: Any,
) -> Submit:
    """Submit the job to a client with ``job``'s budget and tenant, once its pre-flight
    bound was announced (see swarm.cli.estimate_line; with ``job.as_json``: always)."""

    def submit(client: SwarmClient) -> SwarmHandle:
        announce_estimate(
            client.settings, client.catalog, items, instruction, aggregate, model=model,
            kind=kind, max_tokens=options.get("max_tokens"), tools=options.get("tools"),
            always=job.as_json, context=options.get("context"),
            store=getattr(client, "store", None),
        )  # fmt: skip
        return client.submit(
            items, instruction, aggregate_instruction=aggregate, model=model, kind=kind,
            budget_usd=job.budget_usd, tenant=job.tenant, **options,
        )  # fmt: skip

    return submit


def broker_watch(client: SwarmClient, job_id: str) -> Watch:
    """Waiting on a job of the deployment, with the check for queues nobody consumes."""
    idle = celery_idle_check(lambda: client.app, client.catalog)
    return Watch(client.store, client.catalog, job_id, idle_check=idle)


def gateway(settings: Settings) -> tuple[str, str]:
    if settings.base_url is None:
        raise ConfigError(
            "SWARM_BASE_URL is not set: point it at an OpenAI-compatible gateway, or use "
            "--simulate (or `swarm demo`) for the built-in simulator"
        )
    # No key variable at all: fine for a local server; an empty or placeholder one is refused.
    return settings.base_url, settings.gateway_key() or NO_KEY


def broker_client(settings: Settings, strict: bool = False) -> SwarmClient:
    """A client on the deployment, its gateway checked here once (the client does not
    check it again): a gateway the live workers do not call is a warning, or with
    ``strict`` the refusal."""
    base_url, key = gateway(settings)
    client = SwarmClient.from_settings(settings, check_gateway=False)
    client.check_requests = True  # the job's request shape, before anything is queued
    check_gateway(make_client(settings, base_url, key), base_url, keyless=key == NO_KEY)
    if (differs := client.gateway_mismatch(base_url)) is not None:
        if strict:
            raise ConfigError(f"refused (--strict): {differs}")
        click.echo(f"swarm: warning: {differs}", err=True)
    return client


def run_embedded(
    settings: Settings, submit: Submit, simulate: bool, timeout_s: float | None
) -> dict[str, Any]:
    """Run the job on an in-process worker and wait for its report; Ctrl-C at any point
    ends the process at once with one line (swarm.cli.follow.end_now)."""
    catalog = load_catalog(settings.config)
    try:
        return _run_embedded(settings, catalog, submit, simulate, timeout_s)
    except KeyboardInterrupt:  # before the waiting began (follow says it for its own)
        interrupted(None, embedded=True)


def _run_embedded(
    settings: Settings, catalog: Catalog, submit: Submit, simulate: bool, timeout_s: float | None
) -> dict[str, Any]:
    from swarm.embedded import embedded_swarm, simulated_gateway

    with ExitStack() as stack:
        if simulate:
            base_url, key = stack.enter_context(simulated_gateway()), "simulated"
            click.echo(
                "swarm: gateway is SIMULATED (built-in `swarm sim`, no model is called)", err=True
            )
        else:
            base_url, key = gateway(settings)
            check_gateway(make_client(settings, base_url, key), base_url, keyless=key == NO_KEY)
        client = stack.enter_context(embedded_swarm(settings, catalog, base_url, key, join_s=None))
        client.check_requests = not simulate  # the job's request shape, at the real gateway
        handle = submit(client)
        report = follow(Watch(client.store, client.catalog, handle.id, embedded=True), timeout_s)
        # the simulator bills nothing: its costs are the catalog's prices of made-up tokens
        return {**report, SIMULATED: True} if simulate else report
    raise AssertionError("unreachable")  # pragma: no cover


def execute(
    settings: Settings,
    submit: Submit,
    *,
    job: JobFlags,
    render: Render = print_report,
) -> None:
    """Submit (embedded, or through the broker), wait, print; exit as the contract says."""
    simulate, no_wait, strict = job.simulate, job.no_wait, job.strict
    timeout_s, as_json = job.timeout_s, job.as_json
    if settings.embedded:
        if no_wait:
            raise ConfigError(
                "--no-wait needs SWARM_BROKER_URL (embedded jobs die with this process)"
            )
        finish(run_embedded(settings, submit, simulate, timeout_s), as_json, render)
        return
    if simulate:
        raise ConfigError(
            "--simulate runs in embedded mode only; with SWARM_BROKER_URL, start `swarm sim` "
            "and point the workers' SWARM_BASE_URL at it"
        )
    client = broker_client(settings, strict)
    handle = submit(client)
    if no_wait:
        click.echo(handle.id)
        return
    finish(follow(broker_watch(client, handle.id), timeout_s), as_json, render)
