"""A list-then-watch cache of one resource, so controllers read memory, not the API.

What it does against real API servers, behind proxies, for weeks:

* **Lists in pages** (``limit`` + ``continue``) and folds each page into the
  cache in place, so a relist never holds a second copy of the cache.
* **Transforms** each object before caching it (by default it drops
  ``metadata.managedFields``; callers keep only what they read).
* **Resumes** a broken or ended watch from the last resourceVersion it saw
  (bookmarks included); it relists only when the server answers 410 Gone.
* **Backs off** on every failure, whatever the exception, and resets the
  backoff only after a watch has stayed healthy for a while, so a watch that
  always fails (RBAC allows list, not watch; a proxy cutting streams) slows
  down to one attempt every :data:`MAX_BACKOFF` seconds.  Every failure is
  logged and counted; nothing kills the task but cancellation.
* **Tells of failures** as they happen (:meth:`Informer.add_failure_listener`):
  a broken watch is often the first sign that its server went away.
* **Reports health**: :meth:`Informer.health` fails when the cache has not
  been in contact with the server for :attr:`Informer.stale_after` seconds,
  for ``/readyz``.

:class:`InformerFactory` hands out one shared informer per resource (and
namespace/selector) per API server, as client-go's shared informer factory.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any

import prometheus_client

from clusterhealth_core import clock as clocks
from clusterhealth_core import retry
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources

log = logging.getLogger(__name__)

Object = dict[str, Any]
Handler = Callable[[str, Object, Object | None], None]
"""``handler(event_type, new_or_deleted_object, previous_object_or_None)``."""
Transform = Callable[[Object], Object]
"""Applied to every object before it is cached (and handed to handlers)."""
FailureListener = Callable[[Exception], None]
"""Called with each list or watch failure, before the informer backs off."""

MAX_BACKOFF = 30.0
BACKOFF = retry.Backoff(initial=0.8, factor=2.0, maximum=MAX_BACKOFF, jitter=0.2,
                        attempts=1_000_000)
HEALTHY_AFTER = 60.0
"""A watch that ran this long without failing resets the backoff."""
STALE_AFTER = 120.0
"""Without contact with the server for this long, the informer reports itself unhealthy."""


def key_of(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` (or ``name`` for cluster-scoped objects)."""
    meta = obj.get("metadata", {})
    namespace = meta.get("namespace")
    return f"{namespace}/{meta['name']}" if namespace else str(meta["name"])


