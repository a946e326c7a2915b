"""The controller runtime: ``reconcile(key) -> Result``, and everything around it.

The shape is controller-runtime's.  A controller is a function from a key to
a :class:`Result`; this module owns the rest, the same way for every
controller of the project:

* a :class:`~clusterhealth_core.workqueue.WorkQueue` (dedup, one worker per
  key at a time, per-key backoff plus an overall rate limit);
* a pool of workers that never dies: whatever a reconcile raises is logged,
  counted and retried with backoff; only cancellation stops a worker;
* a deadline per reconcile (:attr:`ControllerSettings.timeout`): a reconcile
  still running after it is cancelled, counted (``result="timeout"``),
  logged and retried with backoff, so a call that never returns (a hung
  member, a lock never released) costs one worker that long, not forever;
* :class:`TerminalError` for input that retrying cannot fix (a wrong spec):
  the controller's ``on_terminal`` hook reports it (a False condition and a
  Warning Event), and the key waits until something adds it again — the
  object changing — instead of being retried;
* ``Result(requeue_after=...)`` for periodic work;
* one metric family for every controller (:class:`ControllerMetrics`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable

import prometheus_client

from clusterhealth_core import clock as clocks
from clusterhealth_core import workqueue
from clusterhealth_core.kube import errors

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Result:
    """What a reconcile asks for next: nothing, or to run again after a while."""

    requeue_after: float | None = None


DONE = Result()


class TerminalError(Exception):
    """The object cannot be reconciled as it is; retrying will not help.

    ``reason`` is a CamelCase word for a condition and an Event
    (``InvalidSpec``, ``RouteConflict``, ``CapacityExceeded``...);
    ``message`` tells the user what to change.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


Reconcile = Callable[[str], Awaitable[Result | None]]
OnTerminal = Callable[[str, TerminalError], Awaitable[None]]

RESULT_SUCCESS = "success"
RESULT_REQUEUE_AFTER = "requeue_after"
RESULT_ERROR = "error"
RESULT_TERMINAL = "terminal"
RESULT_TIMEOUT = "timeout"
RESULTS = (RESULT_SUCCESS, RESULT_REQUEUE_AFTER, RESULT_ERROR, RESULT_TERMINAL, RESULT_TIMEOUT)
DEFAULT_RECONCILE_TIMEOUT = 120.0
"""Seconds a reconcile may run by default: four times a member request's deadline (30 s).
controller-runtime has none by default (``ReconciliationTimeout``, 0)."""


