"""How long the event loop could not run, as metrics: its lag and the collector's pauses.

A component does all its work on one event loop, so whatever holds the loop
(a long callback, a burst of watch events, a full run of the cycle collector)
delays every write queued behind it.  When a write comes late, as the first
eviction of a failover did (issue 22: up to 0.4 s after it was due), the first
question is whether the loop was free; these two series answer it from
``/metrics`` without a profiler:

- ``clusterhealth_event_loop_lag_seconds``: a task asks to wake every
  :data:`PERIOD` seconds and records how much later than asked it woke.
  Whatever held the loop shows here, whatever it was.
- ``clusterhealth_gc_pause_seconds{generation}``: each run of the cycle
  collector, timed from :data:`gc.callbacks` (Go processes export
  ``go_gc_duration_seconds`` for the same reason).  A lag with a pause of the
  same size at the same time was the collector.

A lag of :data:`BLOCKED` seconds or more is also logged as a warning.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import prometheus_client

from clusterhealth_core import clock as clocks

log = logging.getLogger(__name__)

PERIOD = 0.1
"""Seconds between two wake-ups of the lag sampler (ten a second: its cost is not seen)."""
BLOCKED = 1.0
"""A lag this long or longer is logged: every write waited that long."""
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class PauseMetrics:
    """The two histograms; make one per process and registry."""

    def __init__(self, registry: prometheus_client.CollectorRegistry) -> None:
        self.lag = prometheus_client.Histogram(
            "clusterhealth_event_loop_lag_seconds",
            f"How much later than asked a task woke that asks to every {PERIOD} s: "
            "how long the event loop was held", buckets=BUCKETS, registry=registry)
        self.gc = prometheus_client.Histogram(
            "clusterhealth_gc_pause_seconds",
            "Runs of the cycle collector (the event loop stops for each), by generation",
            ["generation"], buckets=BUCKETS, registry=registry)


async def sample_lag(metrics: PauseMetrics, clock: clocks.Clock,
                     period: float = PERIOD) -> None:
    """Record the event loop's lag every ``period`` seconds until cancelled."""
    while True:
        asked = clock.monotonic() + period
        await clock.sleep(period)
        lag = max(0.0, clock.monotonic() - asked)
        metrics.lag.observe(lag)
        if lag >= BLOCKED:
            log.warning("the event loop was held for %.2f s: everything waited that long", lag)


class GCTimer:
    """A :data:`gc.callbacks` entry that observes every collection's duration."""

    def __init__(self, metrics: PauseMetrics,
                 timer: Callable[[], float] = time.perf_counter) -> None:
        self.metrics = metrics
        self.timer = timer
        self._started: float | None = None
        self._by_generation = [metrics.gc.labels(generation=str(g)) for g in range(3)]

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = self.timer()
        elif phase == "stop" and self._started is not None:
            self._by_generation[int(info["generation"])].observe(self.timer() - self._started)
            self._started = None


@contextlib.asynccontextmanager
async def measured(registry: prometheus_client.CollectorRegistry, clock: clocks.Clock,
                   period: float = PERIOD) -> AsyncIterator[PauseMetrics]:
    """Both series in ``registry`` while the block runs; nothing left behind after it."""
    metrics = PauseMetrics(registry)
    timer = GCTimer(metrics)
    gc.callbacks.append(timer)
    task = asyncio.create_task(sample_lag(metrics, clock, period), name="event-loop-lag")
    try:
        yield metrics
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        gc.callbacks.remove(timer)
