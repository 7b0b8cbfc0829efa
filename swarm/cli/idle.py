"""The no-worker check of the CLI's waiting: swarm.client.idle's."""

from __future__ import annotations

from swarm.client.idle import celery_idle_check, consumers, idle_line, job_queues

__all__ = ["celery_idle_check", "consumers", "idle_line", "job_queues"]
