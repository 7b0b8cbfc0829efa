"""swarm.unique: ids without a system call each, unique within a process and across forks."""

from __future__ import annotations

import multiprocessing

from swarm.unique import unique_hex


def _child_id(queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    queue.put(unique_hex())


def test_ids_are_32_hex_digits_and_never_repeat_in_a_process() -> None:
    ids = [unique_hex() for _ in range(10_000)]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)


def test_a_forked_child_numbers_its_ids_after_a_prefix_of_its_own() -> None:
    mine = unique_hex()
    fork = multiprocessing.get_context("fork")
    queue = fork.Queue()
    child = fork.Process(target=_child_id, args=(queue,))
    child.start()
    theirs = queue.get(timeout=30)
    child.join(30)
    assert theirs[:16] != mine[:16]
