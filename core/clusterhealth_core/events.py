"""Kubernetes Events, so ``kubectl describe`` shows what a controller did and why.

Events are best effort and must never slow down or break the work they
describe, so recording is split in two, as in client-go's broadcaster::

    recorder = events.EventRecorder(api, "clusterhealth-remedy", clock,
                                    namespace=settings.event_namespace,
                                    instance=election_config.identity,
                                    metrics=events.EventMetrics(registry))
    task = asyncio.create_task(recorder.run())       # writes, until cancelled
    recorder.record(cluster, "Warning", "RemedyActionAdded", "TrafficControl added by ...")

- :meth:`EventRecorder.record` is a plain method: it stamps the time, queues
  and returns.  It never blocks, never awaits and never raises.
- :meth:`EventRecorder.run` writes the queued Events one at a time (so a
  burst of Events never competes with the controller's own writes).
  Cancelling it is the way to stop it: the Event being written may or may
  not reach the server; queued ones wait for a new ``run()`` (or are
  dropped with the recorder).
  :meth:`EventRecorder.flush` waits until the queue is written (tests,
  orderly shutdown).
- **Bounded**: at most ``max_pending`` Events wait; past that, new ones are
  dropped and counted (``clusterhealth_events_dropped_total{reason="backlog"}``).
- **Write rate**: all objects together, at most ``write_rate.qps`` Event
  writes a second, ``write_rate.burst`` at once (:class:`WriteRate`, 10/s
  and 50 by default).  A change that touches 5,000 Clusters at once records
  the first Events at once and the rest as the rate allows (past the backlog
  bound they are dropped and counted): the Events never take the API
  server's time from the status writes they describe (measured:
  ``docs/decisions/0005-remedy-controller-at-scale.md``).
- **Held while the component is busy** (:meth:`EventRecorder.hold_while`,
  optional): while a predicate says the component's own writes are queued
  (a mass change), no Event is written, for at most a given time; then the
  write rate applies again.  The Events of a change are written after its
  status writes instead of among them (one more request each, taken from
  the writes: ``docs/decisions/0009-remedy-events-after-writes.md``).  When
  a term ends (:meth:`EventRecorder.close`), the queued Events are written
  without the hold for a short while, so those held are not lost with it.
- **Spam filter** (client-go's numbers): a token bucket per involved object,
  a burst of 25 and one more every 5 minutes; Events past it are dropped and
  counted (``reason="rate_limit"``).  Repeats count against it too.
- **Aggregation** (as client-go): an Event with the same involved object,
  type, reason and message as one already written is a merge patch of
  ``count`` and ``lastTimestamp`` on that Event.  The keys live in an LRU of
  ``cache_size`` entries (the least recently seen is forgotten; a forgotten
  repeat just creates a new Event).
- **Expired Events**: Kubernetes deletes an Event an hour (``--event-ttl``)
  after its last write.  A patch that gets 404 re-creates the Event, as
  client-go does: same name, the count *continues* and ``firstTimestamp`` is
  kept, so ``kubectl describe`` still says "x5 over 2h".  A failed create
  forgets the key, so the next repeat starts afresh.
- **Namespace**: an Event about a namespaced object goes to the object's
  namespace; one about a cluster-scoped object (a Cluster, a Remedy) to
  ``namespace``: ``default`` (client-go's and Karmada's choice) or
  ``kube-system``.  No other: the API server rejects an Event in any other
  namespace whose ``involvedObject`` has no namespace (422 "does not match
  event.namespace"), and giving the ``involvedObject`` a namespace to get
  past that would hide the Event from ``kubectl describe``.  The constructor
  (and :func:`check_namespace`, for validating a flag) raise ``ValueError``.
- **Complete**: ``involvedObject`` has apiVersion, kind, name, namespace (if
  any), uid and resourceVersion; ``source.component``, ``reportingComponent``,
  ``reportingInstance`` (the replica), ``eventTime`` (first occurrence) and
  ``action`` (the reason: :meth:`~EventRecorder.record` has no separate
  action) are set, which is what lets ``kube-system`` hold Events about
  cluster-scoped objects.  Messages are capped at 1024 bytes of UTF-8 (so
  also 1024 characters: the API's limit counts bytes) and end in ``...``
  when cut; reasons and the instance at 128 characters.

Metrics (on an injected registry, once per process: :class:`EventMetrics`):
``clusterhealth_events_recorded_total{component,type}`` (Events written,
created or counted), ``clusterhealth_events_dropped_total{component,reason}``
and ``clusterhealth_events_errors_total{component}`` (writes the API server
refused or that failed).  Without an injected :class:`EventMetrics` the
recorder counts on a private registry that nothing exports.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
import socket
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import prometheus_client

from clusterhealth_core import clock as clocks
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources

log = logging.getLogger(__name__)

MAX_MESSAGE = 1024
"""Bytes (UTF-8) of an Event message; longer ones are cut and end in ``...``."""
CLUSTER_SCOPED_NAMESPACES = ("default", "kube-system")
"""The namespaces the API server accepts for Events about cluster-scoped objects."""
_MAX_NAME = 253
_MAX_FIELD = 128  # reason, action, reportingInstance


def check_namespace(namespace: str) -> None:
    """Raise ``ValueError`` unless Events about cluster-scoped objects can go to ``namespace``."""
    if namespace not in CLUSTER_SCOPED_NAMESPACES:
        raise ValueError(
            f"Events about cluster-scoped objects cannot be written to namespace "
            f"{namespace!r}: the API server accepts them only in "
            f"{' or '.join(CLUSTER_SCOPED_NAMESPACES)}")


class EventMetrics:
    """The recorder's metrics; make one per process and registry, share it."""

    def __init__(self, registry: prometheus_client.CollectorRegistry) -> None:
        self.recorded = prometheus_client.Counter(
            "clusterhealth_events_recorded_total",
            "Events written to the API server (created, or counted on an existing Event)",
            ["component", "type"], registry=registry)
        self.dropped = prometheus_client.Counter(
            "clusterhealth_events_dropped_total",
            "Events not written: the backlog was full, the object's rate limit was spent, "
            "or a term ended with Events it could not write (closed)",
            ["component", "reason"], registry=registry)
        self.errors = prometheus_client.Counter(
            "clusterhealth_events_errors_total",
            "Event writes that failed", ["component"], registry=registry)


