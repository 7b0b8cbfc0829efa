"""Managed subprocesses for integration tests: redis-server, Celery workers, the simulator.

Imported by ``tests/integration/conftest.py`` (which puts this folder on ``sys.path``) and
usable directly from tests as ``import procs``. The processes themselves are swarm.procs
``Process`` objects (own process group, log file, readiness waits, SIGTERM then SIGKILL):
the supervisor the stack and the benchmarks use too.

Everything here only ever talks to 127.0.0.1 on ports it picked itself (or that the caller
passed in); nothing here touches the machine's own Redis on 6379.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn, Self

from swarm.errors import ProcessError
from swarm.procs import Process, cleanup, free_port, http_status
from swarm.procs.ports import REDIS_DEFAULT_PORT
from swarm.procs.services import (
    CELERY_READY,
    on_free_port,
    spawn_celery_worker,
    start_redis,
    wait_workers,
)
from swarm.procs.services import start_sim as start_sim_process

REPO_ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN_PORT = REDIS_DEFAULT_PORT  # the machine's shared Redis; never ours
Proc = Process
ProcError = ProcessError
__all__ = ["CELERY_READY", "Proc", "ProcError", "free_port", "http_status"]


def lost_port_race(proc: Process) -> bool:
    """True when the process could not bind its port because another took it first."""
    return "address already in use" in proc.log_text().lower()


def in_ci() -> bool:
    """True when running under CI (env ``CI=true``; ``1``/``yes`` accepted too)."""
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


def unavailable(reason: str) -> NoReturn:
    """A required service is missing: fail under CI, skip (with *reason*) elsewhere."""
    import pytest

    if in_ci():
        pytest.fail(f"{reason} (CI=true: integration tests may not skip)", pytrace=False)
    pytest.skip(reason)


def with_db(url: str, db: int) -> str:
    """``redis://host:port/0`` -> ``redis://host:port/<db>`` (auth and query kept)."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(path=f"/{db}"))


def cleanup_procs(log_dir: str | os.PathLike[str] | None = None) -> list[Process]:
    """Kill every still-running Process (only those logging under *log_dir*, if given)."""
    return cleanup(Path(log_dir) if log_dir is not None else None)


def flush(server: RedisServer | ExternalRedis) -> str:
    """Empty the test Redis (the private server: every db; an external one: its URL's db,
    nothing else); its URL. A test that killed the private server gets it back first."""
    if isinstance(server, RedisServer) and not server.alive:
        server.restart()
    c = server.client()
    try:
        c.flushall() if isinstance(server, RedisServer) else c.flushdb()
    finally:
        c.close()
    return server.url


# --------------------------------------------------------------------------------------------
# redis-server
# --------------------------------------------------------------------------------------------


class RedisServer:
    """A private ``redis-server`` on 127.0.0.1:<free port>, data dir in a temp folder.

    Started by the constructor (``start=False`` to defer) and stopped by ``stop()`` or the
    ``with`` block. ``restart()`` brings it back on the same port and dir (for AOF tests pass
    ``appendonly=True``: a SIGTERM stop fsyncs the AOF, a ``kill()`` does not).
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        appendonly: bool = False,
        password: str | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        log_dir: str | os.PathLike[str] | None = None,
        extra_args: Sequence[str] = (),
        start: bool = True,
        startup_timeout: float = 15.0,
    ) -> None:
        if shutil.which("redis-server") is None:
            raise FileNotFoundError(
                "redis-server not found on PATH; install Debian's package "
                "(`apt-get install -y redis-server`) — .ci/run does this in CI"
            )
        if port == FORBIDDEN_PORT:
            raise ValueError("port 6379 is the machine's shared Redis; pick another")
        self._fixed_port = port
        self.port = port or 0
        self.appendonly = appendonly
        self.password = password
        self.extra_args = list(extra_args)
        self.startup_timeout = startup_timeout
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="swarm-redis-")
            data_dir = self._tmp.name
        self.dir = Path(data_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log_dir = Path(log_dir) if log_dir is not None else self.dir
        self.proc: Process | None = None
        if start:
            self.start()

    # -- addresses -----------------------------------------------------------------------------
    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def url(self) -> str:
        return self.url_for(0)

    def url_for(self, db: int) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}{self.host}:{self.port}/{db}"

    def client(self, db: int = 0, **kwargs: Any) -> Any:
        """A ``redis.Redis`` on *db* (``decode_responses=True`` unless overridden). Close it."""
        import redis

        kwargs.setdefault("decode_responses", True)
        kwargs.setdefault("socket_timeout", 10)
        return redis.Redis(host=self.host, port=self.port, db=db, password=self.password, **kwargs)

    # -- lifecycle -----------------------------------------------------------------------------
    def _extra(self) -> list[str]:
        extra = ["--appendonly", "yes", "--appendfsync", "always"] if self.appendonly else []
        if self.password:
            extra += ["--requirepass", self.password]
        return extra + self.extra_args

    def _start_on(self, port: int) -> Process:
        self.port = port
        self.proc = start_redis(
            self.dir, port, log_dir=self.log_dir, extra=self._extra(),
            timeout_s=self.startup_timeout,
        )  # fmt: skip
        return self.proc

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.alive

    def start(self) -> Self:
        """Start if not running. A fresh server retries on a new port if it lost a bind race."""
        if self.alive:
            return self
        fixed = self._fixed_port or (self.port if self.proc is not None else None)
        on_free_port(self._start_on, fixed)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Graceful stop (SIGTERM; redis fsyncs the AOF). The data dir is kept for restart()."""
        if self.proc is not None:
            self.proc.terminate(timeout)

    def kill(self) -> None:
        """SIGKILL: a crash, nothing flushed beyond what ``appendfsync always`` wrote."""
        if self.proc is not None:
            self.proc.kill()

    def restart(self) -> Self:
        """Stop (if running) and start again on the same port with the same data dir."""
        self.stop()
        deadline = time.monotonic() + 10
        while True:
            try:
                self._start_on(self.port)
                return self
            except ProcessError:
                # The port can linger briefly after a kill; anything else is a real failure.
                if not (self.proc and lost_port_race(self.proc)) or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def close(self) -> None:
        """Stop and delete the temp data dir (if we made it)."""
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<RedisServer {self.url} alive={self.alive} dir={self.dir}>"


