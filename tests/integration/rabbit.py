"""A private RabbitMQ vhost per test module on the machine's RabbitMQ (127.0.0.1:5672,
guest/guest here and in CI): made with ``rabbitmqctl add_vhost``, deleted after. Where
RabbitMQ is missing, the tests fail under CI=true and are skipped elsewhere."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import uuid
from collections.abc import Iterator

import procs

HOST, PORT = "127.0.0.1", 5672
USER = PASSWORD = "guest"


def ctl(*args: str) -> str:
    """Run ``rabbitmqctl ARGS``; its stdout."""
    done = subprocess.run(
        ["rabbitmqctl", *args], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout


def _problem() -> str | None:
    if shutil.which("rabbitmqctl") is None:
        return "rabbitmqctl is not installed"
    try:
        with socket.create_connection((HOST, PORT), timeout=3):
            return None
    except OSError as exc:
        return f"RabbitMQ is not listening on {HOST}:{PORT}: {exc}"


@contextlib.contextmanager
def vhost() -> Iterator[str]:
    """A new vhost with guest's permissions; its amqp:// URL."""
    problem = _problem()
    if problem:
        procs.unavailable(problem)
    name = f"swarm-test-{uuid.uuid4().hex[:8]}"
    ctl("add_vhost", name)
    try:
        ctl("set_permissions", "-p", name, USER, ".*", ".*", ".*")
        yield f"amqp://{USER}:{PASSWORD}@{HOST}:{PORT}/{name}"
    finally:
        ctl("delete_vhost", name)


def bindings(url: str) -> list[tuple[str, str, str]]:
    """(exchange, queue, routing key) of every queue binding in ``url``'s vhost, the
    default exchange's left out."""
    name = url.rsplit("/", 1)[1]
    out = ctl("list_bindings", "-p", name, "-q", "source_name", "destination_name", "routing_key")
    assert out.startswith("source_name"), out
    rows = [line.split("\t") for line in out.splitlines() if line.strip()]
    return [(r[0], r[1], r[2]) for r in rows[1:] if len(r) == 3 and r[0]]  # after the header
