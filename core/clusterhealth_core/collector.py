"""Full collections of the cycle collector on a timer, not on bursts of work.

CPython's cycle collector runs a full collection (its oldest generation) once
enough objects have survived the young collections since the last one.  A
controller's caches put every cached object in that generation, so a full
collection walks all of them with the event loop stopped: in the controller
manager during the 1,000-binding failover, 0.03 to 0.33 s (median 0.20 s), about
every 20 s (docs/decisions/0012-full-collections-on-a-timer.md).  What makes
objects survive is work: a taint's 1,000 due evictions, the watch events they
cause.  So the pause fell on the failover itself, and the first eviction came
up to 0.4 s after it was due.

Here the automatic full collection is switched off and one runs every
:data:`INTERVAL` seconds instead, whatever the load; the young generations are
collected as before.  Cycles that outlive two young collections wait at most
that long to be freed (Go's runtime likewise forces a collection every two
minutes).  Reference counting frees everything else at once, as always.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator, Callable

from clusterhealth_core import clock as clocks

log = logging.getLogger(__name__)

INTERVAL = 120.0
"""Seconds between two full collections."""
NOTED = 0.1
"""A timed full collection this long or longer is logged at INFO (shorter ones at DEBUG),
so that a late write in the log can be matched with it."""
NEVER = 2**31 - 1
"""A threshold for the oldest generation that its counter does not reach (one count per
collection of the middle generation)."""

Thresholds = tuple[int, int, int]


def switch_off_automatic() -> Thresholds:
    """Stop allocations from triggering full collections; return the thresholds replaced."""
    before = gc.get_threshold()
    gc.set_threshold(before[0], before[1], NEVER)
    return before


async def collect_every(interval: float, clock: clocks.Clock,
                        collect: Callable[[int], int] = gc.collect) -> None:
    """Run a full collection every ``interval`` seconds until cancelled."""
    while True:
        await clock.sleep(interval)
        started = clock.monotonic()
        freed = collect(2)
        took = clock.monotonic() - started
        log.log(logging.INFO if took >= NOTED else logging.DEBUG,
                "full collection: %d unreachable objects, the event loop held %.3f s",
                freed, took)


@contextlib.asynccontextmanager
async def on_a_timer(interval: float = INTERVAL, clock: clocks.Clock | None = None,
                     collect: Callable[[int], int] = gc.collect) -> AsyncIterator[None]:
    """Full collections every ``interval`` seconds while the block runs; as before after it."""
    before = switch_off_automatic()
    task = asyncio.create_task(collect_every(interval, clock or clocks.Clock(), collect),
                               name="full-collections")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        gc.set_threshold(*before)
