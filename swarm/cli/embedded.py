"""The CLI's embedded mode (`swarm demo`, `swarm run --simulate`): swarm.testing.embedded's
in-process broker, worker and simulator."""

from __future__ import annotations

from swarm.testing.embedded import DEMO_SIM, embedded_swarm, in_process_worker, simulated_gateway

__all__ = ["DEMO_SIM", "embedded_swarm", "in_process_worker", "simulated_gateway"]
