"""A task sent again while Redis (store and broker) fails over (workers.tasks.again_later)."""

from __future__ import annotations

from workers.tasks import PUBLISH_RETRY_MAX_S, outage_retry_policy


def test_a_task_sent_again_through_an_outage_tries_for_about_the_outage_bound() -> None:
    policy = outage_retry_policy(60.0)
    assert policy["interval_max"] == PUBLISH_RETRY_MAX_S
    assert policy["max_retries"] * PUBLISH_RETRY_MAX_S >= 60.0
    assert outage_retry_policy(0.0)["max_retries"] == 3  # kombu's own default
