"""swarm.calls.http_pool: a connection pool per calling thread, bounded."""

from __future__ import annotations

import threading
from typing import ClassVar

import httpx2

from swarm.calls.gateway import make_client
from swarm.calls.http_pool import PER_THREAD, ThreadPools
from swarm.settings import load_settings


class Pool(httpx2.MockTransport):
    """A pool that answers 200 and says which pool it is."""

    made: ClassVar[list[Pool]] = []

    def __init__(self, size: int) -> None:
        super().__init__(lambda request: httpx2.Response(200, text=str(id(self))))
        self.size, self.closed = size, False
        Pool.made.append(self)

    def close(self) -> None:
        self.closed = True


def send(pools: ThreadPools) -> str:
    return pools.handle_request(httpx2.Request("GET", "http://gw.test/")).read().decode()


def in_thread(pools: ThreadPools, times: int = 1) -> list[str]:
    seen: list[str] = []
    thread = threading.Thread(target=lambda: seen.extend(send(pools) for _ in range(times)))
    thread.start()
    thread.join()
    return seen


def setup_function() -> None:
    Pool.made = []


def test_each_thread_sends_through_its_own_pool_every_time() -> None:
    pools = ThreadPools(Pool, max_pools=4, shared=8)
    first, second = in_thread(pools, 3), [send(pools), send(pools)]
    assert len(set(first)) == 1 and len(set(second)) == 1 and first[0] != second[0]
    assert [p.size for p in Pool.made] == [PER_THREAD, PER_THREAD]


def test_threads_past_the_bound_share_one_pool() -> None:
    pools = ThreadPools(Pool, max_pools=1, shared=8)
    barrier, seen = threading.Barrier(3), []

    def call() -> None:
        seen.append(send(pools))
        barrier.wait()  # all alive at once: no pool is freed by a thread's end

    threads = [threading.Thread(target=call) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(seen)) == 2  # one thread's own pool, one shared by the other two
    assert sorted(p.size for p in Pool.made) == [PER_THREAD, 8] and pools.pools() == 1


def test_the_pool_of_an_ended_thread_is_closed_when_another_thread_asks() -> None:
    pools = ThreadPools(Pool, max_pools=1, shared=8)
    in_thread(pools)
    ended = Pool.made[0]
    assert not ended.closed
    in_thread(pools)  # takes the freed place: a pool of its own, not the shared one
    assert ended.closed and [p.size for p in Pool.made] == [PER_THREAD, PER_THREAD]


def test_close_closes_every_pool() -> None:
    pools = ThreadPools(Pool, max_pools=1, shared=8)
    send(pools)
    in_thread(pools)  # the main thread still lives: this one shares
    pools.close()
    assert len(Pool.made) == 2 and all(p.closed for p in Pool.made)


def test_a_worker_client_sends_through_thread_pools_of_its_size() -> None:
    settings = load_settings(base_url="http://gw.test/v1", http_pool_size=64)
    client = make_client(settings, settings.base_url, "k")
    transport = client._client._transport  # the SDK's httpx client (no public accessor)
    assert isinstance(transport, ThreadPools)
    assert (transport._max_pools, transport._shared_size) == (64 // 2 // PER_THREAD, 32)
    client.close()
