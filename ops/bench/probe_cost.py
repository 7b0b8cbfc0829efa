"""What one probe of the Redis broker costs (swarm.jobs.lost_messages): commands and time.

Starts a private redis-server on a free port as the broker, publishes ``--queued`` task
messages of other jobs to one queue (Celery's own publishing, as producers do) plus the
probed job's, records ``--unacked`` messages as delivered (as kombu's QoS.append does), and
takes the probed job's census through a kombu Redis channel. Counts what Redis executed
(INFO commandstats, before and after). Prints a Markdown table.

    python ops/bench/probe_cost.py                          # 0, 1,000 and 9,000 queued
    python ops/bench/probe_cost.py --queued 5000 --unacked 200
"""

from __future__ import annotations

import argparse
import json
import time

import redis
from lease_cost import commandstats, private_redis

from swarm.catalog import load_catalog
from swarm.jobs.broker_census import take_census
from swarm.jobs.queueing import SUBAGENT_TASK, make_celery
from swarm.settings import Settings

QUEUE = "llm.kimi-k2.5"


def fill(url: str, queued: int, unacked: int) -> None:
    """``queued`` + ``unacked`` messages in the queue, 1 in 125 of job ``probed``, the others
    of another job; then the oldest ``unacked`` recorded as delivered."""
    app = make_celery(Settings(broker_url=url), load_catalog())
    with app.producer_or_acquire() as producer:
        for i in range(queued + unacked):
            job = "probed" if i % 125 == 0 else "other"
            app.send_task(SUBAGENT_TASK, args=(job, f"n{i:05d}"), queue=QUEUE,
                          task_id=f"{job}-n{i:05d}", producer=producer)  # fmt: skip
    r = redis.Redis.from_url(url)
    for i in range(unacked):
        raw = r.rpop(QUEUE) if r.llen(QUEUE) else None
        if raw is None:
            break
        payload = json.loads(raw)
        tag = f"tag-{i}"
        r.zadd("unacked_index", {tag: time.time()})
        r.hset("unacked", tag, json.dumps([payload, QUEUE, QUEUE]))
    r.close()


def measure(queued: int, unacked: int) -> str:
    with private_redis() as url:
        client = redis.Redis.from_url(url)
        fill(url, queued, unacked)
        app = make_celery(Settings(broker_url=url), load_catalog())
        with app.connection_for_write() as conn:
            channel = conn.default_channel
            before = commandstats(client)
            started = time.perf_counter()
            census = take_census(channel, "probed", [QUEUE])
            took_ms = (time.perf_counter() - started) * 1000
            after = commandstats(client)
        client.close()
    sent = {k: after[k] - before.get(k, 0.0) for k in after if k not in ("cpu", "info")}
    used = {k: int(v) for k, v in sorted(sent.items()) if v}
    total = sum(used.values())
    found = len(census.queued) + len(census.unacked)
    return f"| {queued:,} | {unacked:,} | {found} | {total} | {used} | {took_ms:.0f} ms |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queued", type=int, nargs="*", default=[0, 1000, 9000])
    parser.add_argument("--unacked", type=int, default=100)
    args = parser.parse_args()
    print("| queued | unacked | job's messages found | commands | by command | time |")
    print("|---|---|---|---|---|---|")
    for queued in args.queued:
        print(measure(queued, args.unacked))


if __name__ == "__main__":
    main()
