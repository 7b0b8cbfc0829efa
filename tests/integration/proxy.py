"""A TCP proxy that can cut its clients off: a worker that reaches Redis through it loses
Redis (every connection dropped, new ones refused) while other processes keep theirs."""

from __future__ import annotations

import contextlib
import socket
import threading

import procs


class CutProxy:
    """127.0.0.1:``port`` forwards to ``target``; ``cut()`` and ``heal()``."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = procs.free_port()
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self.heal()

    def heal(self) -> None:
        """Accept connections again."""
        listener = socket.create_server(("127.0.0.1", self.port), reuse_port=False)
        with self._lock:
            self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        """Drop every connection and refuse new ones until ``heal``."""
        with self._lock:
            listener, self._listener = self._listener, None
            conns, self._conns = self._conns, set()
        if listener is not None:
            # close() alone leaves a socket that a thread is blocked accepting on listening
            # (Linux): the first client after the cut got through and stayed connected.
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    def close(self) -> None:
        self.cut()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:  # cut
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                if self._listener is not listener:  # cut while this one was connecting
                    client.close()
                    upstream.close()
                    return
                self._conns.update((client, upstream))
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