class ControllerMetrics:
    """Reconciles of every controller of a process, plus their queues."""

    def __init__(self, registry: prometheus_client.CollectorRegistry) -> None:
        self.reconciles = prometheus_client.Counter(
            "clusterhealth_controller_reconcile",
            "Reconciles by controller and result (success, requeue_after, error, terminal, "
            "timeout).",
            ["controller", "result"], registry=registry)
        self.duration = prometheus_client.Histogram(
            "clusterhealth_controller_reconcile_duration_seconds",
            "Time one reconcile took, by controller.", ["controller"], registry=registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
        self.workers = prometheus_client.Gauge(
            "clusterhealth_controller_active_workers",
            "Workers busy with a reconcile, by controller.", ["controller"], registry=registry)
        self.queue = workqueue.QueueMetrics(registry)

    def prime(self, controller: str) -> None:
        """Create every series of ``controller`` at zero (dashboards see them from the start)."""
        for result in RESULTS:
            self.reconciles.labels(controller, result)
        self.workers.labels(controller).set(0)
        self.queue.depth.labels(controller).set(0)
        self.queue.adds.labels(controller)
        self.queue.retries.labels(controller)


@dataclasses.dataclass(frozen=True)
class ControllerSettings:
    """Concurrency and retry policy of one controller."""

    workers: int = 2
    rate_limit: workqueue.RateLimit = dataclasses.field(default_factory=workqueue.RateLimit)
    timeout: float | None = DEFAULT_RECONCILE_TIMEOUT
    """Seconds one reconcile may run before it is cancelled and retried (None: no limit)."""

    def __post_init__(self) -> None:
        if self.timeout is not None and self.timeout <= 0:
            raise ValueError(f"reconcile timeout must be > 0, not {self.timeout}")


class Controller:
    """A named queue of keys and the workers that reconcile them."""

    def __init__(
        self,
        name: str,
        reconcile: Reconcile,
        *,
        metrics: ControllerMetrics,
        clock: clocks.Clock,
        settings: ControllerSettings = ControllerSettings(),
        on_terminal: OnTerminal | None = None,
    ) -> None:
        self.name = name
        self._reconcile = reconcile
        self.metrics = metrics
        self.clock = clock
        self.settings = settings
        self._on_terminal = on_terminal
        self.queue = workqueue.WorkQueue(settings.rate_limit, name=name,
                                         metrics=metrics.queue, clock=clock)
        metrics.prime(name)
        self._workers = metrics.workers.labels(name)
        self._duration = metrics.duration.labels(name)
        self._results = {result: metrics.reconciles.labels(name, result) for result in RESULTS}
        """This controller's series, looked up once instead of per key."""

    def enqueue(self, key: str) -> None:
        """Reconcile ``key`` soon."""
        self.queue.add(key)

    def enqueue_after(self, key: str, delay: float) -> None:
        """Reconcile ``key`` after ``delay`` seconds (the earliest request wins)."""
        self.queue.add_after(key, delay)

    async def process(self, key: str) -> str:
        """Reconcile ``key`` once, as a worker does; return the result label."""
        started = self.clock.monotonic()
        self._workers.inc()
        deadline = asyncio.timeout(self.settings.timeout)
        try:
            async with deadline:
                result = await self._reconcile(key) or DONE
        except asyncio.CancelledError:
            raise
        except TimeoutError as exc:
            if not deadline.expired():
                return self._failed(key, exc)
            delay = self.queue.add_rate_limited(key)
            log.warning("%s: reconcile of %s did not finish within its %gs deadline: "
                        "cancelled; retry in %.2fs", self.name, key, self.settings.timeout, delay)
            return RESULT_TIMEOUT
        except TerminalError as exc:
            return await self._terminal(key, exc)
        except Exception as exc:  # anything: log, count, retry with backoff
            return self._failed(key, exc)
        finally:
            self._workers.dec()
            self._duration.observe(self.clock.monotonic() - started)
        self.queue.forget(key)
        if result.requeue_after is not None:
            self.queue.add_after(key, result.requeue_after)
            return RESULT_REQUEUE_AFTER
        return RESULT_SUCCESS

    def _failed(self, key: str, exc: Exception) -> str:
        delay = self.queue.add_rate_limited(key)
        if isinstance(exc, errors.KubeError | OSError):
            log.warning("%s: reconcile of %s failed (%s); retry in %.2fs", self.name, key,
                        exc, delay)
        else:
            log.exception("%s: reconcile of %s raised; retry in %.2fs", self.name, key, delay,
                          exc_info=exc)
        return RESULT_ERROR

    async def _terminal(self, key: str, exc: TerminalError) -> str:
        log.info("%s: %s cannot be reconciled as it is: %s", self.name, key, exc)
        if self._on_terminal is not None:
            try:
                await self._on_terminal(key, exc)
            except asyncio.CancelledError:
                raise
            except Exception as report_exc:  # reporting failed: retry the whole key
                delay = self.queue.add_rate_limited(key)
                log.warning("%s: reporting %s on %s failed (%s); retry in %.2fs", self.name,
                            exc.reason, key, report_exc, delay)
                return RESULT_ERROR
        self.queue.forget(key)  # wait for the object to change
        return RESULT_TERMINAL

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            try:
                outcome = await self.process(key)
                self._results[outcome].inc()
            finally:
                self.queue.done(key)
            # A reconcile that decides from caches never suspends, nor does a get() from
            # a queue with keys in it: without this, a worker would run a whole backlog
            # before any other task (another controller's workers, the watches, the
            # answers to requests in flight).  A taint's 500 due bindings then delayed
            # the eviction queue's first write by the time of all 500 decisions.
            await asyncio.sleep(0)

    async def run(self) -> None:
        """Run the workers until cancelled."""
        workers = [asyncio.create_task(self._worker(), name=f"{self.name}-worker-{i}")
                   for i in range(self.settings.workers)]
        try:
            await asyncio.gather(*workers)
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            self.queue.shutdown()
            self.metrics.workers.labels(self.name).set(0)
