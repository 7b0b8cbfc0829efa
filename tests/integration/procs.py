"""Managed subprocesses for integration tests: redis-server, Celery workers, the simulator.

Imported by ``tests/integration/conftest.py`` (which puts this folder on ``sys.path``) and
usable directly from tests as ``import procs``.

Everything here only ever talks to 127.0.0.1 on ports it picked itself (or that the caller
passed in); nothing here touches the machine's own Redis on 6379.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn, Self

REPO_ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN_PORT = 6379  # the machine's shared Redis; never ours


def in_ci() -> bool:
    """True when running under CI (env ``CI=true``; ``1``/``yes`` accepted too)."""
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


def unavailable(reason: str) -> NoReturn:
    """A required service is missing: fail under CI, skip (with *reason*) elsewhere."""
    import pytest

    if in_ci():
        pytest.fail(f"{reason} (CI=true: integration tests may not skip)", pytrace=False)
    pytest.skip(reason)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (never 6379).

    There is an unavoidable race between closing the probe socket and the child binding the
    port; the starters below retry with a new port when the child fails to bind.
    """
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port != FORBIDDEN_PORT:
            return port


def with_db(url: str, db: int) -> str:
    """``redis://host:port/0`` -> ``redis://host:port/<db>`` (auth and query kept)."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(path=f"/{db}"))


# --------------------------------------------------------------------------------------------
# Generic managed process
# --------------------------------------------------------------------------------------------

_LIVE: set[Proc] = set()  # strong refs: an abandoned Proc is still cleaned up


class ProcError(RuntimeError):
    """A managed process did not start / did not log what was expected."""


class Proc:
    """A subprocess in its own session (process group), output to a log file.

    ``env`` is merged over ``os.environ`` (pass ``inherit_env=False`` for an exact env);
    ``PYTHONUNBUFFERED=1`` is always set so Python children flush their logs promptly.
    stdout and stderr both go to ``<log_dir>/<name>.log`` (``name-2.log`` etc. if taken).
    On ``terminate``/``kill`` the whole process group is signalled, so grandchildren
    (e.g. prefork pool processes) go too.
    """

    def __init__(
        self,
        argv: Sequence[str | os.PathLike[str]],
        log_dir: str | os.PathLike[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        name: str | None = None,
        inherit_env: bool = True,
    ) -> None:
        self.argv = [os.fspath(a) for a in argv]
        self.name = name or Path(self.argv[0]).name
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self._unique_log_path(self.log_dir, self.name)
        full_env = dict(os.environ) if inherit_env else {}
        full_env.update(env or {})
        full_env["PYTHONUNBUFFERED"] = "1"
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in _reap()
        try:
            self.popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                env=full_env,
                cwd=os.fspath(cwd) if cwd is not None else None,
                start_new_session=True,
            )
        except BaseException:
            self._log.close()
            raise
        _LIVE.add(self)

    @staticmethod
    def _unique_log_path(log_dir: Path, name: str) -> Path:
        safe = re.sub(r"[^A-Za-z0-9_.@-]+", "_", name) or "proc"
        path, n = log_dir / f"{safe}.log", 1
        while path.exists():
            n += 1
            path = log_dir / f"{safe}-{n}.log"
        path.touch()
        return path

    # -- state ---------------------------------------------------------------------------------
    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    # -- logs ----------------------------------------------------------------------------------
    def log_text(self) -> str:
        return self.log_path.read_bytes().decode("utf-8", "replace")

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def log_mark(self) -> int:
        """Current log size; pass as ``after=`` to ``wait_for_log`` to wait for *new* lines."""
        return self.log_path.stat().st_size

    def wait_for_log(
        self, pattern: str | re.Pattern[str], timeout: float = 30.0, *, after: int = 0
    ) -> re.Match[str]:
        """Wait until *pattern* (regex; use ``re.escape`` for literals) shows in the log.

        Searches from byte offset *after*. Raises ``ProcError`` with the log tail on timeout
        or if the process exits first (after a final look at the log).
        """
        rx = re.compile(pattern) if isinstance(pattern, str) else pattern
        deadline = time.monotonic() + timeout
        while True:
            exited = not self.alive
            with open(self.log_path, "rb") as f:
                f.seek(after)
                text = f.read().decode("utf-8", "replace")
            m = rx.search(text)
            if m:
                return m
            if exited:
                raise ProcError(
                    f"{self.name} (pid {self.pid}) exited with {self.returncode} before "
                    f"logging {rx.pattern!r}; log tail:\n{self.log_tail()}"
                )
            if time.monotonic() >= deadline:
                raise ProcError(
                    f"{self.name} (pid {self.pid}) did not log {rx.pattern!r} within "
                    f"{timeout:g}s; log tail:\n{self.log_tail()}"
                )
            time.sleep(0.05)

    # -- stopping ------------------------------------------------------------------------------
    def _signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)  # pgid == pid thanks to start_new_session

    def terminate(self, timeout: float = 10.0) -> int | None:
        """SIGTERM the group, wait up to *timeout* s, then SIGKILL. Returns the exit code."""
        if self.alive:
            self._signal_group(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                self.popen.wait(10)
        self._reap()
        return self.returncode

    def kill(self) -> int | None:
        """SIGKILL the whole group at once (crash simulation). Returns the exit code."""
        self._signal_group(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(10)
        self._reap()
        return self.returncode

    def _reap(self) -> None:
        # The leader is gone; make sure no orphan of its group survives it.
        if not self.alive:
            self._signal_group(signal.SIGKILL)
        if not self._log.closed:
            self._log.close()
        _LIVE.discard(self)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.terminate()

    def __repr__(self) -> str:
        state = "alive" if self.alive else f"exited {self.returncode}"
        return f"<Proc {self.name} pid={self.pid} {state} log={self.log_path}>"


def cleanup_procs(log_dir: str | os.PathLike[str] | None = None) -> list[Proc]:
    """Kill every still-running Proc (only those logging under *log_dir*, if given)."""
    root = Path(log_dir).resolve() if log_dir is not None else None
    killed = []
    for p in list(_LIVE):
        if root is not None and not p.log_path.resolve().is_relative_to(root):
            continue
        if p.alive:
            killed.append(p)
        p.kill()
    return killed


atexit.register(cleanup_procs)


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
        binary = shutil.which("redis-server")
        if binary is None:
            raise FileNotFoundError(
                "redis-server not found on PATH; install Debian's package "
                "(`apt-get install -y redis-server`) — .ci/run does this in CI"
            )
        self.binary = binary
        self._fixed_port = port is not None
        if port == FORBIDDEN_PORT:
            raise ValueError("port 6379 is the machine's shared Redis; pick another")
        self.port = port if port is not None else free_port()
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
        self.proc: Proc | None = None
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
    def _argv(self) -> list[str]:
        argv = [
            self.binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "yes" if self.appendonly else "no",
            "--dir", str(self.dir),
            "--daemonize", "no",
            "--logfile", "",
        ]  # fmt: skip
        if self.appendonly:
            argv += ["--appendfsync", "always"]
        if self.password:
            argv += ["--requirepass", self.password]
        return argv + self.extra_args

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.alive

    def start(self) -> Self:
        """Start if not running. A fresh server retries on a new port if it lost a bind race."""
        if self.alive:
            return self
        retry_ports = not self._fixed_port and self.proc is None
        for attempt in range(5 if retry_ports else 1):
            try:
                return self._start_once()
            except ProcError:
                if not retry_ports or attempt == 4 or not self._bind_failed():
                    raise
                self.port = free_port()
        raise AssertionError("unreachable")

    def _bind_failed(self) -> bool:
        return self.proc is not None and "Address already in use" in self.proc.log_text()

    def _start_once(self) -> Self:
        self.proc = Proc(self._argv(), self.log_dir, name=f"redis-{self.port}")
        try:
            self._wait_ready()
        except BaseException:
            self.proc.kill()
            raise
        return self

    def _wait_ready(self) -> None:
        import redis

        assert self.proc is not None
        deadline = time.monotonic() + self.startup_timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if not self.proc.alive:
                raise ProcError(
                    f"redis-server exited with {self.proc.returncode}; log tail:\n"
                    f"{self.proc.log_tail()}"
                )
            c = self.client(socket_connect_timeout=1, socket_timeout=1)
            try:
                if c.ping():
                    return
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError) as e:
                last = e
            finally:
                c.close()
            time.sleep(0.05)
        raise ProcError(
            f"redis-server did not answer PING within {self.startup_timeout:g}s ({last!r}); "
            f"log tail:\n{self.proc.log_tail()}"
        )

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
                return self._start_once()
            except ProcError:
                # The port can linger briefly after a kill; anything else is a real failure.
                if not self._bind_failed() or time.monotonic() >= deadline:
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

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
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

CELERY_READY = re.compile(r"\S+@\S+ ready\.")


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
) -> Proc:
    """Start ``celery -A workers worker`` (threads pool) and wait for its ``ready.`` line.

    *env* is merged over os.environ. *hostname* is Celery's ``-n`` (e.g. ``"w1@%h"``).
    Raises ``ProcError`` (with the log tail) if not ready within *timeout* seconds; the
    process is killed in that case.
    """
    argv = [
        sys.executable, "-m", "celery", "-A", app, "worker",
        "--loglevel=INFO", "-P", "threads", "-c", str(concurrency), "-n", hostname,
        "--without-gossip", "--without-mingle", "-E",
    ]  # fmt: skip
    if queues:
        argv += ["-Q", queues]
    argv += list(extra_args)
    name = "celery-" + hostname.replace("%h", "").replace("%n", "").strip("@.")
    proc = Proc(argv, log_dir, env=env, cwd=cwd or REPO_ROOT, name=name)
    try:
        proc.wait_for_log(CELERY_READY, timeout)
    except BaseException:
        proc.kill()
        raise
    return proc


_NO_PROXY_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_status(url: str, timeout: float = 2.0) -> int | None:
    """Status code of GET *url* (bypassing any HTTP(S)_PROXY), or None if unreachable."""
    try:
        with _NO_PROXY_OPENER.open(url, timeout=timeout) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except (urllib.error.URLError, OSError):
        return None


def start_sim(
    args: Sequence[str],
    log_dir: str | os.PathLike[str],
    *,
    env: Mapping[str, str] | None = None,
    port: int | None = None,
    timeout: float = 30.0,
) -> tuple[Proc, str]:
    """Start ``python -m swarm.cli.main sim --port P *args``; wait for GET /health == 200.

    Returns ``(proc, "http://127.0.0.1:P/v1")``. With no *port* given, a free one is picked
    and a lost bind race is retried with another.
    """
    attempts = 1 if port is not None else 3
    for attempt in range(attempts):
        p = port if port is not None else free_port()
        argv = [sys.executable, "-m", "swarm.cli.main", "sim", "--port", str(p), *args]
        proc = Proc(argv, log_dir, env=env, cwd=REPO_ROOT, name=f"sim-{p}")
        deadline = time.monotonic() + timeout
        while proc.alive and time.monotonic() < deadline:
            if http_status(f"http://127.0.0.1:{p}/health", timeout=1.0) == 200:
                return proc, f"http://127.0.0.1:{p}/v1"
            time.sleep(0.05)
        exited = not proc.alive
        proc.kill()
        if attempt < attempts - 1 and "address already in use" in proc.log_text().lower():
            continue
        why = f"exited with {proc.returncode}" if exited else f"timed out after {timeout:g}s"
        raise ProcError(
            f"simulator on port {p} {why} before GET /health answered 200; "
            f"log tail:\n{proc.log_tail()}"
        )
    raise AssertionError("unreachable")
