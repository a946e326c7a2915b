"""A work queue of keys, as controllers use it (after client-go's workqueue).

* A key waiting in the queue is there once, however often it is added.
* A key being processed is not handed to a second worker; if it is added
  meanwhile, it is processed again after :meth:`WorkQueue.done`.
* Failed keys come back after a per-key exponential backoff.

Clearing state happens by recomputation: the queue carries names, never
the events that caused them.
"""

from __future__ import annotations

import asyncio
import collections

from clusterhealth_core import retry

_DEFAULT_BACKOFF = retry.Backoff(initial=0.05, factor=2.0, maximum=30.0, jitter=0.1,
                                 attempts=1_000_000)


class WorkQueue:
    """Deduplicating FIFO of string keys with delayed and rate-limited re-adds."""

    def __init__(self, backoff: retry.Backoff = _DEFAULT_BACKOFF) -> None:
        self._queue: collections.deque[str] = collections.deque()
        self._queued: set[str] = set()
        self._processing: set[str] = set()
        self._dirty: set[str] = set()
        self._failures: dict[str, int] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._ready = asyncio.Event()
        self._backoff = backoff

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, key: str) -> None:
        """Queue ``key`` (no-op when already waiting)."""
        if key in self._processing:
            self._dirty.add(key)
            return
        if key in self._queued:
            return
        self._queued.add(key)
        self._queue.append(key)
        self._ready.set()

    def add_after(self, key: str, delay: float) -> None:
        """Queue ``key`` after ``delay`` seconds (the earliest pending timer wins)."""
        loop = asyncio.get_running_loop()
        existing = self._timers.get(key)
        when = loop.time() + delay
        if existing is not None:
            if existing.when() <= when:
                return
            existing.cancel()
        self._timers[key] = loop.call_at(when, self._fire, key)

    def _fire(self, key: str) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def add_rate_limited(self, key: str) -> float:
        """Queue ``key`` after its backoff (which grows with each failure); return the delay."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        delay = self._backoff.delay(min(failures, 30))
        self.add_after(key, delay)
        return delay

    def forget(self, key: str) -> None:
        """Reset ``key``'s backoff (after a success)."""
        self._failures.pop(key, None)

    async def get(self) -> str:
        """Wait for a key and mark it as being processed."""
        while not self._queue:
            self._ready.clear()
            await self._ready.wait()
        key = self._queue.popleft()
        self._queued.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: str) -> None:
        """Mark ``key`` processed; re-queue it if it was added meanwhile."""
        self._processing.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)

    def shutdown(self) -> None:
        """Cancel pending timers."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
