"""The cut-off proxy of the fault tests (proxy.py) really cuts: connections made before the
cut are dropped and none gets through until the heal (the first client after a cut used to
get through and stay connected for the whole fault)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import proxy
import pytest

pytestmark = pytest.mark.integration


@pytest.fixture
def echo() -> Iterator[tuple[str, int]]:
    """A TCP echo server on a free port."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                threading.Thread(target=echo_back, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[:2]
    server.close()


def echo_back(conn: socket.socket) -> None:
    with conn, contextlib.suppress(OSError):
        while data := conn.recv(1024):
            conn.sendall(data)


def round_trip(port: int) -> bool:
    """True when a new connection through the proxy echoes."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as conn:
            conn.sendall(b"ping")
            return conn.recv(4) == b"ping"
    except OSError:
        return False


def test_a_cut_drops_every_connection_and_refuses_new_ones_until_healed(
    echo: tuple[str, int],
) -> None:
    cut = proxy.CutProxy(echo)
    try:
        before = socket.create_connection(("127.0.0.1", cut.port), timeout=2)
        before.sendall(b"ping")
        assert before.recv(4) == b"ping"
        for _ in range(2):
            cut.cut()
            assert before.recv(4) == b""  # dropped
            assert [round_trip(cut.port) for _ in range(3)] == [False, False, False]
            cut.heal()
            assert round_trip(cut.port)
        before.close()
    finally:
        cut.close()
