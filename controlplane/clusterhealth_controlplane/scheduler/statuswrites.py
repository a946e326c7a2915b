"""The scheduler's status writes, deferred behind a backlog of placements ("Placement first").

Why: the writes that move workloads (``spec.clusters``) go first.  A binding's status
is written at once when nothing waits in the scheduler's queue; when a backlog waits it
is deferred: one pending status per binding (the latest wins), written by a set of
workers once the queue is empty; while it is not, those that have waited ``delay``
seconds are written by :data:`BACKLOG_STATUS_WRITERS` worker(s) at a time (never
starved).  The scheduler's decisions read a binding's pending status as its live one
(:meth:`StatusWrites.live`).  This class holds the pending writes with the logic that
schedules and writes them, apart from the controller that decides them.

A deferred write starts from the newer of the binding as we last wrote it and the
binding in the informer (:func:`newer`): during a failover others write the binding
too (its status, its eviction tasks) while our status waits.  When that copy was
stale all the same, the write is tried again shortly from whatever the informer holds
by then; only if the informer has not moved is the server read (it was one ``GET``
per failed-over binding).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any

from clusterhealth_core import clock, retry, status
from clusterhealth_core.api import meta
from clusterhealth_core.kube import errors as kube_errors
from clusterhealth_core.kube import resources

log = logging.getLogger(__name__)

STATUS_RETRY = retry.Backoff(initial=0.1, factor=2.0, maximum=30.0, jitter=0.1,
                             attempts=1_000_000)
"""Delay before a deferred status write that failed is tried again, by attempt."""
BACKLOG_STATUS_WRITERS = 1
"""Deferred statuses written at once while placements wait (all workers once none do)."""
CONFLICT_RETRY = 0.1
"""Seconds before a deferred write that met a newer binding is tried again from the cache."""
STATUS_POLL = 0.02
"""Seconds between two looks at the queue while deferred statuses wait for it to empty."""


@dataclasses.dataclass
class _Pending:
    """A deferred status write: the latest wanted status, since when one has waited."""

    resource: resources.Resource
    name: str
    namespace: str | None
    desired: Mapping[str, Any]
    since: float
    latest: Mapping[str, Any] | None = None
    """The binding as last read or written (the write starts from it)."""
    attempts: int = 0
    not_before: float = 0.0


class StatusWrites:
    """Status writes now or deferred, by binding key; ``run`` writes the deferred ones.

    ``name``: the controller's (its workers' task names); ``queued()``: how many
    requests wait in the scheduler's queue (the backlog);
    ``writer(resource)``: the scheduler's status writer of that kind;
    ``cached(key)``: the binding in the scheduler's informer.
    """

    def __init__(self, name: str, clock_: clock.Clock, workers: int, delay: float, *,
                 queued: Callable[[], int],
                 writer: Callable[[resources.Resource], status.StatusWriter],
                 cached: Callable[[str], Mapping[str, Any] | None]) -> None:
        self.name = name
        self.clock = clock_
        self.workers = workers
        self.delay = delay
        """Seconds a status write may be deferred behind a backlog of placements."""
        self._queued = queued
        self._writer = writer
        self._cached = cached
        """The binding of a key as the informer holds it."""
        self.pending: dict[str, _Pending] = {}
        """Deferred status writes by key, oldest first."""
        self._writing: set[str] = set()
        self._wake = asyncio.Event()
        self.races = status.LostRaces()
        """Bindings whose deferred write met a newer one (tried again from the informer)."""

    def forget(self, key: str) -> None:
        """The binding is gone: its deferred status too."""
        self.pending.pop(key, None)
        self.races.forget(key)

    def live(self, key: str, obj: Mapping[str, Any]) -> Mapping[str, Any]:
        """The binding's status as it will be: its deferred write if one waits, else live."""
        pending = self.pending.get(key)
        if pending is not None:
            return {**(obj.get("status") or {}), **pending.desired}
        return obj.get("status") or {}

    async def write(self, key: str, resource: resources.Resource, metadata: meta.ObjectMeta,
                    desired: Mapping[str, Any], *, latest: Mapping[str, Any] | None = None
                    ) -> None:
        """Write now when nothing waits in the queue; else defer.

        ``latest``: the binding as last read or written: the write starts from it
        where the writer reads (``StatusWriter.write``'s ``cached``), now; deferred,
        from the newer of it and the informer's copy (:func:`newer`): during a burst
        the informer lags our own spec writes, and others write the binding meanwhile.
        """
        name, namespace = metadata.name, metadata.namespace or None
        pending = self.pending.get(key)
        writer = self._writer(resource)
        if pending is None and not self._queued():
            await writer.write(name, desired, namespace=namespace, cached=latest)
            return
        if not writer.merge_conditions:
            latest = None  # the writer applies: it reads nothing, keep nothing for it
        if pending is None:
            self.pending[key] = _Pending(resource, name, namespace, desired,
                                         since=self.clock.monotonic(), latest=_slim(latest))
        else:  # coalesced: the latest status wins, the wait is counted from the first
            pending.desired = desired
            pending.latest = _slim(latest)
            pending.attempts = 0
            pending.not_before = 0.0
        self._wake.set()

    def _next(self, now: float) -> str | None:
        """The key of the deferred status to write now, if any may be written."""
        backlog = bool(self._queued())
        if backlog and len(self._writing) >= BACKLOG_STATUS_WRITERS:
            return None
        for key, pending in self.pending.items():
            if key in self._writing or pending.not_before > now:
                continue
            if backlog and now - pending.since < self.delay:
                return None  # the later ones have waited no longer
            return key
        return None

    async def _worker(self) -> None:
        """Write deferred statuses: when the queue is empty, or when they waited too long."""
        while True:
            if not self.pending:
                self._wake.clear()
                await self._wake.wait()
                continue
            key = self._next(self.clock.monotonic())
            if key is None:
                await self.clock.sleep(STATUS_POLL)
                continue
            pending = self.pending[key]
            desired = pending.desired
            self._writing.add(key)
            start = newer(pending.latest, self._cached(key))
            try:
                written = await self.races.write(
                    self._writer(pending.resource), key, pending.name, desired,
                    namespace=pending.namespace, cached=start)
            except asyncio.CancelledError:
                raise
            except kube_errors.NotFound:
                written = status.Won(None)  # deleted meanwhile: nothing to write
            except Exception as exc:  # anything, a Conflict after a read too: keep it, retry
                self._retry(key, pending, exc)
                continue
            finally:
                self._writing.discard(key)
            if written is None:  # the informer may hold the newer binding by the next try
                pending.not_before = self.clock.monotonic() + CONFLICT_RETRY
                continue
            if self.pending.get(key) is pending and pending.desired is desired:
                del self.pending[key]  # else a newer status came meanwhile: written next

    def _retry(self, key: str, pending: _Pending, exc: Exception) -> None:
        """Try a failed write again after its backoff, from the server's copy."""
        pending.latest = None
        self.races.lost(key, self._cached(key))  # not from the cache either, unless it moves
        delay = STATUS_RETRY.delay(min(pending.attempts, 30))
        pending.attempts += 1
        pending.not_before = self.clock.monotonic() + delay
        log.warning("writing the status of %s failed (%s); retry in %.2fs", key, exc, delay)

    async def run(self) -> None:
        """The writers of deferred statuses (``workers`` of them), until cancelled."""
        async with asyncio.TaskGroup() as group:
            for index in range(self.workers):
                group.create_task(self._worker(), name=f"{self.name}-status-{index}")


def _slim(obj: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What a status write needs of a binding kept while it waits (not its spec).

    A status PUT keeps the stored spec whatever the body says, and a body without
    ``managedFields`` leaves them as they are: thousands of deferred writes during
    a burst then hold their metadata and status, not every binding twice over.
    """
    if obj is None:
        return None
    metadata = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    return {"metadata": metadata, "status": obj.get("status") or {}}  # the writer adds kind


def version(obj: Mapping[str, Any] | None) -> int | None:
    """An object's ``resourceVersion`` as a number (None: none, or not a number)."""
    value = ((obj or {}).get("metadata") or {}).get("resourceVersion")
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def newer(ours: Mapping[str, Any] | None, cached: Mapping[str, Any] | None
          ) -> Mapping[str, Any] | None:
    """The copy of a binding a status write starts from: the later of ``ours`` and ``cached``.

    Versions are opaque to clients in general; here both come from one API server,
    which numbers them from etcd's revision, and a wrong choice costs only a Conflict.
    When they cannot be compared, ``ours``.
    """
    if ours is None or cached is None:
        return ours if cached is None else cached
    mine, theirs = version(ours), version(cached)
    if mine is not None and theirs is not None and theirs > mine:
        return cached
    return ours
