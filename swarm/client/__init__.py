"""The producer API: submit a job, follow it, read its report, cancel it.

    from swarm import SwarmClient

    with SwarmClient() as client:              # SWARM_BROKER_URL, SWARM_BASE_URL, ...
        handle = client.submit(inputs, "Review this diff for bugs")
        print(handle.progress().phase)         # nodes, aggregating, done
        report = handle.wait(timeout=600)      # a typed Report; report.to_dict() for JSON

``swarm.submit()`` and ``swarm.attach()`` share one client for the process;
``AsyncSwarmClient`` is the same API awaited. Job state lives in the job store (Redis),
so any process can ``attach(job_id)``.
"""

from __future__ import annotations

from swarm.client.aio import AsyncSwarmClient, AsyncSwarmHandle
from swarm.client.core import SwarmClient
from swarm.client.default import attach, close_default, default_client, submit
from swarm.client.handle import JobProgress, Phase, SwarmHandle
from swarm.client.specs import agent_bound
from swarm.jobs.planner import PLAN_KIND

__all__ = [
    "PLAN_KIND",
    "AsyncSwarmClient",
    "AsyncSwarmHandle",
    "JobProgress",
    "Phase",
    "SwarmClient",
    "SwarmHandle",
    "agent_bound",
    "attach",
    "close_default",
    "default_client",
    "submit",
]