@dataclasses.dataclass(frozen=True)
class SpamFilter:
    """Per involved object: ``burst`` Events, then one more every ``refill_every`` seconds."""

    burst: float = 25.0
    refill_every: float = 300.0


DEFAULT_SPAM_FILTER = SpamFilter()
"""client-go's numbers (``EventSourceObjectSpamFilter``: burst 25, refill 1 per 5 min)."""


@dataclasses.dataclass(frozen=True)
class WriteRate:
    """All objects together: ``qps`` Event writes a second on average, ``burst`` at once."""

    qps: float = 10.0
    burst: float = 50.0


DEFAULT_WRITE_RATE = WriteRate()
"""Enough for every Event of a few clusters changing; a mass change trickles out."""
HOLD_POLL = 0.2
"""Seconds between looks at a :meth:`EventRecorder.hold_while` predicate while it holds."""
DROP_LOG_INTERVAL = 60.0
"""Seconds between log lines about Events dropped for a full backlog (they are all counted)."""

_Key = tuple[str, ...]


@dataclasses.dataclass
class _Written:
    name: str
    namespace: str
    count: int
    first_timestamp: str
    first_event_time: str


@dataclasses.dataclass
class _Bucket:
    tokens: float
    updated: float


@dataclasses.dataclass(frozen=True)
class _Pending:
    key: _Key
    namespace: str
    involved: dict[str, str]
    type: str
    reason: str
    message: str
    timestamp: str
    event_time: str


def _cap(message: str) -> str:
    data = message.encode()
    if len(data) <= MAX_MESSAGE:
        return message
    return data[:MAX_MESSAGE - 3].decode(errors="ignore") + "..."


