"""Redis URLs to clients (swarm.store.connect) and the Sentinel settings around them."""

from __future__ import annotations

import pytest
import redis
from redis.sentinel import SentinelConnectionPool

from swarm.catalog import load_catalog
from swarm.errors import ConfigError
from swarm.jobs.queueing import celery_config
from swarm.settings import Settings, load_settings
from swarm.store.connect import (
    SentinelOptions,
    is_sentinel,
    parse_sentinel_url,
    redis_client,
)

URL = "sentinel://:pw@10.0.0.1:26379/2;sentinel://10.0.0.2:26380;sentinel://10.0.0.3"


def test_a_sentinel_url_lists_every_sentinel_with_the_first_chunks_db_and_password() -> None:
    parsed = parse_sentinel_url(URL)
    assert parsed.sentinels == (("10.0.0.1", 26379), ("10.0.0.2", 26380), ("10.0.0.3", 26379))
    assert (parsed.db, parsed.password, parsed.username) == (2, "pw", None)


def test_a_db_only_on_a_later_chunk_is_not_read_as_kombu_and_celery_do_not() -> None:
    assert parse_sentinel_url("sentinel://a:1;sentinel://b:2/5").db == 0


@pytest.mark.parametrize("url", ["sentinel://a:1/x", "sentinel://a:1;redis://b:2/0", ";"])
def test_a_malformed_sentinel_url_is_a_config_error(url: str) -> None:
    with pytest.raises(ConfigError):
        parse_sentinel_url(url)


def test_only_the_sentinel_scheme_is_sentinel() -> None:
    assert is_sentinel("sentinel://a:1") and is_sentinel("SENTINEL://a:1")
    assert not is_sentinel("redis://a:1/0") and not is_sentinel(None)


def test_a_plain_url_gives_a_plain_client() -> None:
    client = redis_client("redis://127.0.0.1:1/3", socket_timeout=1)
    assert not isinstance(client.connection_pool, SentinelConnectionPool)
    assert client.connection_pool.connection_kwargs["db"] == 3


def test_a_sentinel_url_gives_the_masters_client_with_the_connection_options() -> None:
    client = redis_client(URL, SentinelOptions("mymaster", "spw"), socket_timeout=7)
    pool = client.connection_pool
    assert isinstance(pool, SentinelConnectionPool)
    assert pool.service_name == "mymaster" and pool.is_master
    assert pool.connection_kwargs["db"] == 2
    assert pool.connection_kwargs["password"] == "pw"
    assert pool.connection_kwargs["socket_timeout"] == 7
    sentinels = pool.sentinel_manager.sentinels
    assert [s.connection_pool.connection_kwargs["port"] for s in sentinels] == [26379, 26380, 26379]
    assert all(s.connection_pool.connection_kwargs["password"] == "spw" for s in sentinels)


def test_a_sentinel_url_without_a_master_name_is_refused() -> None:
    with pytest.raises(ConfigError, match="SWARM_SENTINEL_MASTER"):
        redis_client(URL)
    with pytest.raises(ConfigError, match="SWARM_SENTINEL_MASTER"):
        load_settings(broker_url=URL)
    with pytest.raises(ConfigError, match="SWARM_SENTINEL_MASTER"):
        load_settings(broker_url="amqp://guest@h//", result_url=URL)


def test_the_result_backend_defaults_to_the_next_db_of_every_sentinel() -> None:
    s = Settings(broker_url="sentinel://a:1/0;sentinel://b:2", sentinel_master="m")
    assert s.backend_url() == "sentinel://a:1/1;sentinel://b:2/1"


def test_celery_gets_the_master_name_for_the_broker_and_the_result_backend() -> None:
    s = Settings(broker_url=URL, sentinel_master="mymaster", sentinel_password="spw")
    conf = celery_config(s, load_catalog(None))
    expected = {"master_name": "mymaster", "sentinel_kwargs": {"password": "spw"}}
    assert conf["broker_url"] == URL
    assert conf["broker_transport_options"].items() >= expected.items()
    assert conf["broker_transport_options"]["visibility_timeout"] == s.visibility_timeout_s
    assert conf["result_backend"].startswith("sentinel://:pw@10.0.0.1:26379/3;")
    assert conf["result_backend_transport_options"] == expected


def test_amqp_broker_with_a_sentinel_store_sets_only_the_backends_options() -> None:
    s = Settings(broker_url="amqp://guest@h//", result_url=URL, sentinel_master="mymaster")
    conf = celery_config(s, load_catalog(None))
    assert "master_name" not in conf["broker_transport_options"]
    assert conf["result_backend_transport_options"] == {"master_name": "mymaster"}


def test_plain_redis_gets_no_sentinel_options_and_no_replica_wait() -> None:
    s = Settings(broker_url="redis://h:6379/0")
    conf = celery_config(s, load_catalog(None))
    assert "master_name" not in conf["broker_transport_options"]
    assert conf["result_backend_transport_options"] == {}
    assert s.store_wait_ms == 0


def test_the_replica_wait_is_on_behind_sentinel_unless_set() -> None:
    behind = Settings(broker_url=URL, sentinel_master="m")
    assert behind.store_wait_ms == 500
    assert Settings(broker_url=URL, sentinel_master="m", replica_wait_ms=0).store_wait_ms == 0
    assert Settings(broker_url="redis://h/0", replica_wait_ms=50).store_wait_ms == 50


def test_a_readonly_answer_is_a_store_outage() -> None:
    from swarm.store.outages import STORE_OUTAGES

    assert issubclass(redis.exceptions.ReadOnlyError, STORE_OUTAGES)
    assert issubclass(redis.sentinel.MasterNotFoundError, STORE_OUTAGES)