def strip_managed_fields(obj: Object) -> Object:
    """The default transform: drop ``metadata.managedFields`` (often half the object)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


def keep_fields(*paths: str) -> Transform:
    """A transform keeping an object's identity and the given dotted paths only.

    ``keep_fields("status.conditions", "metadata.labels")`` keeps
    ``metadata``'s name, namespace, uid, resourceVersion, generation and
    deletionTimestamp, plus those paths; everything else is dropped before
    the object is cached.
    """
    split = [p.split(".") for p in paths]

    def transform(obj: Object) -> Object:
        meta = obj.get("metadata") or {}
        kept: Object = {"metadata": {k: meta[k] for k in (
            "name", "namespace", "uid", "resourceVersion", "generation", "deletionTimestamp",
        ) if k in meta}}
        for part in ("apiVersion", "kind"):
            if part in obj:
                kept[part] = obj[part]
        for path in split:
            source: Any = obj
            for name in path:
                source = source.get(name) if isinstance(source, dict) else None
            if source is None:
                continue
            target = kept
            for name in path[:-1]:
                target = target.setdefault(name, {})
            target[path[-1]] = source
        return kept

    return transform


class InformerMetrics:
    """Lists, watches and failures of every informer of a process, by resource."""

    def __init__(self, registry: prometheus_client.CollectorRegistry) -> None:
        self.lists = prometheus_client.Counter(
            "clusterhealth_informer_lists", "List requests (pages) sent by informers.",
            ["resource"], registry=registry)
        self.watches = prometheus_client.Counter(
            "clusterhealth_informer_watches", "Watch requests sent by informers.",
            ["resource"], registry=registry)
        self.failures = prometheus_client.Counter(
            "clusterhealth_informer_failures",
            "List or watch failures, by resource and kind of error.",
            ["resource", "error"], registry=registry)
        self.objects = prometheus_client.Gauge(
            "clusterhealth_informer_objects", "Objects in an informer's cache.",
            ["resource"], registry=registry)


@dataclasses.dataclass(frozen=True)
class InformerSettings:
    """How an informer pages, watches and backs off."""

    page_size: int = kube.DEFAULT_PAGE_SIZE
    watch_timeout: int = kube.DEFAULT_WATCH_SECONDS
    backoff: retry.Backoff = BACKOFF
    healthy_after: float = HEALTHY_AFTER
    stale_after: float = STALE_AFTER


class Informer:
    """Keeps ``store`` equal to the server's objects of one resource."""

    def __init__(
        self,
        api: kube.ApiClient,
        resource: resources.Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        transform: Transform | None = strip_managed_fields,
        settings: InformerSettings = InformerSettings(),
        clock: clocks.Clock | None = None,
        metrics: InformerMetrics | None = None,
    ) -> None:
        self.api = api
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.transform = transform
        self.settings = settings
        self.stale_after = settings.stale_after
        self.clock = clock or clocks.Clock()
        self.metrics = metrics
        self.store: dict[str, Object] = {}
        self.resource_version = ""
        self._handlers: list[Handler] = []
        self._failure_listeners: list[FailureListener] = []
        self._synced = asyncio.Event()
        self._started_at: float | None = None
        self._last_contact: float | None = None
        self._last_error = ""

    @property
    def name(self) -> str:
        """What the informer caches, for logs and metrics."""
        where = f" in {self.namespace}" if self.namespace else ""
        return f"{self.resource.plural}{where}"

    def add_handler(self, handler: Handler) -> None:
        """Call ``handler`` for every change (including the initial list as ADDED)."""
        self._handlers.append(handler)

    def add_failure_listener(self, listener: FailureListener) -> None:
        """Call ``listener`` with every list or watch failure (410 Gone included)."""
        self._failure_listeners.append(listener)

    @property
    def synced(self) -> bool:
        """Whether the first list has been loaded."""
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        """Wait until the first list has been loaded."""
        await self._synced.wait()

    def loading_for(self) -> float:
        """Seconds this informer has run without its first list loaded (0 once loaded).

        For caches a caller cannot be sure it may read (a kind RBAC forbids, or a
        server that does not answer): instead of waiting for :meth:`wait_synced`,
        the caller tries again later, and past a limit of its own says why from
        :attr:`last_error`.
        """
        if self.synced or self._started_at is None:
            return 0.0
        return self.clock.monotonic() - self._started_at

    @property
    def last_error(self) -> str:
        """The last list or watch failure (``""`` if none since the last success)."""
        return self._last_error

    def health(self) -> tuple[bool, str]:
        """A ``/readyz`` check: synced and in contact with the server recently."""
        now = self.clock.monotonic()
        since = self._last_contact if self._last_contact is not None else self._started_at
        if since is None:
            return True, f"{self.name}: not started"
        quiet = now - since
        if quiet <= self.stale_after:
            state = "synced" if self.synced else "syncing"
            return True, f"{self.name}: {state}"
        what = "synced" if self.synced else "never synced"
        return False, (f"{self.name}: {what}, no contact with the server for {quiet:.0f}s"
                       + (f" (last error: {self._last_error})" if self._last_error else ""))

    def _emit(self, event: str, obj: Object, old: Object | None) -> None:
        for handler in self._handlers:
            try:
                handler(event, obj, old)
            except Exception:  # a handler bug must not stop the cache
                log.exception("informer handler failed for %s %s", event, key_of(obj))

    def _prepare(self, obj: Object) -> Object:
        return self.transform(obj) if self.transform is not None else obj

    def _contact(self) -> None:
        self._last_contact = self.clock.monotonic()

    async def _relist(self) -> str:
        """List page by page into the store; return the list's resourceVersion."""
        seen: set[str] = set()
        version = ""
        async for page in self.api.list_pages(
            self.resource, namespace=self.namespace, label_selector=self.label_selector,
            field_selector=self.field_selector, limit=self.settings.page_size,
        ):
            self._contact()
            if self.metrics is not None:
                self.metrics.lists.labels(self.resource.plural).inc()
            for raw in page.get("items") or []:
                seen.add(self._listed(self._prepare(raw)))
            version = str((page.get("metadata") or {}).get("resourceVersion", ""))
        self._drop_except(seen)
        return version

    def _listed(self, obj: Object) -> str:
        """Store one listed object (ADDED, or MODIFIED if its version moved); its key."""
        key = key_of(obj)
        previous = self.store.get(key)
        self.store[key] = obj
        if previous is None:
            self._emit("ADDED", obj, None)
        elif _version(previous) != _version(obj):
            self._emit("MODIFIED", obj, previous)
        return key

    def _drop_except(self, keys: set[str]) -> None:
        """After a full list: every cached object not in it was deleted meanwhile."""
        for key in [k for k in self.store if k not in keys]:
            old = self.store.pop(key)
            self._emit("DELETED", old, old)
        self._count()

    def _replace(self, items: list[Object]) -> None:
        """Make the store exactly ``items`` (for tests and callers holding a full list)."""
        fresh = [self._prepare(obj) for obj in items]
        keys = {key_of(obj) for obj in fresh}
        for key in [k for k in self.store if k not in keys]:  # deletions first, as before
            old = self.store.pop(key)
            self._emit("DELETED", old, old)
        for obj in fresh:
            self._listed(obj)
        self._count()

    def _apply(self, event: kube.WatchEvent) -> None:
        obj = self._prepare(event.object)
        key = key_of(obj)
        old = self.store.get(key)
        if event.type == "DELETED":
            self.store.pop(key, None)
            self._emit("DELETED", obj, old)
        else:
            self.store[key] = obj
            self._emit("ADDED" if old is None else "MODIFIED", obj, old)

    def _count(self) -> None:
        if self.metrics is not None:
            self.metrics.objects.labels(self.resource.plural).set(len(self.store))

    async def _watch(self) -> None:
        """Watch from ``resource_version`` until the server ends the stream."""
        if self.metrics is not None:
            self.metrics.watches.labels(self.resource.plural).inc()
        async for event in self.api.watch(
            self.resource, namespace=self.namespace, resource_version=self.resource_version,
            label_selector=self.label_selector, field_selector=self.field_selector,
            timeout_seconds=self.settings.watch_timeout,
        ):
            self._contact()
            version = (event.object.get("metadata") or {}).get("resourceVersion")
            if event.type != "BOOKMARK":
                self._apply(event)
                if event.type != "MODIFIED":
                    self._count()
            if version:
                self.resource_version = str(version)
        self._contact()

    async def run(self) -> None:
        """List and watch forever (until cancelled); never dies of an error."""
        self._started_at = self.clock.monotonic()
        failures = 0
        quiet = FailureLog()
        gone_before = False
        while True:
            started = self.clock.monotonic()
            try:
                if not self.resource_version:
                    self.resource_version = await self._relist()
                    self._synced.set()
                    self._last_error = ""
                    quiet.recovered(self.name, "listed")
                await self._watch()
                quiet.recovered(self.name, "watching")
                gone_before = False
                if self.clock.monotonic() - started >= self.settings.healthy_after:
                    failures = 0
                continue
            except errors.Gone as exc:
                # Too old to resume: the server answers, so relist at once, also after an
                # outage (a restarted API server answers 410 to every old version); a
                # second Gone in a row backs off.
                log.info("informer %s: resourceVersion %s expired; relisting", self.name,
                         self.resource_version)
                self.resource_version = ""
                self._failed("Gone", "resourceVersion expired", exc)
                if not gone_before:
                    gone_before = True
                    failures = max(failures, 1)
                    continue
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # anything: log, count, back off, go on
                gone_before = False
                self._failed(exc.__class__.__name__, str(exc), exc)
                if isinstance(exc, errors.Forbidden | errors.NotFound):
                    # the server answered: this cache is refused (RBAC) or its kind is gone,
                    # which its users report; it does not make the process unhealthy
                    self._contact()
                if self.clock.monotonic() - started >= self.settings.healthy_after:
                    failures = 0
                if not isinstance(exc, errors.KubeError | OSError | TimeoutError):
                    log.exception("informer %s: unexpected error", self.name)
                    quiet.failed(f"unexpected: {exc}")
                elif quiet.failed(str(exc)):
                    log.warning("informer %s: %s (attempt %d; the same error is logged again "
                                "at attempts 2, 4, 8, ... or when it changes)", self.name, exc,
                                quiet.attempts)
            delay = self.settings.backoff.delay(min(failures, 16))
            failures += 1
            log.debug("informer %s: retrying in %.1fs (attempt %d, %s)", self.name, delay,
                      failures, "resuming the watch" if self.resource_version else "listing")
            await self.clock.sleep(delay)

    def _failed(self, kind: str, message: str, exc: Exception) -> None:
        self._last_error = f"{kind}: {message}"[:300]
        if self.metrics is not None:
            self.metrics.failures.labels(self.resource.plural, kind).inc()
        for listener in self._failure_listeners:
            try:
                listener(exc)
            except Exception:  # a listener bug must not stop the cache
                log.exception("informer %s: failure listener failed", self.name)


