"""A whole swarm deployment as local processes: simulator, Celery workers, and a producer
client, all on the session's private Redis."""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import procs

from swarm.client import SwarmClient
from swarm.settings import Settings

API_KEY = "sk-swarm-test-not-a-real-key"


@dataclass
class Stack:
    """Running processes and how to reach them."""

    broker_url: str
    base_url: str
    sim: procs.Proc
    workers: list[procs.Proc] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        """The environment every swarm process of this stack gets."""
        return {
            "SWARM_BROKER_URL": self.broker_url,
            "SWARM_BASE_URL": self.base_url,
            "SWARM_API_KEY": API_KEY,
            "SWARM_NODE_TIMEOUT_S": "10",
        }

    def settings(self, **overrides: Any) -> Settings:
        return Settings(
            broker_url=self.broker_url,
            base_url=self.base_url,
            api_key=API_KEY,  # type: ignore[arg-type]
            node_timeout_s=10,
            **overrides,
        )

    def client(self) -> SwarmClient:
        return SwarmClient.from_settings(self.settings())

    def stats(self) -> dict[str, Any]:
        root = self.base_url.removesuffix("/v1")
        with urllib.request.urlopen(f"{root}/stats", timeout=5) as resp:
            return json.loads(resp.read())  # type: ignore[no-any-return]

    def reset_stats(self) -> None:
        root = self.base_url.removesuffix("/v1")
        req = urllib.request.Request(f"{root}/stats/reset", method="POST")
        urllib.request.urlopen(req, timeout=5).close()

    def add_worker(
        self, name: str, log_dir: Path, queues: str | None = None, c: int = 16
    ) -> procs.Proc:
        worker = procs.start_celery_worker(self.env, queues, c, f"{name}@%h", log_dir)
        self.workers.append(worker)
        return worker

    def worker_logs(self) -> str:
        return "\n".join(w.log_text() for w in self.workers)

    def stop(self) -> None:
        for proc in [*self.workers, self.sim]:
            proc.terminate(timeout=10)


def start_stack(broker_url: str, log_dir: Path, sim_args: list[str]) -> Stack:
    sim, base_url = procs.start_sim(sim_args, log_dir)
    return Stack(broker_url=broker_url, base_url=base_url, sim=sim)
