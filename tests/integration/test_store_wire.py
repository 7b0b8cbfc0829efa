"""swarm.store.wire against a real redis-server: the same replies as redis-py's pipeline,
errors where redis-py puts them, and a connection never handed back with replies unread."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis

from swarm.store import wire

SCRIPT = "redis.call('SET', KEYS[1], ARGV[1]); return {ARGV[1], #ARGV}"


def _queue(pipe: Any, sha: str) -> None:
    pipe.set("w:a", "1", nx=True, px=60_000)
    pipe.set("w:a", "2", nx=True, px=60_000)  # taken: None
    pipe.get("w:a")
    pipe.hset("w:h", mapping={"f": "v", "n": 3})
    pipe.hgetall("w:h")
    pipe.exists("w:a", "w:none")
    pipe.evalsha(sha, 1, "w:s", "x", 2, 0.5, b"raw")
    pipe.execute_command("SCRIPT EXISTS", sha)  # a two-word command name


@pytest.mark.parametrize("decode", [False, True])
def test_replies_are_redis_pys_own(redis_url: str, decode: bool) -> None:
    client = redis.Redis.from_url(redis_url, decode_responses=decode)
    sha = client.script_load(SCRIPT)
    theirs = client.pipeline(transaction=False)
    _queue(theirs, sha)
    expected = theirs.execute()
    client.delete("w:a", "w:h", "w:s")
    ours = client.pipeline(transaction=False)
    _queue(ours, sha)
    assert wire.execute(ours) == expected
    assert expected[:3] == [True, None, "1" if decode else b"1"]
    assert ours.command_stack == []


def test_a_commands_error_is_raised_or_is_its_reply(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    client.set("w:str", "x")

    def queue(pipe: Any) -> None:
        pipe.set("w:b", "1")
        pipe.hget("w:str", "f")  # WRONGTYPE
        pipe.get("w:b")

    pipe = client.pipeline(transaction=False)
    queue(pipe)
    with pytest.raises(redis.ResponseError, match=r"Command # 2 \(HGET w:str f\).*WRONGTYPE"):
        wire.execute(pipe)
    pipe = client.pipeline(transaction=False)
    queue(pipe)
    ok, error, value = wire.execute(pipe, raise_on_error=False)
    assert (ok, value) == (True, b"1")
    assert isinstance(error, redis.ResponseError) and "WRONGTYPE" in str(error)
    # The connection went back to the pool with nothing left to read on it.
    assert client.get("w:b") == b"1"


def test_what_redis_cannot_take_is_refused_before_anything_is_sent(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    pipe = client.pipeline(transaction=False)
    pipe.set("w:c", "1")
    pipe.execute_command("SET", "w:d", None)
    with pytest.raises(redis.DataError):
        wire.execute(pipe)
    assert client.exists("w:c") == 0


def test_a_connection_lost_mid_read_is_tried_again_on_a_new_one(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As ``Pipeline.execute``: the connection's own Retry sends the commands again."""
    client = redis.Redis.from_url(redis_url, retry_on_error=[redis.ConnectionError])
    client.ping()  # connected: the loss below is the pipeline's, not the handshake's
    read = redis.connection.AbstractConnection.read_response
    lost: list[int] = []

    def lose_once(conn: Any, *args: Any, **kwargs: Any) -> Any:
        if not lost:
            lost.append(1)
            conn.disconnect()
            raise redis.ConnectionError("connection lost while reading")
        return read(conn, *args, **kwargs)

    monkeypatch.setattr(redis.connection.AbstractConnection, "read_response", lose_once)
    pipe = client.pipeline(transaction=False)
    pipe.set("w:n", "v")
    pipe.get("w:n")
    assert wire.execute(pipe) == [True, b"v"]
    assert lost == [1]


def test_a_reply_that_cannot_be_parsed_drops_the_connection(redis_url: str) -> None:
    """A callback that raised leaves the later replies to come on the socket (here, behind a
    BLPOP that waits 0.3 s): the next command on the pool must not read them as its own."""
    client = redis.Redis.from_url(redis_url, max_connections=1)
    client.set("w:e", "e")
    failing: Callable[..., Any] = lambda response, **options: 1 / 0  # noqa: E731
    client.set_response_callback("GET", failing)
    pipe = client.pipeline(transaction=False)
    pipe.get("w:e")
    pipe.blpop(["w:empty"], timeout=0.3)
    pipe.echo("left on the socket")
    with pytest.raises(ZeroDivisionError):
        wire.execute(pipe)
    client.set_response_callback("GET", lambda response, **options: response)
    assert client.echo("fresh") == b"fresh"


def test_a_transaction_goes_through_redis_py(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    pipe = client.pipeline(transaction=True)
    pipe.set("w:t", "1")
    pipe.incr("w:t")
    assert wire.execute(pipe) == [True, 2]
