"""Full collections run on a timer while a component serves, never on allocations."""

from __future__ import annotations

import asyncio
import gc
import logging
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from clusterhealth_core import clock as clocks
from clusterhealth_core import collector


@pytest.fixture
def full_collections() -> Iterator[list[int]]:
    """One entry per full collection this process starts while the test runs."""
    started: list[int] = []

    def seen(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and info["generation"] == 2:
            started.append(len(started))
    gc.callbacks.append(seen)
    try:
        yield started
    finally:
        gc.callbacks.remove(seen)


def _survivors(count: int) -> list[dict[str, list[int]]]:
    """Containers that outlive the young collections, as a cache's objects do."""
    return [{"items": [i]} for i in range(count)]


async def test_allocations_trigger_no_full_collection(full_collections: list[int]) -> None:
    before = gc.get_threshold()
    async with collector.on_a_timer(interval=3600.0):
        assert gc.get_threshold() == (before[0], before[1], collector.NEVER)
        kept = _survivors(400_000)  # enough for several automatic full collections
        assert full_collections == []
    assert gc.get_threshold() == before
    assert len(kept) == 400_000


async def test_without_it_the_same_allocations_do(full_collections: list[int]) -> None:
    """The check above can fail: the default thresholds collect fully under this load."""
    gc.collect()
    kept = _survivors(400_000)
    assert full_collections[1:], "no automatic full collection: the test above proves nothing"
    assert len(kept) == 400_000


class _SteppedClock(clocks.Clock):
    """A clock whose sleeps end when the test says so."""

    def __init__(self) -> None:
        self.slept: list[float] = []
        self.ticks: asyncio.Queue[None] = asyncio.Queue()

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        await self.ticks.get()


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_one_full_collection_per_interval() -> None:
    collected: list[int] = []
    clock = _SteppedClock()

    def collect(generation: int) -> int:
        collected.append(generation)
        return 0
    async with collector.on_a_timer(interval=120.0, clock=clock, collect=collect):
        await _settle()
        assert (clock.slept, collected) == ([120.0], [])
        for _ in range(3):
            clock.ticks.put_nowait(None)
            await _settle()
        assert (clock.slept, collected) == ([120.0] * 4, [2, 2, 2])
    clock.ticks.put_nowait(None)
    await _settle()
    assert collected == [2, 2, 2]  # stopped with the block


class _Node:
    other: _Node | None = None


async def test_old_cycles_wait_for_the_timed_collection() -> None:
    freed: list[str] = []
    async with collector.on_a_timer(interval=1.0):
        a, b = _Node(), _Node()
        a.other, b.other = b, a
        weakref.finalize(a, freed.append, "a")
        gc.collect(1)  # the cycle survives the young collections: it is old now
        del a, b
        kept = _survivors(200_000)  # young collections run, the old cycle stays
        assert freed == []
        await clocks.Clock().sleep(1.5)
        assert freed == ["a"]
    assert len(kept) == 200_000


class _TimedClock(_SteppedClock):
    """A stepped clock whose monotonic time the collection moves."""

    def __init__(self) -> None:
        super().__init__()
        self.at = 0.0

    def monotonic(self) -> float:
        return self.at


async def test_a_long_collection_is_logged_at_info(caplog: pytest.LogCaptureFixture) -> None:
    clock = _TimedClock()
    takes = iter([0.25, 0.01])

    def collect(generation: int) -> int:
        clock.at += next(takes)
        return 7
    with caplog.at_level(logging.INFO, logger=collector.__name__):
        async with collector.on_a_timer(interval=120.0, clock=clock, collect=collect):
            for _ in range(2):
                clock.ticks.put_nowait(None)
                await _settle()
    assert [r.getMessage() for r in caplog.records] == [
        "full collection: 7 unreachable objects, the event loop held 0.250 s"]
