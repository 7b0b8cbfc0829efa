"""Ids unique across processes without a system call each (leases, tokens, request keys).

``uuid.uuid4()`` reads 16 bytes from the kernel (getrandom) on every call, and CPython
releases the GIL around that read: in a worker whose hundred node threads are runnable at
once, each release hands the GIL to another thread and costs a context switch or two to
get it back, several times per call (ops/bench/results/hosted_speed_cpu.md).
Here a process draws 64 random bits once (again in a forked child) and numbers its ids
after them: 32 hex digits, like ``uuid4().hex``, never repeated within the process, and
colliding across processes only if two of them draw the same 64 bits.
"""

from __future__ import annotations

import itertools
import os

_prefix = os.urandom(8).hex()
_counter = itertools.count()


def unique_hex() -> str:
    """A fresh id: the process's random prefix and its next number (32 hex digits)."""
    return f"{_prefix}{next(_counter):016x}"


def _reseed() -> None:
    """A forked child draws its own prefix (it would repeat its parent's ids otherwise)."""
    global _prefix, _counter
    _prefix = os.urandom(8).hex()
    _counter = itertools.count()


os.register_at_fork(after_in_child=_reseed)
