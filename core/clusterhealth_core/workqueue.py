"""A work queue of keys, as controllers use it (after client-go's workqueue).

* A key waiting in the queue is there once, however often it is added.
* A key being processed is not handed to a second worker; if it is added
  meanwhile, it is processed again after :meth:`WorkQueue.done`.
* Failed keys come back after the later of two delays: the key's own
  exponential backoff, and the overall rate limit (a token bucket shared by
  every key), so that a thousand keys failing at once do not hammer the API
  server in lock-step (client-go's ``DefaultControllerRateLimiter``).

Clearing state happens by recomputation: the queue carries names, never
the events that caused them.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses

import prometheus_client

from clusterhealth_core import clock as clocks
from clusterhealth_core import retry

_DEFAULT_BACKOFF = retry.Backoff(initial=0.05, factor=2.0, maximum=300.0, jitter=0.1,
                                 attempts=1_000_000)


@dataclasses.dataclass(frozen=True)
class RateLimit:
    """How failed keys come back: per-key backoff, plus ``qps``/``burst`` over all keys."""

    backoff: retry.Backoff = _DEFAULT_BACKOFF
    qps: float = 10.0
    burst: int = 100

    def __post_init__(self) -> None:
        if self.qps <= 0 or self.burst < 1:
            raise ValueError(f"invalid rate limit {self}")


class TokenBucket:
    """Reserves one token per call; returns how long the caller must wait for it."""

    def __init__(self, qps: float, burst: int, clock: clocks.Clock) -> None:
        self.qps = qps
        self.burst = burst
        self.clock = clock
        self._tokens = float(burst)
        self._at: float | None = None

    def reserve(self) -> float:
        """Take a token (possibly one not yet refilled); the wait until it is there."""
        now = self.clock.monotonic()
        if self._at is not None:
            self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.qps)
        self._at = now
        self._tokens -= 1
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps


class QueueMetrics:
    """client-go's workqueue metrics, by queue name, on an injected registry."""

    def __init__(self, registry: prometheus_client.CollectorRegistry) -> None:
        self.depth = prometheus_client.Gauge(
            "clusterhealth_workqueue_depth", "Keys waiting in the queue.", ["name"],
            registry=registry)
        self.adds = prometheus_client.Counter(
            "clusterhealth_workqueue_adds", "Keys added to the queue.", ["name"],
            registry=registry)
        self.retries = prometheus_client.Counter(
            "clusterhealth_workqueue_retries", "Keys re-added after a failure (rate limited).",
            ["name"], registry=registry)
        self.queue_duration = prometheus_client.Histogram(
            "clusterhealth_workqueue_queue_duration_seconds",
            "Time a key waited in the queue before a worker took it.", ["name"],
            registry=registry,
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60))


class _QueueSeries:
    """One queue's children of :class:`QueueMetrics`."""

    def __init__(self, metrics: QueueMetrics, name: str) -> None:
        self.depth = metrics.depth.labels(name)
        self.adds = metrics.adds.labels(name)
        self.retries = metrics.retries.labels(name)
        self.queue_duration = metrics.queue_duration.labels(name)


class WorkQueue:
    """Deduplicating FIFO of string keys with delayed and rate-limited re-adds."""

    def __init__(self, rate_limit: RateLimit | retry.Backoff = RateLimit(), *,
                 name: str = "", metrics: QueueMetrics | None = None,
                 clock: clocks.Clock | None = None) -> None:
        if isinstance(rate_limit, retry.Backoff):
            rate_limit = RateLimit(backoff=rate_limit, qps=1e9, burst=1_000_000)
        self.name = name
        self.metrics = metrics
        self.clock = clock or clocks.Clock()
        self._queue: collections.deque[str] = collections.deque()
        self._queued: dict[str, float] = {}
        self._processing: set[str] = set()
        self._dirty: set[str] = set()
        self._failures: dict[str, int] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._ready = asyncio.Event()
        self._series = None if metrics is None else _QueueSeries(metrics, name)
        """This queue's series, looked up once (``labels()`` per key costs at 5,000 keys)."""
        self._rate_limit = rate_limit
        self._bucket = TokenBucket(rate_limit.qps, rate_limit.burst, self.clock)

    def __len__(self) -> int:
        return len(self._queue)

    def _depth(self) -> None:
        if self._series is not None:
            self._series.depth.set(len(self._queue))

    def add(self, key: str) -> None:
        """Queue ``key`` (no-op when already waiting)."""
        if key in self._queued or key in self._dirty:
            return
        if self._series is not None:
            self._series.adds.inc()
        if key in self._processing:
            self._dirty.add(key)
            return
        self._queued[key] = self.clock.monotonic()
        self._queue.append(key)
        self._depth()
        self._ready.set()

    def add_after(self, key: str, delay: float) -> None:
        """Queue ``key`` after ``delay`` seconds (the earliest pending timer wins)."""
        if delay <= 0:
            self.add(key)
            return
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
        """Queue ``key`` after its backoff and the overall rate limit; return the delay."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        delay = max(self._rate_limit.backoff.delay(min(failures, 30)), self._bucket.reserve())
        if self._series is not None:
            self._series.retries.inc()
        self.add_after(key, delay)
        return delay

    def failures(self, key: str) -> int:
        """How often ``key`` failed since it was last forgotten."""
        return self._failures.get(key, 0)

    def forget(self, key: str) -> None:
        """Reset ``key``'s backoff (after a success, or when retrying cannot help)."""
        self._failures.pop(key, None)

    async def get(self) -> str:
        """Wait for a key and mark it as being processed."""
        while not self._queue:
            self._ready.clear()
            await self._ready.wait()
        key = self._queue.popleft()
        added = self._queued.pop(key)
        self._processing.add(key)
        if self._series is not None:
            self._depth()
            self._series.queue_duration.observe(self.clock.monotonic() - added)
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
