"""``swarm sim``: run the simulated OpenAI-compatible gateway in the foreground."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import click

from swarm.cli.sim_batch_options import batch_options, nest_batch

if TYPE_CHECKING:
    from pydantic import ValidationError

    from swarm.sim import SimConfig

_LIMIT = click.IntRange(min=1)
PROVIDERS = ("plain", "moonshot", "openai", "deepseek", "anthropic-compat")
"""swarm.sim.profiles.PROVIDERS, spelled here so `swarm --help` does not import the
simulator (a unit test checks that the two agree)."""
USAGE_FORMATS = ("plain", "openai", "moonshot", "deepseek", "anthropic")
"""swarm.sim.usage.USAGE_FORMATS, likewise."""
ACCOUNT_FIELDS = ("balance_answers", "error_format")
"""Options that go to SimConfig.account (swarm.sim.account)."""


def _one_line(error: ValidationError) -> str:
    """The first validation problem as one line naming the CLI option."""
    first = error.errors()[0]
    message = str(first["msg"]).removeprefix("Value error, ")
    fields = [str(part) for part in first["loc"]]
    if fields:
        return f"{_option(fields[0])}: {message}"
    from swarm.sim.config import SimConfig

    for name in sorted(SimConfig.model_fields, key=len, reverse=True):
        message = message.replace(name, _option(name))
    return message


def _option(field: str) -> str:
    return "--" + field.replace("_", "-")


def build_config(options: dict[str, Any]) -> SimConfig:
    """SimConfig from CLI options (None = default); raises click.UsageError when invalid."""
    from pydantic import ValidationError

    from swarm.sim.config import SimConfig

    given = nest_batch({name: value for name, value in options.items() if value is not None})
    account = {name: given.pop(name) for name in ACCOUNT_FIELDS if name in given}
    if account:
        given["account"] = account
    try:
        return SimConfig(**given)
    except ValidationError as exc:
        raise click.UsageError(_one_line(exc)) from None


def serve(config: SimConfig, host: str, port: int) -> None:
    """Serve the simulator in the foreground (aiohttp is imported only here)."""
    from swarm.sim import serve as serve_sim

    serve_sim(config, host=host, port=port)


@click.command(name="sim")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", default=8900, show_default=True, type=click.IntRange(0, 65535))
@click.option("--latency-ms", type=float, help="Fixed latency per request (default 0).")
@click.option("--latency-p50-ms", type=float, help="Lognormal latency median (needs p99).")
@click.option("--latency-p99-ms", type=float, help="Lognormal latency 99th percentile.")
@click.option("--knee-rps", type=float, help="Requests/s above which latency grows.")
@click.option("--knee-inflight", type=int, help="Requests in flight above which latency grows.")
@click.option(
    "--ttft-ms", type=float, help="Generation mode: time to first token (ms) of every answer."
)
@click.option(
    "--tokens-per-s",
    type=float,
    help="Generation mode: answer tokens per second after the first (latency = ttft + "
    "completion_tokens / R; length from [[sim:answer_tokens=N]], cut at max_tokens).",
)
@click.option(
    "--fast-errors/--no-fast-errors",
    default=None,
    help="5xx come back at once, without the answer latency (default: on in generation mode).",
)
@click.option("--rpm", type=_LIMIT, help="Requests per minute per model (default unlimited).")
@click.option("--tpm", type=_LIMIT, help="Tokens per minute per model (default unlimited).")
@click.option("--rps", type=_LIMIT, help="Requests per second per model (default unlimited).")
@click.option("--max-concurrent", type=_LIMIT, help="Requests in flight per model.")
@click.option("--slots", type=_LIMIT, help="Requests computed at once, all models (queue).")
@click.option(
    "--finish-abandoned",
    is_flag=True,
    default=None,
    help="Compute and bill a request whose client went away (like llama.cpp).",
)
@click.option("--error-rate", type=float, help="Share of requests answered 5xx.")
@click.option("--rate-limit-rate", type=float, help="Share of random 429s (not tied to rate).")
@click.option(
    "--spurious-retry-after-s", type=float, help="Retry-After of the random 429s (default 1)."
)
@click.option("--hang-rate", type=float, help="Share of requests never answered.")
@click.option("--bad-json-rate", type=float, help="Share of 200s with a non-JSON body.")
@click.option("--drop-rate", type=float, help="Share of connections closed without answer.")
@click.option("--tool-malformed-rate", type=float, help="Share of tool calls with bad JSON.")
@click.option("--seed", type=int, help="Seed of the latency and fault generators.")
@click.option("--api-key", help="Require 'Authorization: Bearer KEY' (default: no key).")
@click.option("--access-log", is_flag=True, default=None, help="Log every HTTP request.")
@click.option(
    "--no-models",
    is_flag=True,
    default=None,
    help="GET /v1/models answers 404 (a proxy serving only the completion path).",
)
@click.option(
    "--provider",
    type=click.Choice(PROVIDERS),
    help="Provider profile: its request rules (400s), thinking models and usage format "
    "(default plain: no rules).",
)
@click.option(
    "--usage-format",
    type=click.Choice(USAGE_FORMATS),
    help="Write usage in this provider's format instead of the profile's.",
)
@click.option(
    "--reasoning-tokens",
    type=click.IntRange(min=0),
    help="Reasoning tokens of every thinking answer (default: 64-512 per request).",
)
@click.option(
    "--balance-answers",
    type=click.IntRange(min=0),
    help="The account's balance runs out after N answers: every later request gets the "
    'provider\'s quota error (POST /account {"balance_answers": M} tops it up).',
)
@click.option(
    "--error-format",
    type=click.Choice(["moonshot", "openai", "deepseek"]),
    help="Whose error bodies the account's refusals copy (default moonshot).",
)
@click.option(
    "--prompt-cache",
    is_flag=True,
    default=None,
    help="Cache prompt prefixes as providers do: cached once the first request carrying one "
    "was answered, for requests arriving after that.",
)
@click.option("--prompt-cache-ttl-s", type=float, help="Life of a cached prefix (default 300).")
@batch_options
def sim_command(host: str, port: int, **options: Any) -> None:
    """Run a simulated OpenAI-compatible LLM gateway (for tests, demos, benchmarks)."""
    config = build_config(options)
    if config.access_log:
        logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        serve(config, host=host, port=port)
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror}") from None
