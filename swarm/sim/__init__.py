"""Simulated OpenAI-compatible LLM gateway for tests, demos and benchmarks.

A real aiohttp HTTP server that the ``openai`` SDK talks to over TCP. Use
``start_in_thread`` in tests (own event loop in a daemon thread) or ``serve`` to block
(the ``swarm sim`` command):

    with start_in_thread(SimConfig(rpm=60)) as sim:
        client = openai.OpenAI(base_url=sim.base_url, api_key="test")
        ...
        assert sim.stats()["completed"] == 1

A hosted gateway's shape (``swarm sim --ttft-ms 1800 --tokens-per-s 80``): an answer takes
a time to first token plus its completion tokens at a steady rate, its length is asked
with ``[[sim:answer_tokens=N]]`` and cut at max_tokens (``finish_reason: "length"``), and
5xx come back at once (``fast_errors``):

    with start_in_thread(SimConfig(ttft_ms=1800, tokens_per_s=80)) as sim: ...

A provider's documented rules (``swarm sim --provider moonshot``): fixed sampling fields,
thinking models whose reasoning counts inside max_tokens, the reasoning_content echo rule
and the provider's usage format (swarm.sim.profiles, swarm.sim.rules, swarm.sim.usage):

    with start_in_thread(SimConfig(provider="moonshot")) as sim: ...

See ``swarm.sim.faults`` for the ``[[sim:...]]`` markers, ``swarm.sim.server`` for the
request flow and ``swarm.sim.stats`` for the /stats fields.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import signal
import sys
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from aiohttp import web
from aiohttp.log import access_logger

from swarm.sim.config import ModelLimits, SimConfig
from swarm.sim.server import SIM_KEY, build_app

__all__ = ["ModelLimits", "RunningSim", "SimConfig", "build_app", "serve", "start_in_thread"]

_T = TypeVar("_T")

LISTEN_BACKLOG = 4096
"""TCP accept backlog, so thousands of clients connecting at once are not refused."""
THREAD_SHUTDOWN_TIMEOUT_S = 1.0
"""How long stop() lets in-flight requests finish before cancelling them."""
SERVE_SHUTDOWN_TIMEOUT_S = 5.0
START_TIMEOUT_S = 30.0


async def _start(app: web.Application, host: str, port: int, shutdown_s: float) -> web.AppRunner:
    """Set up a runner for ``app`` and listen on host:port."""
    log = access_logger if app[SIM_KEY].config.access_log else None
    runner = web.AppRunner(
        app, handler_cancellation=True, access_log=log, shutdown_timeout=shutdown_s
    )
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=LISTEN_BACKLOG)
    await site.start()
    return runner


def _bound_port(runner: web.AppRunner) -> int:
    return int(runner.addresses[0][1])


class RunningSim:
    """A simulator serving from its own event loop in a daemon thread."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        thread: threading.Thread,
        runner: web.AppRunner,
        host: str,
    ) -> None:
        self._loop = loop
        self._thread = thread
        self._runner = runner
        self._stopped = False
        self.app = runner.app
        self.host = host
        self.port = _bound_port(runner)
        self.url = f"http://{host}:{self.port}"
        """Root URL (for /stats, /health)."""
        self.base_url = f"{self.url}/v1"
        """OpenAI base URL: pass it as ``openai.OpenAI(base_url=...)``."""

    def _call(self, fn: Callable[[], _T]) -> _T:
        async def run() -> _T:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(START_TIMEOUT_S)

    def stats(self) -> dict[str, Any]:
        """The same JSON as GET /stats, read on the server's loop."""
        return self._call(self.app[SIM_KEY].stats.snapshot)

    def reset(self) -> None:
        """Zero the counters, like POST /stats/reset."""
        self._call(self.app[SIM_KEY].stats.reset)

    def stop(self) -> None:
        """Stop serving, cancel requests still in flight, end the thread. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        cleanup = asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop)
        cleanup.result(START_TIMEOUT_S)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(START_TIMEOUT_S)

    def __enter__(self) -> RunningSim:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _thread_main(
    app: web.Application,
    address: tuple[str, int],
    started: concurrent.futures.Future[tuple[asyncio.AbstractEventLoop, web.AppRunner]],
) -> None:
    # The Runner's close, once stop() stopped the loop, cancels the tasks left and closes it.
    with asyncio.Runner() as runner:
        try:
            app_runner = runner.run(_start(app, *address, THREAD_SHUTDOWN_TIMEOUT_S))
        except BaseException as exc:
            started.set_exception(exc)
            return
        started.set_result((runner.get_loop(), app_runner))
        runner.get_loop().run_forever()


def start_in_thread(
    config: SimConfig | None = None, host: str = "127.0.0.1", port: int = 0
) -> RunningSim:
    """Start a simulator in a daemon thread; returns once it listens (port 0 = any free)."""
    app = build_app(config)
    started: concurrent.futures.Future[tuple[asyncio.AbstractEventLoop, web.AppRunner]] = (
        concurrent.futures.Future()
    )
    thread = threading.Thread(
        target=_thread_main, args=(app, (host, port), started), name="swarm-sim", daemon=True
    )
    thread.start()
    loop, runner = started.result(START_TIMEOUT_S)
    return RunningSim(loop, thread, runner, host)


async def _serve_forever(app: web.Application, host: str, port: int) -> None:
    runner = await _start(app, host, port, SERVE_SHUTDOWN_TIMEOUT_S)
    bound = _bound_port(runner)
    print(f"swarm sim listening on http://{host}:{bound}/v1 (simulated gateway)", file=sys.stderr)
    sys.stderr.flush()
    stop = asyncio.Event()
    with contextlib.suppress(NotImplementedError, RuntimeError):
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def serve(config: SimConfig | None = None, host: str = "127.0.0.1", port: int = 8900) -> None:
    """Serve until SIGINT/SIGTERM (blocking); prints one "listening" line to stderr."""
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve_forever(build_app(config), host, port))
