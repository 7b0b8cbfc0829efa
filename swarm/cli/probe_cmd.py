"""``swarm probe [BASE_URL]``: measure a gateway and print a catalog snippet for it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import click

from swarm.cli.decorators import one_line_errors
from swarm.errors import ConfigError

if TYPE_CHECKING:
    from swarm.calls.probe import ProbeResult

KINDS = ("default", "extract", "summarize", "code", "review", "reason", "plan", "aggregate")
DEFAULT_WINDOW = 4096


def catalog_name(model_id: str) -> str:
    """A catalog name from a model id (servers may list a file path)."""
    stem = model_id.rsplit("/", 1)[-1].removesuffix(".gguf")
    return re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-").lower() or "local-model"


KIND_NOTES = {"local": "few slots, requests queue", "hosted": "answers do not queue"}


def catalog_snippet(result: ProbeResult) -> str:
    """Catalog TOML for the probed backend: one model, every kind routed to it."""
    from swarm.calls.probe import is_local

    local = is_local(result.base_url)
    window = result.context_window or DEFAULT_WINDOW
    name = catalog_name(result.model)
    price = "0" if local else "0  # set the gateway's price"
    lines = [
        "[backends.probed]",
        f'base_url = "{result.base_url}"',
        f'kind = "{result.kind}"  # measured: {KIND_NOTES[result.kind]}',
        f"max_inflight = {result.inflight}  # measured; drop the line to find it from latency",
        "",
        f'[models."{name}"]',
        f'gateway_name = "{result.model}"',
        f'queue = "llm.{name}"',
        'backend = "probed"',
        f"input_per_mtok_usd = {price}",
        f"output_per_mtok_usd = {price}",
        f"cached_input_per_mtok_usd = {price}",
        "rpm = 100000",
        "tpm = 100_000_000",
        f"max_inflight = {result.inflight}",
        f"context_window = {window}" + ("" if result.context_window else "  # not stated: a guess"),
        f"max_tokens = {max(64, min(1024, window // 4))}",
        "",
        "[routing]",
        *(f'{kind} = ["{name}"]' for kind in KINDS),
    ]
    return "\n".join(lines)


def report_lines(result: ProbeResult) -> list[str]:
    """What was measured, one fact per line."""
    lines = [f"gateway {result.base_url}", f"models: {', '.join(result.models) or '(none)'}"]
    lines.append(f"probed model: {result.model}")
    for level in result.levels:
        lines.append(
            f"  {level.inflight} in flight: median latency {level.latency_s * 1000:.0f} ms, "
            f"{level.throughput:.2f} requests/s"
        )
    lines.append(f"in flight: {result.inflight} (throughput stops rising beyond)")
    lines.append(f"looks {result.kind}: {result.kind_reason}")
    lines.append(f"JSON mode: {'yes' if result.json_mode else 'no'}")
    lines.append(f"tool calls: {'yes' if result.tool_calls else 'no'}")
    window = result.context_window
    lines.append(f"context window: {window if window else 'not stated by the server'}")
    return lines


@click.command("probe")
@click.argument("base_url", required=False)
@click.option("--model", default=None, help="Model to probe (default: the first listed).")
@one_line_errors
def probe_command(base_url: str | None, model: str | None) -> None:
    """Measure a gateway (models, latency at 1-8 in flight, JSON mode, tool calls, context
    window) and print a catalog snippet for it. BASE_URL defaults to SWARM_BASE_URL."""
    from swarm.calls.gateway import make_client
    from swarm.calls.preflight import check_gateway
    from swarm.calls.probe import probe
    from swarm.cli.execute import gateway
    from swarm.settings import load_settings

    settings = load_settings() if base_url is None else load_settings(base_url=base_url)
    if settings.base_url is None:
        raise ConfigError("give BASE_URL or set SWARM_BASE_URL")
    url, key = gateway(settings)
    client = make_client(settings, url, key)
    check_gateway(client, url, keyless=key == "no-key")
    result = probe(client, url, model)
    click.echo("\n".join(report_lines(result)))
    click.echo("\n# catalog snippet (SWARM_CONFIG):\n" + catalog_snippet(result))