class FailureLog:
    """Which failures of a retried call to log, so that an outage is a few lines, not a flood.

    A member that is down for an hour makes every informer on it fail at each backoff
    step; the first failure, every power-of-two attempt and any new error message are
    logged, the rest only counted (the failure metric counts all), and the first success
    after failures says how many there were.
    """

    def __init__(self) -> None:
        self.attempts = 0
        self._last = ""

    def failed(self, message: str) -> bool:
        """Count one failure; True when this one should be logged."""
        self.attempts += 1
        changed, self._last = message != self._last, message
        return changed or self.attempts & (self.attempts - 1) == 0

    def recovered(self, name: str, what: str) -> None:
        """After failures: log once that ``name`` works again, and start counting anew."""
        if self.attempts:
            log.info("informer %s: %s again after %d failed attempts", name, what,
                     self.attempts)
        self.attempts, self._last = 0, ""


def _version(obj: Mapping[str, Any]) -> Any:
    return (obj.get("metadata") or {}).get("resourceVersion")


class InformerFactory:
    """One shared :class:`Informer` per (resource, namespace, selectors) on one API server.

    Controllers ask for what they need before :meth:`start`; asking again
    returns the same informer, so two controllers of one process share one
    list, one watch and one cache.  A second caller must want the same
    transform (a different one is a programming error: it would change what
    the first caller reads).
    """

    def __init__(self, api: kube.ApiClient, *, settings: InformerSettings = InformerSettings(),
                 clock: clocks.Clock | None = None,
                 metrics: InformerMetrics | None = None) -> None:
        self.api = api
        self.settings = settings
        self.clock = clock or clocks.Clock()
        self.metrics = metrics
        self._informers: dict[tuple[str, str | None, str | None, str | None], Informer] = {}
        self._tasks: dict[Informer, asyncio.Task[None]] = {}
        self._started = False

    def informer(
        self,
        resource: resources.Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        transform: Transform | None = strip_managed_fields,
    ) -> Informer:
        """The shared informer for this resource and scope (started if the factory runs)."""
        key = (resource.path(), namespace, label_selector, field_selector)
        found = self._informers.get(key)
        if found is not None:
            if found.transform is not transform:
                raise ValueError(f"informer for {found.name} already exists with another "
                                 "transform")
            return found
        made = Informer(self.api, resource, namespace=namespace, label_selector=label_selector,
                        field_selector=field_selector, transform=transform,
                        settings=self.settings, clock=self.clock, metrics=self.metrics)
        self._informers[key] = made
        if self._started:
            self._start(made)
        return made

    @property
    def informers(self) -> list[Informer]:
        """Every informer handed out."""
        return list(self._informers.values())

    def _start(self, informer: Informer) -> None:
        self._tasks[informer] = asyncio.create_task(informer.run(),
                                                    name=f"informer:{informer.name}")

    def start(self) -> None:
        """Start every informer handed out so far (and later ones as they are asked for)."""
        self._started = True
        for informer in self._informers.values():
            if informer not in self._tasks:
                self._start(informer)

    @property
    def synced(self) -> bool:
        """Whether every informer has loaded its first list."""
        return all(i.synced for i in self._informers.values())

    async def wait_synced(self) -> None:
        """Wait until every informer has loaded its first list."""
        for informer in list(self._informers.values()):
            await informer.wait_synced()

    def health(self) -> tuple[bool, str]:
        """A ``/readyz`` check over every informer."""
        results = [i.health() for i in self._informers.values()]
        failing = [detail for ok, detail in results if not ok]
        if failing:
            return False, "; ".join(failing)
        return True, f"{len(results)} informer(s) in contact"

    async def stop(self) -> None:
        """Cancel every informer task and wait for them."""
        self._started = False
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