class ExternalRedis:
    """Stand-in for RedisServer when ``SWARM_TEST_REDIS_URL`` names a server we did not start.

    Has ``url``/``port``/``client()``/``url_for()``; it cannot stop, kill or restart.
    """

    external = True

    def __init__(self, url: str) -> None:
        self.url = url
        parts = urllib.parse.urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 6379
        db = parts.path.strip("/")
        self.db = int(db) if db.isdigit() else 0

    def url_for(self, db: int) -> str:
        return with_db(self.url, db)

    def client(self, db: int | None = None, **kwargs: Any) -> Any:
        import redis

        kwargs.setdefault("decode_responses", True)
        kwargs.setdefault("socket_timeout", 10)
        url = self.url if db is None else self.url_for(db)
        return redis.Redis.from_url(url, **kwargs)

    def __repr__(self) -> str:
        return f"<ExternalRedis {self.url}>"


# --------------------------------------------------------------------------------------------
# Celery worker and simulator
# --------------------------------------------------------------------------------------------


def start_celery_worker(
    env: Mapping[str, str],
    queues: str | None,
    concurrency: int,
    hostname: str,
    log_dir: str | os.PathLike[str],
    *,
    app: str = "workers",
    extra_args: Sequence[str] = (),
    cwd: str | os.PathLike[str] | None = None,
    timeout: float = 60.0,
) -> Process:
    """Start ``celery -A workers worker`` (threads pool, events on) and wait for its
    ``ready.`` line. *env* is merged over os.environ; *hostname* is Celery's ``-n`` (e.g.
    ``"w1@%h"``). ProcError (with the log tail) if not ready in *timeout* s; it is killed then.
    """
    worker = spawn_celery_worker(
        env, queues, concurrency, hostname, Path(log_dir), app=app,
        extra=["-E", *extra_args], cwd=Path(cwd or REPO_ROOT),
    )  # fmt: skip
    wait_workers([worker], timeout)
    return worker


def start_sim(
    args: Sequence[str],
    log_dir: str | os.PathLike[str],
    *,
    env: Mapping[str, str] | None = None,
    port: int | None = None,
    timeout: float = 30.0,
) -> tuple[Process, str]:
    """Start ``python -m swarm.cli.main sim --port P *args``; wait for GET /health == 200.

    Returns ``(proc, "http://127.0.0.1:P/v1")``. With no *port* given, a free one is picked
    and a lost bind race is retried with another.
    """
    proc, chosen = on_free_port(
        lambda p: start_sim_process(args, Path(log_dir), p, env=env, cwd=REPO_ROOT,
                                    timeout_s=timeout),
        port,
    )  # fmt: skip
    return proc, f"http://127.0.0.1:{chosen}/v1"


def interruptible_popen(cmd: Sequence[str], **popen: Any) -> subprocess.Popen[str]:
    """``cmd`` started (text mode, ``popen`` passed on) with SIGINT's default disposition, as
    a terminal's shell starts it: the tests that press Ctrl-C start their CLI with this.

    A process inherits an ignored signal across exec, and Python leaves an inherited
    SIG_IGN for SIGINT in place (no KeyboardInterrupt). A non-interactive shell starts its
    background commands with SIGINT ignored, so a suite started as ``./ops/test ... &`` (or
    under nohup) ran every CLI of these tests with Ctrl-C ignored: the cause of the Ctrl-C
    tests' "SIGINT not acted on" (SigIgn 0x2 in the state interrupt() reports).
    """
    ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    if ignored:  # a Python handler is reset to the default by exec: the child catches it
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(list(cmd), text=True, **popen)
    finally:
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
