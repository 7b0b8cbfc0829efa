"""A worker's start-up checks of its keys: one WARNING per gateway that needs a key and has
none (SWARM_API_KEY / OPENAI_API_KEY, or the ``api_key_env`` a backend names), naming the
variable. A server on this machine, a private network or a compose service (a host name
without a dot) needs none; its calls go out without a key as before.

Then each gateway the worker calls is asked for its model list with the worker's own key,
as a producer's pre-flight does with the producer's (swarm.calls.preflight; nothing is
computed or billed): a key the gateway refuses, or a gateway it cannot reach, is one WARNING
at start, not a job that fails at its aggregation after its sub-agents were billed."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from urllib.parse import urlsplit

import openai

from swarm.calls.gateway import NO_KEY
from swarm.calls.preflight import check_gateway
from swarm.calls.probe import is_local
from swarm.calls.runtime import Runtime
from swarm.catalog import Catalog
from swarm.errors import GatewayUnavailableError, MissingKeyError
from swarm.settings import Settings

log = logging.getLogger(__name__)

DEFAULT_KEY_VARIABLE = "SWARM_API_KEY"


def needs_key(base_url: str) -> bool:
    """False for a local or private server, or a single-label host (compose services)."""
    host = urlsplit(base_url).hostname or ""
    return not (is_local(base_url) or "." not in host)


def missing_keys(settings: Settings, catalog: Catalog, environ: Mapping[str, str]) -> list[str]:
    """One line per (gateway, key variable) the catalog's models call without a key."""
    default_key = settings.usable_key()
    models: dict[tuple[str, str], list[str]] = {}
    for spec in catalog.models.values():
        backend = catalog.backend_of(spec)
        if backend.base_url is not None and backend.api_key_env:
            url, variable = backend.base_url, backend.api_key_env
            key = environ.get(variable, "").strip() or None
        else:
            url, variable, key = backend.base_url or settings.base_url or "", "", default_key
        if key is None and url and needs_key(url):
            models.setdefault((url, variable or DEFAULT_KEY_VARIABLE), []).append(spec.name)
    return [
        f"no API key for {url} (models {', '.join(names)}): set {variable}"
        + (" (or OPENAI_API_KEY)" if variable == DEFAULT_KEY_VARIABLE else "")
        + "; until then its calls go out without a key and fail auth"
        for (url, variable), names in models.items()
    ]


def warn_missing_keys(settings: Settings, catalog: Catalog, environ: Mapping[str, str]) -> None:
    """Log missing_keys at WARNING."""
    for line in missing_keys(settings, catalog, environ):
        log.warning("%s", line)


def own_gateways(rt: Runtime) -> list[tuple[str, str, openai.OpenAI]]:
    """(base URL, key variable, client) of each gateway this worker calls, once each."""
    found = {}
    if rt.settings.base_url is not None:
        found[(rt.settings.base_url, rt.client.api_key)] = (
            rt.settings.base_url, DEFAULT_KEY_VARIABLE, rt.client
        )  # fmt: skip
    for name, client in rt.backend_clients.items():
        backend = rt.catalog.backends[name]
        if backend.base_url is not None:
            variable = backend.api_key_env or DEFAULT_KEY_VARIABLE
            found.setdefault(
                (backend.base_url, client.api_key), (backend.base_url, variable, client)
            )
    return list(found.values())


def refused_keys(rt: Runtime) -> list[str]:
    """One line per gateway that refuses this worker's key or cannot be reached (a
    gateway with no key that needs one is missing_keys' line, not said twice)."""
    lines = []
    for url, variable, client in own_gateways(rt):
        keyless = client.api_key == NO_KEY
        if keyless and needs_key(url):
            continue
        try:
            check_gateway(client, url, keyless=keyless)
        except (GatewayUnavailableError, MissingKeyError) as exc:
            lines.append(
                f"start-up check: {exc}; this worker's calls to it will fail until its "
                f"{variable} (or SWARM_BASE_URL) is fixed and the worker restarted"
            )
        else:
            log.debug("start-up check: %s answered with this worker's key", url)
    return lines


def warn_refused_keys(rt: Runtime) -> None:
    """Log refused_keys at WARNING."""
    for line in refused_keys(rt):
        log.warning("%s", line)
