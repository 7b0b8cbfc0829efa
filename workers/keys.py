"""A worker's start-up check of its keys: one WARNING per gateway that needs a key and has
none (SWARM_API_KEY / OPENAI_API_KEY, or the ``api_key_env`` a backend names), naming the
variable. A server on this machine, a private network or a compose service (a host name
without a dot) needs none; its calls go out without a key as before."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from urllib.parse import urlsplit

from swarm.calls.probe import is_local
from swarm.catalog import Catalog
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