class EventRecorder:
    """Writes ``core/v1`` Events on behalf of one component (see the module docstring)."""

    def __init__(
        self,
        api: kube.ApiClient,
        component: str,
        clock: clocks.Clock,
        *,
        namespace: str = "default",
        instance: str | None = None,
        metrics: EventMetrics | None = None,
        max_pending: int = 1000,
        cache_size: int = 4096,
        spam_filter: SpamFilter | None = DEFAULT_SPAM_FILTER,
        write_rate: WriteRate | None = DEFAULT_WRITE_RATE,
    ) -> None:
        check_namespace(namespace)
        self.api = api
        self.component = component
        self.clock = clock
        self.namespace = namespace
        self.instance = (instance or socket.gethostname())[:_MAX_FIELD]
        # without injected metrics they are counted on a private, unexported registry
        self.metrics = metrics or EventMetrics(prometheus_client.CollectorRegistry())
        self.cache_size = cache_size
        self.spam_filter = spam_filter
        self.write_rate = write_rate
        self._write_tokens: _Bucket | None = None
        """The write rate's bucket, full at the first write (the loop's clock is read then)."""
        self._dropped_since_log = 0
        self._drop_logged_at: float | None = None
        self._queue: asyncio.Queue[_Pending] = asyncio.Queue(max_pending)
        self._written: collections.OrderedDict[_Key, _Written] = collections.OrderedDict()
        self._buckets: collections.OrderedDict[tuple[str, ...], _Bucket] = (
            collections.OrderedDict())
        self._hold: tuple[Callable[[], bool], float] | None = None
        self._held_since: float | None = None
        """When the current hold began (monotonic); None while not busy."""
        self._closing = False
        """Set by :meth:`close`: no hold any more, and the first failed write ends it."""

    @property
    def pending(self) -> int:
        """Events queued and not yet written."""
        return self._queue.qsize()

    def hold_while(self, busy: Callable[[], bool], *, at_most: float) -> None:
        """Write no Event while ``busy()`` is true, for at most ``at_most`` seconds at a time.

        For a component whose Events describe its own writes: while they are
        queued (a mass change), the Events wait and the writes get the API
        server.  After ``at_most`` seconds of unbroken busyness the Events are
        written at the write rate again, until ``busy()`` is once false.
        """
        self._hold = (busy, at_most)

    # --- the caller's side: never blocks, never raises ------------------------

    def record(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        """Queue an Event about ``obj`` (``Normal`` or ``Warning``); see the module docstring."""
        try:
            self._record(obj, type_, reason, message)
        except Exception:  # recording is best effort; a bug here must not break a reconcile
            self.metrics.errors.labels(self.component).inc()
            log.exception("could not queue event %s", reason)

    def _record(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        meta = obj.get("metadata") or {}
        object_namespace = str(meta.get("namespace") or "")
        involved = {
            "apiVersion": str(obj.get("apiVersion") or ""), "kind": str(obj.get("kind") or ""),
            "name": str(meta.get("name") or ""),
            **({"namespace": object_namespace} if object_namespace else {}),
            "uid": str(meta.get("uid") or ""),
            "resourceVersion": str(meta.get("resourceVersion") or ""),
        }
        subject = (involved["apiVersion"], involved["kind"], object_namespace,
                   involved["name"], involved["uid"])
        if not self._allowed(subject):
            self.metrics.dropped.labels(self.component, "rate_limit").inc()
            log.debug("rate limit: dropped event %s on %s", reason, involved["name"])
            return
        if self._queue.full():  # before building it: a mass change drops thousands
            self.metrics.dropped.labels(self.component, "backlog").inc()
            self._log_backlog_drop(reason, involved["name"], message)
            return
        message, reason, now = _cap(message), reason[:_MAX_FIELD], self.clock.now()
        pending = _Pending(
            key=(*subject, type_, reason, message),
            namespace=object_namespace or self.namespace,
            involved=involved, type=type_, reason=reason, message=message,
            timestamp=clocks.format_rfc3339(now),
            event_time=clocks.format_rfc3339(now, micro=True),
        )
        self._queue.put_nowait(pending)

    def _log_backlog_drop(self, reason: str, name: str, message: str) -> None:
        """Say the first drop, then at most one line per :data:`DROP_LOG_INTERVAL`."""
        self._dropped_since_log += 1
        now = self.clock.monotonic()
        if self._drop_logged_at is not None and now - self._drop_logged_at < DROP_LOG_INTERVAL:
            return
        log.warning("event backlog full (%d pending); dropped %d event(s) since the last "
                    "report, the latest %s on %s: %s (clusterhealth_events_dropped_total "
                    "counts them all)", self._queue.maxsize, self._dropped_since_log, reason,
                    name, message)
        self._drop_logged_at, self._dropped_since_log = now, 0

    def _allowed(self, subject: tuple[str, ...]) -> bool:
        """Take a token from the object's bucket (client-go's spam filter)."""
        if self.spam_filter is None:
            return True
        now = self.clock.monotonic()
        bucket = self._buckets.get(subject)
        if bucket is None:
            bucket = self._buckets[subject] = _Bucket(self.spam_filter.burst, now)
            if len(self._buckets) > self.cache_size:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(subject)
            refill = (now - bucket.updated) / self.spam_filter.refill_every
            bucket.tokens = min(self.spam_filter.burst, bucket.tokens + refill)
            bucket.updated = now
        if bucket.tokens < 1:
            return False
        bucket.tokens -= 1
        return True

    # --- the writer -----------------------------------------------------------

    async def _not_busy(self) -> None:
        """Return once the :meth:`hold_while` predicate is false or has held long enough."""
        if self._hold is None:
            return
        busy, at_most = self._hold
        while busy() and not self._closing:
            now = self.clock.monotonic()
            if self._held_since is None:
                self._held_since = now
            if now - self._held_since >= at_most:
                return  # busy for too long: written at the write rate meanwhile
            await self.clock.sleep(HOLD_POLL)
        self._held_since = None

    async def _write_token(self) -> None:
        """Wait for the next write the rate allows (no wait without a rate)."""
        rate = self.write_rate
        if rate is None:
            return
        if self._write_tokens is None:
            self._write_tokens = _Bucket(rate.burst, self.clock.monotonic())
        tokens = self._write_tokens
        while True:
            now = self.clock.monotonic()
            tokens.tokens = min(rate.burst, tokens.tokens + (now - tokens.updated) * rate.qps)
            tokens.updated = now
            if tokens.tokens >= 1:
                tokens.tokens -= 1
                return
            await self.clock.sleep((1 - tokens.tokens) / rate.qps)

    async def run(self) -> None:
        """Write queued Events one at a time, at the write rate, until cancelled."""
        while True:
            pending = await self._queue.get()
            try:
                await self._not_busy()
                await self._write_token()
                await self._write(pending)
            except (errors.KubeError, OSError) as exc:
                self.metrics.errors.labels(self.component).inc()
                log.warning("could not record event %s on %s %s: %s", pending.reason,
                            pending.involved["kind"], pending.involved["name"], exc)
                if self._closing:  # not leading any more, or the server gone: no more tries
                    self._discard()
            except Exception:  # never let one bad Event stop the recorder
                self.metrics.errors.labels(self.component).inc()
                log.exception("could not record event %s", pending.reason)
            finally:
                self._queue.task_done()

    async def flush(self) -> None:
        """Wait until every queued Event has been written (or failed); needs :meth:`run`."""
        await self._queue.join()

    async def close(self, timeout: float) -> None:
        """At the end of a term: write what is queued, held or not, for at most ``timeout`` s.

        The Events a hold kept back (:meth:`hold_while`) tell of writes already made; they
        are written now rather than lost with the term.  Still at the write rate; the
        first write that fails (the term no longer leads) drops the rest.  Needs
        :meth:`run`, which the caller cancels afterwards.
        """
        self._closing = True
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._queue.join()

    def _discard(self) -> None:
        """Drop every queued Event (counted as dropped, reason ``closed``)."""
        while not self._queue.empty():
            self._queue.get_nowait()
            self._queue.task_done()
            self.metrics.dropped.labels(self.component, "closed").inc()

    async def _write(self, pending: _Pending) -> None:
        written = self._written.get(pending.key)
        if written is not None:
            self._written.move_to_end(pending.key)
            try:
                await self.api.patch(
                    resources.EVENTS, written.name,
                    {"count": written.count + 1, "lastTimestamp": pending.timestamp},
                    namespace=written.namespace)
            except errors.NotFound:  # expired (event TTL) or deleted: re-create it
                log.debug("event %s/%s is gone; re-creating it", written.namespace,
                          written.name)
                await self._create(pending, written.name, written.count + 1,
                                   written.first_timestamp, written.first_event_time)
            else:
                written.count += 1
                self.metrics.recorded.labels(self.component, pending.type).inc()
            return
        name = f"{pending.involved['name'][:_MAX_NAME - 17] or 'object'}.{uuid.uuid4().hex[:16]}"
        await self._create(pending, name, 1, pending.timestamp, pending.event_time)

    async def _create(self, pending: _Pending, name: str, count: int,
                      first_timestamp: str, first_event_time: str) -> None:
        self._written.pop(pending.key, None)  # a failed create starts afresh next time
        await self.api.create(resources.EVENTS, {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": pending.namespace},
            "involvedObject": pending.involved,
            "type": pending.type, "reason": pending.reason, "message": pending.message,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.instance,
            "action": pending.reason,
            "eventTime": first_event_time,
            "firstTimestamp": first_timestamp, "lastTimestamp": pending.timestamp,
            "count": count,
        }, namespace=pending.namespace)
        self._written[pending.key] = _Written(name, pending.namespace, count, first_timestamp,
                                              first_event_time)
        if len(self._written) > self.cache_size:
            self._written.popitem(last=False)
        self.metrics.recorded.labels(self.component, pending.type).inc()
