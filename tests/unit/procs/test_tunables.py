"""GLIBC_TUNABLES for workers: tcache_count=0 added, the operator's own tunables kept and
winning; glibc applies what a child is started with."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from swarm.procs.tunables import TCACHE_OFF, merge, pairs, with_tcache_off


def test_pairs_are_read_by_name_in_order() -> None:
    assert pairs(None) == pairs("") == pairs("::") == {}
    assert pairs("a.b=1: c.d=2 ") == {"a.b": "a.b=1", "c.d": "c.d=2"}
    assert pairs("a.b=1:a.b=2") == {"a.b": "a.b=2"}  # glibc: the last one wins


def test_the_operators_tunables_win_one_by_one() -> None:
    assert merge(TCACHE_OFF, None) == merge(TCACHE_OFF, "") == "glibc.malloc.tcache_count=0"
    assert merge(TCACHE_OFF, "glibc.pthread.rseq=0") == (
        "glibc.malloc.tcache_count=0:glibc.pthread.rseq=0"
    )
    assert merge(TCACHE_OFF, "glibc.malloc.tcache_count=7") == "glibc.malloc.tcache_count=7"


def test_with_tcache_off_keeps_the_rest_of_the_environment() -> None:
    env = with_tcache_off({"A": "1", "GLIBC_TUNABLES": "glibc.malloc.arena_max=2"})
    assert env == {
        "A": "1",
        "GLIBC_TUNABLES": "glibc.malloc.tcache_count=0:glibc.malloc.arena_max=2",
    }
    assert with_tcache_off({})["GLIBC_TUNABLES"] == TCACHE_OFF


FREED = """
import ctypes
class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()
    )]
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
chunks = [libc.malloc(200) for _ in range(20)]
before = libc.mallinfo2().uordblks
for chunk in chunks:
    libc.free(chunk)
print(before - libc.mallinfo2().uordblks)
"""
"""Frees 20 chunks of 200 bytes; prints how many bytes mallinfo2 stopped counting in use
(chunks kept in a thread's tcache still count in use)."""


def _freed(env: dict[str, str]) -> int:
    done = subprocess.run([sys.executable, "-c", FREED], env=env, capture_output=True,
                          text=True, check=True)  # fmt: skip
    return int(done.stdout)


@pytest.mark.glibc
def test_a_child_started_with_the_tunables_keeps_no_freed_chunk_per_thread() -> None:
    environ = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    assert _freed(environ) < 20 * 200  # glibc's defaults: the thread's cache keeps some
    merged = with_tcache_off({**environ, "GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=262144"})
    assert _freed(merged) >= 20 * 200  # every chunk went back to the heap
