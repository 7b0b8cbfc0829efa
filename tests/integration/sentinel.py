"""A Redis Sentinel group for integration tests: a primary, one replica and three sentinels
(``redis-server`` and ``redis-server CONF --sentinel``), each on a free 127.0.0.1 port, with
quick failure detection (``down-after-milliseconds`` 1000) so a killed primary is replaced
within seconds. Stopped (and its folders deleted) by ``close()`` or the ``with`` block."""

from __future__ import annotations

import contextlib
import re
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import procs
import redis

from swarm.procs import Process
from swarm.procs.process import unique_log
from swarm.procs.services import on_free_port, started

MASTER = "mymaster"
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 5000
SENTINELS = 3
QUORUM = 2
SENTINEL_READY = re.compile(r"\+monitor master " + MASTER)


class SentinelGroup:
    """The group's processes and URLs (``url(db)``: Celery's ``sentinel://`` form)."""

    def __init__(self, log_dir: Path, *, bind: str = "127.0.0.1") -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="swarm-sentinel-")
        root = Path(self._tmp.name)
        self.log_dir = log_dir
        self.bind = bind
        self.primary = procs.RedisServer(data_dir=root / "primary", log_dir=log_dir)
        self.replica = procs.RedisServer(
            data_dir=root / "replica",
            log_dir=log_dir,
            extra_args=["--replicaof", "127.0.0.1", str(self.primary.port)],
        )
        self.sentinels: list[tuple[Process, int]] = []
        for i in range(SENTINELS):
            folder = root / f"sentinel-{i}"
            folder.mkdir()
            self.sentinels.append(on_free_port(lambda p, f=folder: self._start_sentinel(f, p)))
        self.wait_ready(30)

    def _start_sentinel(self, folder: Path, port: int) -> Process:
        conf = folder / "sentinel.conf"
        conf.write_text(
            f'port {port}\nbind 127.0.0.1\ndaemonize no\nlogfile ""\ndir {folder}\n'
            f"sentinel monitor {MASTER} 127.0.0.1 {self.primary.port} {QUORUM}\n"
            f"sentinel down-after-milliseconds {MASTER} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {MASTER} {FAILOVER_TIMEOUT_MS}\n"
            f"sentinel parallel-syncs {MASTER} 1\n"
        )
        proc = Process(
            ["redis-server", str(conf), "--sentinel"],
            unique_log(self.log_dir, f"sentinel-{port}"),
            name=f"sentinel-{port}",
        )
        return started(proc, lambda: bool(SENTINEL_READY.search(proc.log_text())), 15, "+monitor")

    # -- addresses ------------------------------------------------------------------------
    def url(self, db: int = 0) -> str:
        """``sentinel://127.0.0.1:P1/db;sentinel://127.0.0.1:P2/db;...``"""
        return ";".join(f"sentinel://127.0.0.1:{port}/{db}" for _, port in self.sentinels)

    def sentinel_client(self, index: int = 0) -> redis.Redis:
        return redis.Redis(port=self.sentinels[index][1], decode_responses=True, socket_timeout=2)

    def master_port(self) -> int | None:
        """The primary's port as the first sentinel tells it."""
        client = self.sentinel_client()
        try:
            address = client.sentinel_get_master_addr_by_name(MASTER)
        except redis.RedisError:
            return None
        finally:
            client.close()
        return int(address[1]) if address else None

    def primary_client(self, db: int = 0) -> redis.Redis:
        """A plain client on the current primary (as the sentinels name it); close it."""
        port = self.master_port()
        assert port is not None, "no primary known to the sentinels"
        return redis.Redis(port=port, db=db, decode_responses=True, socket_timeout=10)

    # -- readiness and failover -------------------------------------------------------------
    def wait_ready(self, timeout_s: float) -> None:
        """Until the replica is in sync and every sentinel knows the replica and the other
        sentinels (a failover needs both)."""
        deadline = time.monotonic() + timeout_s
        while not self._ready():
            if time.monotonic() > deadline:
                raise AssertionError(f"sentinel group not ready in {timeout_s} s")
            time.sleep(0.1)

    def _ready(self) -> bool:
        replica = self.replica.client()
        try:
            if replica.info("replication").get("master_link_status") != "up":
                return False
        except redis.RedisError:
            return False
        finally:
            replica.close()
        for index in range(SENTINELS):
            client = self.sentinel_client(index)
            try:
                master: dict[str, Any] = client.sentinel_master(MASTER)
                if int(master.get("num-slaves", 0)) < 1:
                    return False
                if int(master.get("num-other-sentinels", 0)) < SENTINELS - 1:
                    return False
            except redis.RedisError:
                return False
            finally:
                client.close()
        return True

    def wait_promoted(self, old_port: int, timeout_s: float) -> float:
        """Until the sentinels name another primary than ``old_port`` and it accepts
        writes; the time it took."""
        start = time.monotonic()
        while True:
            port = self.master_port()
            if port is not None and port != old_port and _writable(port):
                return time.monotonic() - start
            if time.monotonic() - start > timeout_s:
                raise AssertionError(f"no replica promoted within {timeout_s} s")
            time.sleep(0.05)

    def close(self) -> None:
        for proc, _ in self.sentinels:
            proc.terminate(10)
        self.replica.close()
        self.primary.close()
        self._tmp.cleanup()

    def __enter__(self) -> SentinelGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _writable(port: int) -> bool:
    client = redis.Redis(port=port, socket_timeout=2)
    try:
        return client.info("replication").get("role") == "master"
    except redis.RedisError:
        return False
    finally:
        client.close()


@contextlib.contextmanager
def sentinel_group(log_dir: Path) -> Iterator[SentinelGroup]:
    """A running group; fails under CI=true (skips elsewhere) without redis-server."""
    try:
        group = SentinelGroup(log_dir)
    except (FileNotFoundError, procs.ProcError) as exc:
        procs.unavailable(f"cannot start a Redis Sentinel group: {exc}")
    try:
        yield group
    finally:
        group.close()
