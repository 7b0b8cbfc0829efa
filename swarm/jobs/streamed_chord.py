"""A Celery chord whose header is published as it is made, never held whole.

``chord(header)(body)`` keeps every header signature and every result it made until the
call returns, even from a generator: the group wraps a generator in ``celery.utils.
functional._regen``, which keeps each item it yielded, and ``group.apply_async`` returns
a list of every header task's AsyncResult. For a 100,000-node job that is 6,250
signatures (each a copy of the body) and their results in the producer at once.

``send_chord`` sends the same chord without holding it, the way Celery itself sends a
chord whose header is a generator on the Redis result backend (``group._apply_tasks``):
the body is frozen with the chord's group id, each header task is published with that
group id, its index in the header and the body as its ``chord`` option, and the header's
size (``set_chord_size``) is written just before its last task is published. The workers
join the chord exactly as Celery's own: the backend's Lua script counts each header task
once (redelivery-safe) and the task that completes the count claims the body's dispatch
(``SET NX``), so the aggregation runs once, whatever the kills, retries and takeovers.
Since the size is written before the last task goes out, at least one task ends after it
is known, and that one fires the body.

Header tasks go out with ``ignore_result``: nothing reads their results (the aggregation
reads the envelopes from the job store, and the chord collects results in its own keys
whatever this option says, ``Backend.mark_as_done``), so the producer does not SUBSCRIBE
to each task's result channel nor the worker write a result key per task.

Another result backend (the embedded mode's in-memory cache) joins a chord by polling
every header result (``chord_unlock``), which needs them all: there the header goes
through ``celery.chord`` as before.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from celery import Celery, chord
from celery.backends.redis import RedisBackend
from celery.canvas import Signature

log = logging.getLogger(__name__)


def send_chord(
    app: Celery,
    header: Iterable[Signature],
    body: Signature,
    group_id: str,
    on_sent: Callable[[int], None],
) -> None:
    """Publish the chord of ``header`` (read once, one signature held at a time) and
    ``body``, with group id ``group_id``; ``on_sent(count)`` after each message. With no
    header task, the body is sent with no results."""
    if not isinstance(app.backend, RedisBackend):  # it joins a chord by polling every result
        whole = list(header)
        if whole:
            # A lazy header: Celery's Redis backend then keeps only weak references to the
            # header's results (celery#4824).
            chord((sig for sig in whole), app=app)(body)
        else:
            body.clone(args=([],)).apply_async()
        return
    body = body.clone()
    body.freeze(body.options["task_id"], group_id=group_id)
    sent = 0
    tasks = iter(header)
    task = next(tasks, None)
    with app.producer_or_acquire() as producer:
        while task is not None:
            following = next(tasks, None)  # one read ahead: the last task is known as such
            if following is None:
                app.backend.set_chord_size(group_id, sent + 1)
                log.debug("swarm chord %s: %d header tasks", group_id, sent + 1)
            task.apply_async(
                producer=producer,
                add_to_parent=False,
                chord=body,
                group_id=group_id,
                group_index=sent,
                ignore_result=True,
            )
            sent += 1
            task = following
            on_sent(sent)
    if not sent:
        body.clone(args=([],)).apply_async()
