"""Context windows and token scales learned by one worker are used by the others (Redis)."""

from __future__ import annotations

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from swarm.calls.context_window import SharedWindows

pytestmark = pytest.mark.integration

KEY = "{llm:test:learned}:windows"


def test_what_one_worker_learns_the_other_uses(redis_url: str) -> None:
    now = [0.0]
    one = SharedWindows(redis.Redis.from_url(redis_url), KEY, clock=lambda: now[0])
    two = SharedWindows(redis.Redis.from_url(redis_url), KEY, clock=lambda: now[0])
    assert two.window("kimi-k2.5", 262_144) == 262_144
    one.learn("kimi-k2.5", 4096)
    one.calibrate("kimi-k2.5", 1000, 1400)
    assert two.window("kimi-k2.5", 262_144) == 262_144  # read at most once a second
    now[0] += 1.5
    assert two.window("kimi-k2.5", 262_144) == 4096
    assert two.scale("kimi-k2.5") == pytest.approx(1.4)
    two.learn("kimi-k2.5", 8192)  # a larger window never replaces a smaller one
    assert two.window("kimi-k2.5", 262_144) == 4096


def test_without_redis_the_process_keeps_its_own() -> None:
    gone = redis.Redis(host="127.0.0.1", port=1, retry=Retry(NoBackoff(), 0))
    windows = SharedWindows(gone, KEY)
    windows.learn("m", 4096)
    assert windows.window("m", 100_000) == 4096
