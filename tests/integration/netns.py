"""A network namespace joined to this one by a veth pair, for partition tests (root only).

    host side  <HOST>/30 on veth ``sw<id>h``      namespace side  <NS>/30 on ``sw<id>n``

The /30 is picked in 10.213.0.0/16 among the ones no interface of this machine uses; it
exists only between the two namespaces (nothing is routed). ``cut()`` sets the host side
down (packets stop both ways, connections hang as in a real partition), ``heal()`` sets it
up again. ``close()`` deletes the namespace, which deletes the pair.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import uuid

import procs

PREFIX = "10.213"


def _ip(*args: str) -> str:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


def problem() -> str | None:
    """Why namespaces cannot be made here, or None (tries ``ip netns add`` and ``del``)."""
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is not installed"
    probe = f"swarm-probe-{uuid.uuid4().hex[:6]}"
    try:
        _ip("netns", "add", probe)
        _ip("netns", "del", probe)
    except (RuntimeError, OSError) as exc:
        return f"ip netns does not work here: {exc}"
    return None


class Partition:
    """The namespace, the pair and its addresses."""

    def __init__(self) -> None:
        tag = uuid.uuid4().hex[:6]
        self.ns = f"swarm-{tag}"
        self.host_if, self.ns_if = f"sw{tag}h", f"sw{tag}n"
        self.host_ip, self.ns_ip = self._free_pair()
        _ip("netns", "add", self.ns)
        try:
            _ip("link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
            _ip("link", "set", self.ns_if, "netns", self.ns)
            _ip("addr", "add", f"{self.host_ip}/30", "dev", self.host_if)
            _ip("link", "set", self.host_if, "up")
            self.run("ip", "addr", "add", f"{self.ns_ip}/30", "dev", self.ns_if)
            self.run("ip", "link", "set", self.ns_if, "up")
            self.run("ip", "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _free_pair() -> tuple[str, str]:
        used = _ip("-4", "-o", "addr", "show")
        for _ in range(100):
            third, block = random.randrange(256), random.randrange(0, 256, 4)
            net = f"{PREFIX}.{third}."
            if f" {net}" not in used:
                return f"{net}{block + 1}", f"{net}{block + 2}"
        raise RuntimeError(f"no free /30 in {PREFIX}.0.0/16")

    @property
    def prefix(self) -> list[str]:
        """The command prefix that runs a process inside the namespace."""
        return ["ip", "netns", "exec", self.ns]

    def run(self, *argv: str) -> str:
        """Run ``argv`` in the namespace; its stdout."""
        return _ip("netns", "exec", self.ns, *argv)

    def cut(self) -> None:
        _ip("link", "set", self.host_if, "down")

    def heal(self) -> None:
        _ip("link", "set", self.host_if, "up")

    def close(self) -> None:
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True, timeout=30)
        subprocess.run(["ip", "link", "del", self.host_if], capture_output=True, timeout=30)


def partition() -> Partition:
    """A new partition; fails under CI=true (skips elsewhere) when namespaces cannot be made."""
    reason = problem()
    if reason:
        procs.unavailable(reason)
    return Partition()
