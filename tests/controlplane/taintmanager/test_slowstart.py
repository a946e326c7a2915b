"""The eviction writes' slow start: one at first, one more per success, one again after a
failure or a quiet spell."""

from __future__ import annotations

import asyncio

import pytest

from clusterhealth_controlplane.taintmanager import slowstart
from clusterhealth_core import clock as clocks

pytestmark = [pytest.mark.looptime,
              pytest.mark.asyncio(loop_scope="function")]  # fake time: a loop of its own


class Refused(Exception):
    """The server refused the write."""


class Conflict(Exception):
    """The binding changed meanwhile."""


async def _burst(gate: slowstart.SlowStart, count: int, write: float = 1.0,
                 fail: frozenset[int] = frozenset(), conflict: frozenset[int] = frozenset()
                 ) -> list[int]:
    """``count`` writes of ``write`` seconds each, all asked at once; how many ran at once
    at each start, in order."""
    seen: list[int] = []

    async def one(index: int) -> None:
        async with gate.slot(neutral=(Conflict,)):
            seen.append(gate.in_flight)
            await asyncio.sleep(write)
            if index in fail:
                raise Refused
            if index in conflict:
                raise Conflict
    await asyncio.gather(*(one(i) for i in range(count)), return_exceptions=True)
    return seen


async def test_the_limit_grows_by_one_per_success_to_the_most() -> None:
    gate = slowstart.SlowStart(8, clocks.Clock())
    start = asyncio.get_running_loop().time()
    seen = await _burst(gate, 40)
    # a round of writes each second: 1, then 2, 4, 8 at once, never more than 8
    assert seen[:7] == [1, 1, 2, 1, 2, 3, 4]
    assert max(seen) == 8 and gate.limit == 8
    assert asyncio.get_running_loop().time() - start == pytest.approx(8.0)  # 1+2+4+8+8+8+8+1


async def test_a_failure_takes_it_back_to_one() -> None:
    gate = slowstart.SlowStart(8, clocks.Clock())
    await _burst(gate, 16)
    assert gate.limit == 8
    seen = await _burst(gate, 12, fail=frozenset(range(12)))  # the server refuses all
    assert seen == [1, 2, 3, 4, 5, 6, 7, 8, 1, 1, 1, 1]  # 8 asked at once, then one by one
    assert gate.limit == 1


async def test_conflicts_count_neither_way() -> None:
    gate = slowstart.SlowStart(8, clocks.Clock())
    await _burst(gate, 3)
    assert gate.limit == 4
    await _burst(gate, 4, conflict=frozenset(range(4)))
    assert gate.limit == 4


async def test_a_quiet_spell_starts_the_next_burst_at_one() -> None:
    gate = slowstart.SlowStart(8, clocks.Clock(), idle=5.0)
    await _burst(gate, 16)
    await asyncio.sleep(4.0)
    assert (await _burst(gate, 8))[:2] == [1, 2]  # within the spell: 8 at once at once
    await asyncio.sleep(5.0)
    assert (await _burst(gate, 8))[:3] == [1, 1, 2]


async def test_a_cancelled_waiter_gives_its_place_on() -> None:
    gate = slowstart.SlowStart(1, clocks.Clock())
    order: list[str] = []

    async def one(name: str) -> None:
        async with gate.slot():
            order.append(name)
            await asyncio.sleep(1.0)
    first = asyncio.create_task(one("first"))
    second = asyncio.create_task(one("second"))
    third = asyncio.create_task(one("third"))
    await asyncio.sleep(0.5)
    second.cancel()
    await asyncio.gather(first, third, return_exceptions=True)
    assert order == ["first", "third"] and gate.in_flight == 0


async def test_at_least_one_at_once() -> None:
    with pytest.raises(ValueError, match="give 1 or more"):
        slowstart.SlowStart(0, clocks.Clock())
