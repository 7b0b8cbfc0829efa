"""The asyncio flavour of the producer API, as AsyncOpenAI is of OpenAI: the same methods,
awaited. Redis and broker calls run in the loop's default executor, and waiting for a
report polls with ``asyncio.sleep`` in between, so the loop is never blocked.

    async with AsyncSwarmClient() as client:
        handle = await client.submit(["a", "b"], "Summarise")
        report = await handle.wait(timeout=600)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from swarm.client.core import SwarmClient
from swarm.client.handle import JobProgress, SwarmHandle
from swarm.errors import JobTimeoutError
from swarm.jobs.defaults import DEFAULT_INSTRUCTION
from swarm.jobs.report import Report
from swarm.records import InputItem

if TYPE_CHECKING:
    from celery import Celery

    from swarm.catalog import Catalog
    from swarm.settings import Settings
    from swarm.store import JobStore

POLL_S = 0.25
"""How often AsyncSwarmHandle.wait asks whether the report is written."""


class AsyncSwarmHandle:
    """A submitted job, awaited: SwarmHandle's methods as coroutines."""

    sync: SwarmHandle
    """The blocking handle on the same job."""
    id: str
    """The job's id."""

    def __init__(self, handle: SwarmHandle, poll_s: float = POLL_S) -> None:
        self.sync = handle
        self.id = handle.id
        self._poll_s = poll_s

    def __repr__(self) -> str:
        return f"AsyncSwarmHandle({self.id!r})"

    async def progress(self) -> JobProgress:
        """See [SwarmHandle.progress][swarm.client.SwarmHandle.progress]."""
        return await asyncio.to_thread(self.sync.progress)

    async def done(self) -> bool:
        """True once the job's report is written."""
        return await asyncio.to_thread(self.sync.done)

    async def report(self) -> Report | None:
        """The final report, or None while the job runs."""
        return await asyncio.to_thread(self.sync.report)

    async def wait(self, timeout: float | None = None) -> Report:
        """The report once written; JobTimeoutError after ``timeout`` seconds. Cancelling
        the awaiting task stops the wait, not the job (``cancel()`` stops the job)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if await self.done() and (report := await self.report()) is not None:
                return report  # (a resume may take the report away between the two)
            if deadline is not None and time.monotonic() >= deadline:
                raise JobTimeoutError(f"job {self.id} has no report after {timeout:.0f} s")
            await asyncio.sleep(self._poll_s)

    async def cancel(self) -> None:
        """See [SwarmHandle.cancel][swarm.client.SwarmHandle.cancel]."""
        await asyncio.to_thread(self.sync.cancel)


class AsyncSwarmClient:
    """SwarmClient's methods as coroutines; takes SwarmClient's arguments (see
    [SwarmClient][swarm.client.SwarmClient]), or ``client=`` a SwarmClient to wrap, which
    it then closes too. Made outside or inside a loop: it connects to the job store (one
    PING) as SwarmClient does."""

    sync: SwarmClient
    """The blocking client underneath."""

    def __init__(
        self,
        settings: Settings | None = None,
        catalog: Catalog | None = None,
        store: JobStore | None = None,
        app: Celery | None = None,
        *,
        broker_url: str | None = None,
        result_url: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        config: str | Path | None = None,
        check_gateway: bool = True,
        check_requests: bool = False,
        client: SwarmClient | None = None,
    ) -> None:
        if client is not None:
            self.sync = client
            return
        self.sync = SwarmClient(
            settings, catalog, store, app, broker_url=broker_url, result_url=result_url,
            base_url=base_url, api_key=api_key, config=config, check_gateway=check_gateway,
            check_requests=check_requests,
        )  # fmt: skip

    async def __aenter__(self) -> AsyncSwarmClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """See [SwarmClient.close][swarm.client.SwarmClient.close]."""
        await asyncio.to_thread(self.sync.close)

    async def submit(
        self,
        inputs: Sequence[InputItem | str],
        instruction: str = DEFAULT_INSTRUCTION,
        **options: Any,
    ) -> AsyncSwarmHandle:
        """See [SwarmClient.submit][swarm.client.SwarmClient.submit] (``options`` are its
        keyword arguments)."""
        sync = await asyncio.to_thread(self.sync.submit, inputs, instruction, **options)
        return AsyncSwarmHandle(sync)

    async def plan(
        self, documents: Sequence[InputItem], query: str, **options: Any
    ) -> AsyncSwarmHandle:
        """See [SwarmClient.plan][swarm.client.SwarmClient.plan]."""
        return AsyncSwarmHandle(
            await asyncio.to_thread(self.sync.plan, documents, query, **options)
        )

    async def resume(self, job_id: str, **options: Any) -> AsyncSwarmHandle:
        """See [SwarmClient.resume][swarm.client.SwarmClient.resume]."""
        return AsyncSwarmHandle(await asyncio.to_thread(self.sync.resume, job_id, **options))

    async def attach(self, job_id: str) -> AsyncSwarmHandle:
        """See [SwarmClient.attach][swarm.client.SwarmClient.attach]."""
        return AsyncSwarmHandle(await asyncio.to_thread(self.sync.attach, job_id))
