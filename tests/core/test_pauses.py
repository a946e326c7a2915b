"""The event loop's lag and the cycle collector's pauses, as metrics."""

from __future__ import annotations

import asyncio
import gc
import logging
import time

import prometheus_client
import pytest

from clusterhealth_core import clock as clocks
from clusterhealth_core import pauses


def _count(registry: prometheus_client.CollectorRegistry, name: str,
           labels: dict[str, str] | None = None, le: str | None = None) -> float:
    if le is None:
        return registry.get_sample_value(f"{name}_count", labels or {}) or 0.0
    return registry.get_sample_value(f"{name}_bucket", {**(labels or {}), "le": le}) or 0.0


async def test_a_held_loop_shows_as_lag(caplog: pytest.LogCaptureFixture) -> None:
    registry = prometheus_client.CollectorRegistry()
    async with pauses.measured(registry, clocks.Clock(), period=0.01):
        await asyncio.sleep(0.1)
        assert _count(registry, "clusterhealth_event_loop_lag_seconds") >= 2
        with caplog.at_level(logging.WARNING, logger=pauses.__name__):
            asyncio.get_running_loop().call_soon(time.sleep, 1.1)  # a long callback
            await asyncio.sleep(1.2)
    total = _count(registry, "clusterhealth_event_loop_lag_seconds")
    long = total - _count(registry, "clusterhealth_event_loop_lag_seconds", le="1.0")
    assert long >= 1
    assert "held for 1." in caplog.text


async def test_collections_are_timed_by_generation() -> None:
    registry = prometheus_client.CollectorRegistry()
    labels = {"generation": "2"}
    async with pauses.measured(registry, clocks.Clock()):
        before = _count(registry, "clusterhealth_gc_pause_seconds", labels)
        gc.collect(2)
        gc.collect(2)
        after = _count(registry, "clusterhealth_gc_pause_seconds", labels)
    assert after - before == 2
    gc.collect(2)
    assert _count(registry, "clusterhealth_gc_pause_seconds", labels) == after, \
        "still counted after the block"


async def test_nothing_is_left_behind() -> None:
    callbacks = list(gc.callbacks)
    tasks = asyncio.all_tasks()
    async with pauses.measured(prometheus_client.CollectorRegistry(), clocks.Clock()):
        assert len(gc.callbacks) == len(callbacks) + 1
    assert gc.callbacks == callbacks
    assert asyncio.all_tasks() == tasks


def test_a_timer_times_start_to_stop() -> None:
    registry = prometheus_client.CollectorRegistry()
    ticks = iter([10.0, 10.25])
    timer = pauses.GCTimer(pauses.PauseMetrics(registry), timer=lambda: next(ticks))
    timer("start", {"generation": 1})
    timer("stop", {"generation": 1, "collected": 0, "uncollectable": 0})
    timer("stop", {"generation": 1, "collected": 0, "uncollectable": 0})  # no start: ignored
    assert registry.get_sample_value("clusterhealth_gc_pause_seconds_sum",
                                     {"generation": "1"}) == 0.25
    assert _count(registry, "clusterhealth_gc_pause_seconds", {"generation": "1"}) == 1
