"""One factory from a Redis URL to a redis-py client, plain or through Redis Sentinel.

A plain URL (``redis://``, ``rediss://``, ``unix://``) is redis-py's ``from_url``. Celery's
Sentinel form lists the sentinels, separated by ``;``, with the primary's password and
database in the first one (where kombu and Celery read them)::

    sentinel://:PASSWORD@10.0.0.1:26379/1;sentinel://10.0.0.2:26379;sentinel://10.0.0.3:26379

The master's name is not in the URL (SWARM_SENTINEL_MASTER, as Celery's ``master_name``
transport option); the sentinels' own password is SWARM_SENTINEL_PASSWORD. The client is
``Sentinel(...).master_for(name)``: its connections ask the sentinels where the primary is
when they connect, and a connection error (the primary died) or a READONLY answer (it was
demoted) drops the connection, so the next command reaches the promoted replica without
restarting the process.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis
from redis.sentinel import Sentinel

from swarm.errors import ConfigError

if TYPE_CHECKING:
    from swarm.settings import Settings

SENTINEL_SCHEME = "sentinel"
DEFAULT_SENTINEL_PORT = 26379
SENTINEL_TIMEOUT_S = 2.0
"""Socket timeout of the queries to the sentinels themselves (where is the primary?)."""


@dataclass(frozen=True)
class SentinelOptions:
    """What a ``sentinel://`` URL needs besides the URL (read from the settings)."""

    master: str | None = None
    """The monitored master's name (SWARM_SENTINEL_MASTER)."""
    password: str | None = None
    """The sentinels' password (SWARM_SENTINEL_PASSWORD), if they require one."""

    @classmethod
    def from_settings(cls, settings: Settings) -> SentinelOptions:
        """The options ``settings`` name."""
        secret = settings.sentinel_password
        return cls(settings.sentinel_master, secret.get_secret_value() if secret else None)

    def sentinel_kwargs(self) -> dict[str, Any]:
        """Celery's and kombu's ``sentinel_kwargs`` transport option (the sentinels' auth)."""
        return {"password": self.password} if self.password else {}


@dataclass(frozen=True)
class SentinelUrl:
    """A parsed ``sentinel://`` URL."""

    sentinels: tuple[tuple[str, int], ...]
    db: int
    password: str | None
    username: str | None


def is_sentinel(url: str | None) -> bool:
    """True for Celery's ``sentinel://`` URL form."""
    return url is not None and url.split("://", 1)[0].lower() == SENTINEL_SCHEME


def parse_sentinel_url(url: str) -> SentinelUrl:
    """The sentinels of a ``sentinel://`` URL, and the primary's database and credentials
    from its first chunk (where kombu and Celery's result backend read them)."""
    chunks = [urllib.parse.urlsplit(c.strip()) for c in url.split(";") if c.strip()]
    if not chunks:
        raise ConfigError("a sentinel:// URL names no sentinel")
    hosts = []
    for parts in chunks:
        if parts.scheme != SENTINEL_SCHEME or not parts.hostname:
            raise ConfigError(f"not a sentinel://host:port chunk: {parts.scheme}://...")
        hosts.append((parts.hostname, parts.port or DEFAULT_SENTINEL_PORT))
    first = chunks[0]
    path = first.path.strip("/") or "0"
    if not path.isdigit():
        raise ConfigError(f"sentinel:// URL: the database must be a number, not {path!r}")
    return SentinelUrl(
        tuple(hosts),
        int(path),
        urllib.parse.unquote(first.password) if first.password else None,
        urllib.parse.unquote(first.username) if first.username else None,
    )


def redis_client(url: str, sentinel: SentinelOptions | None = None, **kwargs: Any) -> redis.Redis:
    """A client on the Redis ``url`` names: ``redis.Redis.from_url`` for a plain URL, the
    Sentinel master's client for a ``sentinel://`` one (``kwargs`` go to its connections)."""
    if not is_sentinel(url):
        return redis.Redis.from_url(url, **kwargs)
    options = sentinel or SentinelOptions()
    if not options.master:
        raise ConfigError(
            "a sentinel:// Redis URL needs SWARM_SENTINEL_MASTER (the master name the "
            "sentinels monitor, e.g. mymaster)"
        )
    parsed = parse_sentinel_url(url)
    sentinels = Sentinel(  # type: ignore[no-untyped-call, unused-ignore]
        list(parsed.sentinels),
        sentinel_kwargs={"socket_timeout": SENTINEL_TIMEOUT_S, **options.sentinel_kwargs()},
    )
    client: redis.Redis = sentinels.master_for(  # type: ignore[no-untyped-call, unused-ignore]
        options.master,
        db=parsed.db,
        password=parsed.password,
        username=parsed.username,
        **kwargs,
    )
    return client
