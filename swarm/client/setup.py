"""What a SwarmClient is built from and what it closes: settings with the caller's
overrides, the key its gateway check sends, and the Celery app's connections."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import kombu.exceptions
import redis
from celery import Celery

from swarm.calls import preflight as gateway_preflight
from swarm.errors import BrokerUnavailableError
from swarm.settings import Settings, load_settings


def with_overrides(settings: Settings | None, overrides: dict[str, Any]) -> Settings:
    """``settings`` (default: the environment) with ``overrides`` validated over them."""
    if settings is None:
        return load_settings(**overrides)
    if not overrides:
        return settings
    return load_settings(**{**dict(settings), **overrides})


def gateway_key(settings: Settings) -> str:
    """The key the gateway check sends: the configured one (MissingKeyError for an empty
    or placeholder one), or NO_KEY when none is set at all (a local server may need none)."""
    return settings.gateway_key() or gateway_preflight.NO_KEY


@contextmanager
def broker_errors() -> Iterator[None]:
    """Turn the broker's and the job store's connection errors into one
    BrokerUnavailableError (a submit, plan or resume that cannot reach them)."""
    try:
        yield
    except (redis.RedisError, kombu.exceptions.OperationalError) as exc:
        raise BrokerUnavailableError(f"cannot reach the broker: {exc}") from None


def close_app(app: Celery) -> None:
    """Close the broker connections and the result backend (its Redis pool and the result
    consumer's subscription) of ``app``; Celery's own ``close()`` only forgets its pool.

    Kombu keeps one producer and connection pool per broker URL for the whole process:
    their connections are closed but the pools stay usable (another client of the same
    broker opens new connections when it next sends)."""
    result_backend = app._backend  # made so far, if any (reading .backend makes one)
    if result_backend is not None:
        consumer = getattr(result_backend, "result_consumer", None)
        if consumer is not None:
            consumer.stop()
        client = vars(result_backend).get("client")  # made on first use (a cached property)
        if client is not None:  # its pool is Celery's: Redis.close() would leave it open
            client.connection_pool.disconnect()
    for pool in (app.amqp._producer_pool, app._pool):
        if pool is not None:  # closes every connection, then refills with unopened ones
            pool.resize(pool.limit, reset=True)
    app.close()
