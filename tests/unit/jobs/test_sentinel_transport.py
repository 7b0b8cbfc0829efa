"""kombu's Sentinel transport as swarm installs it (swarm.jobs.sentinel_transport)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import redis
from kombu import Connection

from swarm.jobs import sentinel_transport
from swarm.jobs.sentinel_transport import SentinelChannel, SentinelTransport


def test_the_sentinel_scheme_names_the_fixed_transport_after_install() -> None:
    sentinel_transport.install()
    conn = Connection("sentinel://127.0.0.1:1/0;sentinel://127.0.0.1:2/0")
    assert isinstance(conn.transport, SentinelTransport)
    conn.switch("sentinel://127.0.0.1:2/0")  # kombu's switch to the next sentinel
    assert isinstance(conn.transport, SentinelTransport)


def test_a_channel_whose_connection_is_gone_fails_as_a_connection_error() -> None:
    channel = SentinelChannel.__new__(SentinelChannel)
    channel.connection = SimpleNamespace(client=None)
    with pytest.raises(redis.exceptions.ConnectionError):
        channel._connparams()
