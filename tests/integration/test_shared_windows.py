"""Context windows, token scales and speeds learned by one worker are used by the others
(Redis)."""

from __future__ import annotations

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from swarm.calls.context_window import SharedWindows
from swarm.calls.local.pacing import SharedPacing

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


def test_a_worker_started_later_paces_with_what_the_others_measured(redis_url: str) -> None:
    now = [0.0]
    key = "{llm:test:learned}:paces"
    one = SharedPacing(redis.Redis.from_url(redis_url), key, clock=lambda: now[0])
    for prompt, done in [(2800, 64), (900, 300), (1500, 120), (400, 510)]:
        one.answered("kimi-k2.5", "default", prompt, done, 0.006 * prompt + 0.03 * done, 45.0)
    now[0] += 1.0  # paces put again within a second go out with one's next read or write due
    one.budget("kimi-k2.5", "default", 100, 64, 45.0)
    later = SharedPacing(redis.Redis.from_url(redis_url), key, clock=lambda: now[0])
    assert later.budget("kimi-k2.5", "default", 2800, 2048, 45.0) == one.budget(
        "kimi-k2.5", "default", 2800, 2048, 45.0
    )
    assert later.budget("claude-sonnet-4.5", "default", 2800, 4096, 45.0) < 2048
