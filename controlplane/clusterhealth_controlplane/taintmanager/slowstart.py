"""Evictions written one at a time at first, more at once as they succeed (slow start).

When a Cluster's NoExecute taint falls due, every binding on it is due at the
same instant: 1,000 in the fleet benchmark.  Written ``--eviction-workers`` at
once from the first moment, the first write shares the API server (and this
process) with the others, and the first binding left the dead member 35 to 90 ms
after it was due; written alone, 10 ms (issue 22, docs/failover.md).  And a
server that refuses the writes (a webhook, a quota, a broken schema) is asked
once, not ``--eviction-workers`` times.

So the writes start one at a time and every success allows one more at once, up
to ``--eviction-workers``: the limit doubles with every round of writes (TCP's
slow start; Kubernetes' ReplicaSet controller creates Pods in batches of 1, 2,
4, ... for the same reason).  A failed write takes the limit back to one; a
conflict or a binding already gone counts neither way.  After :data:`IDLE`
seconds without an eviction the next burst starts at one again.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import math
from collections.abc import AsyncIterator

from clusterhealth_core import clock as clocks

log = logging.getLogger(__name__)

IDLE = 5.0
"""Seconds without an eviction in flight after which the limit is one again."""


class SlowStart:
    """At most :attr:`limit` evictions at once: one at first, one more per success."""

    def __init__(self, most: int, clock: clocks.Clock, idle: float = IDLE) -> None:
        if most < 1:
            raise ValueError(f"at most {most} at once: give 1 or more")
        self.most = most
        self.clock = clock
        self.idle = idle
        self.limit = 1
        self.in_flight = 0
        self._last_end = -math.inf
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    @contextlib.asynccontextmanager
    async def slot(self, neutral: tuple[type[BaseException], ...] = ()
                   ) -> AsyncIterator[None]:
        """Hold one of the :attr:`limit` places while the block writes.

        The block's end decides: returned, a success; raised one of ``neutral``
        (or cancelled), neither; raised anything else, a failure.
        """
        await self._acquire()
        succeeded: bool | None = None
        try:
            yield
            succeeded = True
        except neutral:
            raise
        except Exception:
            succeeded = False
            raise
        finally:
            self._release(succeeded)

    async def _acquire(self) -> None:
        if self.in_flight == 0 and self.clock.monotonic() - self._last_end >= self.idle:
            self.limit = 1
        while self.in_flight >= self.limit:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake()  # woken, then cancelled: the place goes to the next
                raise
            finally:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
        self.in_flight += 1

    def _release(self, succeeded: bool | None) -> None:
        self.in_flight -= 1
        self._last_end = self.clock.monotonic()
        if succeeded:
            self.limit = min(self.most, self.limit + 1)
        elif succeeded is False and self.limit > 1:
            log.info("an eviction write failed: writing one at a time until one succeeds")
            self.limit = 1
        self._wake()

    def _wake(self) -> None:
        free = self.limit - self.in_flight
        while free > 0 and self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                free -= 1
