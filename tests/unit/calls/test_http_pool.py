"""swarm.calls.http_pool: each thread keeps one of a few shared pools."""

from __future__ import annotations

import threading
from typing import ClassVar

import httpx2

from swarm.calls.gateway import make_client
from swarm.calls.http_pool import SHARDS, ThreadPools
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


def test_a_thread_keeps_its_pool_and_threads_take_the_pools_in_turn() -> None:
    pools = ThreadPools(Pool, shards=2, size=8)
    first, second, third = in_thread(pools, 3), in_thread(pools, 2), in_thread(pools)
    assert len(set(first)) == 1 and len(set(second)) == 1 and first[0] != second[0]
    assert third == first[:1]  # the third thread shares the first one's pool (warm connections)
    assert [p.size for p in Pool.made] == [4, 4] and pools.pools() == 2


def test_pools_are_made_only_when_a_thread_needs_one() -> None:
    pools = ThreadPools(Pool, shards=8, size=64)
    send(pools)
    assert pools.pools() == 1 and [p.size for p in Pool.made] == [8]


def test_close_closes_every_pool() -> None:
    pools = ThreadPools(Pool, shards=2, size=8)
    send(pools)
    in_thread(pools)
    pools.close()
    assert len(Pool.made) == 2 and all(p.closed for p in Pool.made)


def test_a_worker_client_sends_through_pools_of_its_size() -> None:
    settings = load_settings(base_url="http://gw.test/v1", http_pool_size=64)
    client = make_client(settings, settings.base_url, "k")
    transport = client._client._transport  # the SDK's httpx client (no public accessor)
    assert isinstance(transport, ThreadPools)
    assert (len(transport._pools), transport._size) == (SHARDS, 64 // SHARDS)
    client.close()
