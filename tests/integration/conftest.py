"""Fixtures for integration tests: a private redis-server, per-test clean Redis, process logs.

Every test collected under tests/integration/ is marked ``integration`` automatically.

Redis policy (see the developer guide):
* By default the session starts its own ``redis-server`` on a free 127.0.0.1 port with a temp
  data dir; the machine's Redis on 6379 is never touched.
* If ``SWARM_TEST_REDIS_URL`` is set, that server is used instead, and **the db in that URL is
  FLUSHDB'd before every test that uses ``redis_url``** (other dbs there are left alone); one
  process only (``./ops/test -n 0``): xdist processes would flush each other's data.
* If Redis cannot be had: the tests fail under ``CI=true`` and are skipped (with the reason)
  elsewhere.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import procs

if TYPE_CHECKING:
    from faults import FaultStack

_HERE = Path(__file__).resolve().parent
_LOGS_KEY = pytest.StashKey[Path]()


# -- marking ----------------------------------------------------------------------------------
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # This hook sees the whole session's items, not just this folder's: filter by path.
    for item in items:
        if item.path.resolve().is_relative_to(_HERE):
            item.add_marker(pytest.mark.integration)


# -- redis ------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def redis_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[procs.RedisServer | procs.ExternalRedis]:
    """The session's Redis: ``.url`` (db 0), ``.port``, ``.client(db=0, **kw)``, ``.url_for(db)``.

    A ``procs.RedisServer`` we started (has stop/kill/restart — but do not stop or restart the
    shared one in a test; use ``redis_factory`` for that), or a ``procs.ExternalRedis`` when
    ``SWARM_TEST_REDIS_URL`` is set.
    """
    import redis

    external = os.environ.get("SWARM_TEST_REDIS_URL")
    if external and int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
        # Every xdist process would flush the same db under the others' tests.
        procs.unavailable("SWARM_TEST_REDIS_URL is one db for every xdist process: add -n 0")
    if external:
        server = procs.ExternalRedis(external)
        c = server.client(socket_connect_timeout=3)
        problem = None
        try:
            c.ping()
        except redis.RedisError as e:
            problem = f"SWARM_TEST_REDIS_URL={external} is not reachable: {type(e).__name__}: {e}"
        finally:
            c.close()
        if problem:
            procs.unavailable(problem)  # outside the except: no chained traceback
        yield server
        return

    own = _start_redis(log_dir=tmp_path_factory.mktemp("redis-logs"))
    try:
        yield own
    finally:
        own.close()


def _start_redis(**kwargs: Any) -> procs.RedisServer:
    problem = None
    try:
        return procs.RedisServer(**kwargs)
    except (FileNotFoundError, procs.ProcError) as e:
        problem = f"cannot start a private redis-server: {e}"
    procs.unavailable(problem)  # outside the except: no chained traceback


@pytest.fixture
def redis_url(redis_server: procs.RedisServer | procs.ExternalRedis) -> str:
    """URL of a freshly emptied Redis db (db 0 of the private server, which is FLUSHALL'd,
    so ``procs.with_db(url, n)`` / ``redis_server.url_for(n)`` are empty too; with
    ``SWARM_TEST_REDIS_URL`` only the URL's own db is flushed)."""
    return procs.flush(redis_server)


@pytest.fixture
def redis_factory(tmp_logs: Path) -> Iterator[Callable[..., procs.RedisServer]]:
    """Start extra private redis-servers for this test (for stop/kill/restart/AOF tests):
    ``srv = redis_factory(appendonly=True, password="pw")``; all are closed at teardown."""
    started: list[procs.RedisServer] = []

    def make(**kwargs: Any) -> procs.RedisServer:
        kwargs.setdefault("log_dir", tmp_logs)
        srv = _start_redis(**kwargs)
        started.append(srv)
        return srv

    yield make
    for srv in started:
        srv.close()


# -- process logs -----------------------------------------------------------------------------
@pytest.fixture
def tmp_logs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """Folder for this test's process logs (pass it as ``log_dir``). If the test fails, the
    tails of all ``*.log`` files in it are added to the failure report; at teardown every
    ``procs.Proc`` still running with its log here is killed."""
    logs = tmp_path / "logs"
    logs.mkdir()
    request.node.stash[_LOGS_KEY] = logs
    yield logs
    procs.cleanup_procs(logs)


def _log_tails(logs: Path, lines: int = 60) -> str:
    parts = []
    for f in sorted(logs.rglob("*.log")):
        text = f.read_bytes().decode("utf-8", "replace").splitlines()
        parts.append(f"==> {f} (last {min(lines, len(text))} of {len(text)} lines) <==")
        parts.extend(text[-lines:])
    return "\n".join(parts)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report: pytest.TestReport = yield
    logs = item.stash.get(_LOGS_KEY, None)
    if logs is not None and report.failed and logs.is_dir():
        tails = _log_tails(logs)
        if tails:
            report.sections.append((f"process logs ({report.when})", tails))
    return report


# -- rabbitmq ---------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def rabbit_url() -> Iterator[str]:
    """amqp:// URL of a vhost made for this session on the machine's RabbitMQ (deleted at the
    end); fails under CI=true, skips elsewhere, when RabbitMQ is missing. rabbitmqctl costs
    seconds per call, so the session shares one vhost."""
    import rabbit

    with rabbit.vhost() as url:
        yield url


# -- a module's fault stack on each broker -----------------------------------------------------
@pytest.fixture(scope="module", params=["redis", "amqp"])
def broker_fs(
    request: pytest.FixtureRequest,
    redis_server: procs.RedisServer | procs.ExternalRedis,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[FaultStack]:
    """The module's fault stack (faults.fault_stack) on the Redis broker, then behind the
    session's RabbitMQ vhost (the job store stays on Redis). The module says what it runs in
    ``BROKER_STACK = faults.BrokerStack(...)``; its tests run once per broker."""
    from faults import BrokerStack, fault_stack

    spec = getattr(request.module, "BROKER_STACK", None)
    if not isinstance(spec, BrokerStack):
        raise TypeError(f"{request.module.__name__} uses broker_fs without a BROKER_STACK")
    logs = tmp_path_factory.mktemp(f"{spec.name}-{request.param}")
    url = request.getfixturevalue("rabbit_url") if request.param == "amqp" else None
    with fault_stack(redis_server, logs, list(spec.sim_args), dict(spec.env), url) as stack:
        yield stack
