"""A redis-py pipeline's commands sent on one pooled connection, packed in C.

Hand-written because redis-py's own pipeline spends Python per argument: 8.2 encodes
every argument in Python before handing them to hiredis (one ``Encoder.encode`` call and
a generator step each) and runs its observability hooks around the batch; packed here, a
node's pipelines cost less CPU (the figures: ops/bench/results/hosted_speed_cpu.md). The job
store's durable writes go through it (swarm.store.durable, swarm.store.group_commit).

What stays redis-py's: the commands are built by a Pipeline's methods (their argument
handling), every reply goes through the client's ``parse_response`` (response callbacks,
its options), the connection comes from and goes back to the client's pool (a Sentinel
pool too), and a connection error is tried again by the connection's own ``Retry``, as
``Pipeline.execute`` does. A pipeline this module does not cover (a transaction, WATCH,
``pipe.script`` scripts) goes to ``Pipeline.execute`` unchanged.
"""

from __future__ import annotations

from typing import Any

from hiredis import pack_command
from redis.exceptions import ResponseError


def execute(pipe: Any, *, raise_on_error: bool = True) -> list[Any]:
    """The replies of the commands queued on ``pipe`` (a non-transactional redis-py
    Pipeline), in order: a command's error is raised (the first one, as redis-py
    annotates it) or, with ``raise_on_error`` False, is its reply."""
    stack = pipe.command_stack
    if not stack:
        return []
    if pipe.transaction or pipe.explicit_transaction or pipe.watching or pipe.scripts:
        return list(pipe.execute(raise_on_error=raise_on_error))
    pool = pipe.connection_pool
    conn = pool.get_connection()
    try:
        replies: list[Any] = conn.retry.call_with_retry(
            lambda: _send_and_read(pipe, conn, stack), lambda _error: conn.disconnect()
        )
    finally:
        pool.release(conn)
        pipe.command_stack = []
    if raise_on_error:
        pipe.raise_first_error(stack, replies)
    return replies


def _send_and_read(pipe: Any, conn: Any, stack: list[tuple[Any, Any]]) -> list[Any]:
    conn.send_packed_command([pack(conn, [args for args, _ in stack])])
    replies: list[Any] = []
    try:
        for args, options in stack:
            try:
                replies.append(pipe.parse_response(conn, args[0], **options))
            except ResponseError as exc:
                replies.append(exc)
    except BaseException:
        # Replies of the rest are still on the socket: the connection must not be reused.
        conn.disconnect()
        raise
    return replies


def pack(conn: Any, commands: list[tuple[Any, ...]]) -> bytes:
    """``commands`` in the Redis protocol, one buffer: hiredis packs str (UTF-8), bytes,
    int and float as redis-py's encoder does; what it refuses, and a client with another
    encoding, goes through the connection's own packer, which raises redis-py's DataError
    for what Redis cannot take (None, bool)."""
    if conn.encoder.encoding == "utf-8":
        try:
            return b"".join([pack_command(_split(args)) for args in commands])
        except TypeError:
            pass
    return b"".join(conn.pack_commands(commands))


def _split(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """A command name of two words ("SCRIPT LOAD") as two arguments, as redis-py sends it."""
    name = args[0]
    if isinstance(name, str) and " " in name:
        return (*name.split(), *args[1:])
    return args
