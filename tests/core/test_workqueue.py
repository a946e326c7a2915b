"""The work queue's guarantees: dedup, no concurrent processing of a key, backoff."""

from __future__ import annotations

import asyncio

import pytest

from clusterhealth_core import retry, workqueue

# Fake time (looptime): the queue's delays are on the loop's clock, so the waits for them
# (and for "nothing happens") pass at once, exactly.
# each on a loop of its own: the session's loop runs other tests' background tasks, and fake
# time moves only when its loop is idle
pytestmark = [pytest.mark.looptime, pytest.mark.asyncio(loop_scope="function")]


async def test_a_waiting_key_is_queued_once() -> None:
    queue = workqueue.WorkQueue()
    for key in ("a", "b", "a", "a"):
        queue.add(key)
    assert len(queue) == 2
    assert [await queue.get(), await queue.get()] == ["a", "b"]


async def test_key_added_while_processing_comes_back_after_done() -> None:
    queue = workqueue.WorkQueue()
    queue.add("a")
    key = await queue.get()
    queue.add("a")  # e.g. an event arrived during the reconcile
    assert len(queue) == 0  # not handed to a second worker
    queue.done(key)
    assert await asyncio.wait_for(queue.get(), 1) == "a"


async def test_get_waits_for_add() -> None:
    queue = workqueue.WorkQueue()
    waiter = asyncio.create_task(queue.get())
    await asyncio.sleep(0.01)
    assert not waiter.done()
    queue.add("x")
    assert await asyncio.wait_for(waiter, 1) == "x"


async def test_rate_limited_backoff_grows_and_forget_resets() -> None:
    queue = workqueue.WorkQueue(retry.Backoff(initial=0.01, factor=2, maximum=1, jitter=0,
                                              attempts=100))
    delays = [queue.add_rate_limited("k") for _ in range(3)]
    assert delays == [0.01, 0.02, 0.04]
    queue.forget("k")
    assert queue.add_rate_limited("k") == 0.01
    assert await asyncio.wait_for(queue.get(), 1) == "k"
    queue.shutdown()


async def test_add_after_keeps_the_earliest() -> None:
    queue = workqueue.WorkQueue()
    loop = asyncio.get_running_loop()
    start = loop.time()
    queue.add_after("k", 0.05)
    queue.add_after("k", 5)
    assert await asyncio.wait_for(queue.get(), 1) == "k"
    assert loop.time() - start < 1
