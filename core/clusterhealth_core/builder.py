"""A controller declared, not wired: what it is for, what it owns, what it watches.

controller-runtime's ``pkg/builder`` in our runtime.  Every controller used to
write the same wiring again: informers asked for, one ``add_handler`` per kind
with a hand-written "ignore our own status write" test, a ``synced`` property
over those caches, and a ``run`` that waits for them before starting the
workers.  Here a controller says instead::

    self.controller = (builder.Builder(NAME, term, workers=n)
                       .for_(resources.NAMESPACES, builder.changed(carried))
                       .owns(resources.WORKS, owner_of, builder.changed(spec))
                       .watches(resources.CLUSTERS, every_namespace, builder.not_modified)
                       .complete(self.reconcile))

and keeps its ``reconcile(request) -> Result`` and its decision.

* A :class:`Request` is a typed object reference (namespace and name, and a
  kind where one queue serves several), not a string in each controller's
  own format; the queue keys it by ``namespace/name`` (or ``name``), as
  ``informer.key_of``, behind ``kind|`` when it has a kind.
* ``for_`` enqueues the object itself, ``owns`` the owner a function names
  (Works name their binding in labels, not in ``ownerReferences``), and
  ``watches`` whatever a map function returns.
* Predicates drop events before they are mapped: :func:`changed` keeps a
  modification only when a view of the object changed (the common "ignore a
  status write": :data:`SPEC`, :func:`generation_changed`), and
  :data:`not_modified` keeps only additions and deletions.
* An ``observe`` function sees every event of a watch, predicates aside
  (indexes and gauges that must follow each version); an ``on_deleted`` hook
  is told the request of each object deleted (what was kept for it goes).
* Map functions for ``watches``: :func:`every` (every object of a cache: a
  change that concerns them all) and :func:`by_name` (what an index says
  points at the object's name: the MCIs located on a Cluster).
* ``for_``, ``owns`` and ``watches`` take one source or several (a tuple: the
  kinds followed alike, such as both binding kinds), and ``status`` one
  resource or several: one declaration, not one line per kind.
* :class:`Index`: an ``observe`` keeping what each object of a watch points
  at, and the objects pointing at a value (the bindings on a cluster, the
  Works of a namespace).
* :class:`Parsed`: an ``observe`` that parses each object of a watch once per
  change (policies), kept by request for the reconciles and map functions.
* ``resync(period)``: every object of the ``for_`` kind (or what a function
  names) is queued again each period -- one place, not a sleep loop per
  controller; ``before`` is awaited first each period (a load balancer's own
  resync).
* ``status(resource, manager, fields)``: a status writer made once before the
  workers start (the server's schema decides how it writes), found with
  :meth:`Controller.writer`; none in a standby's term, which never writes.
* ``on_start(hook)`` runs once every cache has loaded, before the workers
  (what the first pass queues); ``start_after(wait)`` holds the workers until
  ``wait()`` returns (with ``synced=True`` the controller is synced only then);
  ``start_after_first_pass(other, timeout)`` holds them until ``other`` has
  reconciled once every object its caches held when they loaded (a status
  that needs another queue's first pass).
* ``beside(work)`` runs ``work()`` beside the controller for as long as it
  runs (the member clients' housekeeping); ``on_stop(hook)`` is called (and
  awaited, when it returns an awaitable) once it stops, however it stops.
* ``channel()``: a queue fed only by :meth:`Controller.enqueue` calls (from
  another reconcile), controller-runtime's ``source.Channel``.
* The built :class:`Controller` is synced when every declared informer is,
  and runs the workers once they have all loaded.  A class built of several
  controllers (one per kind, as controller-runtime has it) lists them in
  :attr:`Declared.controllers` and runs them together.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from typing import Any, Generic, TypeVar

from clusterhealth_core import reconcile, runner, status
from clusterhealth_core.kube import informer, resources

log = logging.getLogger(__name__)
T = TypeVar("T")
K = TypeVar("K", bound=Hashable)
V = TypeVar("V", bound=Hashable)

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"


@dataclasses.dataclass(frozen=True, order=True)
class Request:
    """What one reconcile is about: an object's namespace ("" when cluster-scoped) and name.

    ``kind`` tells apart the kinds one queue serves ("" where it serves one).
    """

    namespace: str
    name: str
    kind: str = ""

    @property
    def key(self) -> str:
        """``[kind|]namespace/name``, or ``[kind|]name`` when cluster-scoped (the queue's key)."""
        key = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind}|{key}" if self.kind else key

    @classmethod
    def parse(cls, key: str) -> Request:
        """The request a queue key stands for (names never contain ``/`` nor ``|``)."""
        kind, _, rest = key.rpartition("|")
        namespace, _, name = rest.rpartition("/")
        return cls(namespace, name, kind)

    @classmethod
    def of(cls, obj: Mapping[str, Any], kind: str = "") -> Request:
        """The request for an object."""
        meta = obj.get("metadata") or {}
        return cls(str(meta.get("namespace") or ""), str(meta["name"]), kind)

    def __str__(self) -> str:
        return self.key


@dataclasses.dataclass(frozen=True)
class Event:
    """One change an informer saw: its type, the object (last state when deleted), the old."""

    type: str
    obj: informer.Object
    old: informer.Object | None


Predicate = Callable[[Event], bool]
MapFunc = Callable[[Event], Iterable[Request]]
Observer = Callable[[Event], object]
"""Sees every event of a watch, whatever its predicates say; what it returns is ignored."""
Reconcile = Callable[[Request], Awaitable[reconcile.Result | None]]
Hook = Callable[[], object]
Wait = Callable[[], Awaitable[object]]
Source = resources.Resource | informer.Informer
Sources = Source | tuple[Source, ...]
"""One source, or several watched alike."""
OnTerminal = Callable[[Request, reconcile.TerminalError], Awaitable[None]]
View = Callable[[informer.Object], Any]


def changed(view: View) -> Predicate:
    """Keep additions, deletions, and modifications that change ``view`` of the object."""
    def predicate(event: Event) -> bool:
        return event.type != MODIFIED or event.old is None or view(event.obj) != view(event.old)
    return predicate


def meta(obj: informer.Object, field: str) -> Any:
    """``metadata.<field>`` of an object (None when missing)."""
    return (obj.get("metadata") or {}).get(field)


def spec_and_deletion(obj: informer.Object) -> Any:
    """The spec and the deletion mark: what a status write leaves alone."""
    return obj.get("spec"), meta(obj, "deletionTimestamp")


SPEC: Predicate = changed(lambda obj: obj.get("spec"))
"""Ignore status writes (ours or another's): keep only a spec that changed."""
generation_changed: Predicate = changed(lambda obj: meta(obj, "generation"))
"""controller-runtime's ``GenerationChangedPredicate``."""


def not_modified(event: Event) -> bool:
    """Keep only additions and deletions."""
    return event.type != MODIFIED


def not_deleted(event: Event) -> bool:
    """Keep all but deletions."""
    return event.type != DELETED


def to_self(event: Event) -> Iterable[Request]:
    """The object itself (``for_``)."""
    return (Request.of(event.obj),)


def every(source: informer.Informer) -> MapFunc:
    """A map function: every object ``source`` holds, whatever the event (all concerned)."""
    def map_fn(event: Event) -> list[Request]:
        return [Request.parse(key) for key in list(source.store)]
    return map_fn


def by_name(lookup: Callable[[str], Iterable[str | Request]]) -> MapFunc:
    """A map function: what ``lookup(name)`` names for the object's name (keys are parsed).

    An index's answer to "what points at this object" (the MCIs located on a Cluster).
    """
    def map_fn(event: Event) -> list[Request]:
        return [found if isinstance(found, Request) else Request.parse(found)
                for found in lookup(str(event.obj["metadata"]["name"]))]
    return map_fn


class Index(Generic[K, V]):
    """What each object of a watch points at, and the objects pointing at a value.

    ``key(obj)`` names an object, ``values(obj)`` lists what it points at (a
    binding's target clusters, a Work's namespace); :meth:`observe` is an
    ``observe`` (it sees every event, status writes too); a deleted object
    points at nothing.
    """

    def __init__(self, key: Callable[[informer.Object], K],
                 values: Callable[[informer.Object], Iterable[V]]) -> None:
        self._key = key
        self._values = values
        self._on: dict[V, set[K]] = {}
        self._of: dict[K, frozenset[V]] = {}

    def observe(self, event: Event) -> None:
        """Follow one event."""
        wanted = frozenset() if event.type == DELETED else frozenset(self._values(event.obj))
        self.set(self._key(event.obj), wanted)

    def set(self, key: K, wanted: frozenset[V]) -> None:
        """Record that object ``key`` points at ``wanted`` (and nothing else)."""
        had = self._of.get(key, frozenset())
        for value in had - wanted:
            keys = self._on.get(value)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._on[value]
        for value in wanted - had:
            self._on.setdefault(value, set()).add(key)
        if wanted:
            self._of[key] = wanted
        else:
            self._of.pop(key, None)

    def on(self, value: V) -> frozenset[K]:
        """The objects pointing at ``value``."""
        return frozenset(self._on.get(value, ()))

    def of(self, key: K) -> frozenset[V]:
        """What object ``key`` points at."""
        return self._of.get(key, frozenset())


class Parsed(Generic[T]):
    """The objects of a watch, each parsed once per change, by request (an ``observe``).

    ``parse(obj)`` is the model, or None for an object not to use (malformed:
    ``parse`` says why); a deleted object is dropped.  ``key(obj)``: the request
    an object is kept under (:meth:`Request.of` by default).
    """

    def __init__(self, parse: Callable[[informer.Object], T | None],
                 key: Callable[[informer.Object], Request] = Request.of) -> None:
        self._parse = parse
        self._key = key
        self._parsed: dict[Request, T | None] = {}
        """By request, in the order first seen (None: not usable)."""

    def observe(self, event: Event) -> None:
        """Parse the object of one event again (or drop it when deleted)."""
        key = self._key(event.obj)
        if event.type == DELETED:
            self._parsed.pop(key, None)
        else:
            self._parsed[key] = self._parse(event.obj)

    def get(self, key: Request) -> T | None:
        """The parsed object kept under ``key``, or None."""
        return self._parsed.get(key)

    def values(self) -> list[T]:
        """Every usable parsed object, in the order first seen."""
        return [found for found in self._parsed.values() if found is not None]


@dataclasses.dataclass(frozen=True)
class StatusDeclaration:
    """A status writer to make before the workers start (``runner.Term.status_writer``)."""

    resource: resources.Resource
    field_manager: str
    fields: frozenset[str]
    condition_types: frozenset[str] = frozenset()
    nested: Mapping[str, frozenset[str]] = dataclasses.field(default_factory=dict)
    """Nested fields written, to the fields of their items (:attr:`status.StatusWriter.nested`)."""


@dataclasses.dataclass(frozen=True)
class Starting:
    """What a controller does between its caches loading and its workers starting."""

    resync: float | None = None
    resync_requests: Callable[[], Iterable[Request]] | None = None
    resync_before: Wait | None = None
    statuses: tuple[StatusDeclaration, ...] = ()
    on_start: tuple[Hook, ...] = ()
    start_after: Wait | None = None
    start_after_synced: bool = False
    """Whether the controller is synced only once ``start_after`` returned."""
    beside: tuple[Wait, ...] = ()
    on_stop: tuple[Hook, ...] = ()


class FirstPass:
    """The objects a controller had when its caches loaded, until each was reconciled once.

    Reconciled means attempted, whatever the outcome; a deleted object is done too.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.pending: set[str] = set()
        self.armed = False
        self.over = asyncio.Event()

    def arm(self, keys: Iterable[str]) -> None:
        """The caches have loaded: every one of ``keys`` is one to wait for."""
        self.pending = set(keys)
        self.armed = True
        self.done("")  # over at once when there is nothing

    def done(self, key: str) -> None:
        """``key`` was reconciled (or deleted)."""
        self.pending.discard(key)
        if self.armed and not self.pending:
            self.over.set()

    async def wait(self, timeout: float) -> None:
        """Until the first pass is over, at most ``timeout`` seconds (then say so)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self.over.wait()
        if not self.over.is_set():
            log.warning("%s: %d object(s) not reconciled after %.0fs; starting anyway",
                        self.name, len(self.pending), timeout)


@dataclasses.dataclass(frozen=True)
class Watch:
    """One declared source of requests."""

    informer: informer.Informer
    map: MapFunc
    predicates: tuple[Predicate, ...] = ()
    observe: Observer | None = None
    delay: float = 0.0
    """Seconds the requests wait in the queue (coalescing a burst of changes)."""
    on_deleted: Callable[[Request], object] | None = None
    """Told the request of each object deleted (after ``observe``, predicates aside)."""

    def requests(self, event: Event) -> Iterable[Request]:
        """The requests one event makes (none when a predicate drops it)."""
        if self.observe is not None:
            self.observe(event)
        if self.on_deleted is not None and event.type == DELETED:
            self.on_deleted(Request.of(event.obj))
        if all(p(event) for p in self.predicates):
            return self.map(event)
        return ()


class Controller:
    """A built controller: its declared informers, its queue and workers."""

    def __init__(self, name: str, term: runner.Term, watches: list[Watch],
                 reconciler: Reconcile, *, settings: reconcile.ControllerSettings,
                 on_terminal: OnTerminal | None, starting: Starting,
                 also_synced: list[informer.Informer]) -> None:
        self.name = name
        self.watches = watches
        self.term = term
        self.clock = term.clock
        self._reconcile = reconciler
        self._on_terminal = on_terminal
        self.starting = starting
        self.resync_period = starting.resync
        self.writers: dict[tuple[str, str], status.StatusWriter] = {}
        """The declared status writers by (resource plural, field manager), made in :meth:`run`."""
        self.first_pass: FirstPass | None = None
        """Followed when another controller starts after this one's first pass."""
        self.started = False
        """Whether the workers have started (``start_after`` returned)."""
        self.informers: list[informer.Informer] = []
        for cache in [w.informer for w in watches] + also_synced:
            if not any(cache is known for known in self.informers):
                self.informers.append(cache)
        self.runtime = reconcile.Controller(
            name, self._by_key, metrics=term.metrics.controllers, clock=term.clock,
            settings=settings, on_terminal=self._terminal if on_terminal else None)
        self.queue = self.runtime.queue
        for watch in watches:
            watch.informer.add_handler(self._handler(watch))

    def _handler(self, watch: Watch) -> informer.Handler:
        def handle(event: str, obj: informer.Object, old: informer.Object | None) -> None:
            if self.first_pass is not None and event == DELETED and watch is self.watches[0]:
                self.first_pass.done(Request.of(obj).key)
            for request in watch.requests(Event(event, obj, old)):
                if watch.delay:
                    self.runtime.enqueue_after(request.key, watch.delay)
                else:
                    self.runtime.enqueue(request.key)
        return handle

    async def _by_key(self, key: str) -> reconcile.Result | None:
        try:
            return await self._reconcile(Request.parse(key))
        finally:  # attempted, whatever the outcome
            if self.first_pass is not None:
                self.first_pass.done(key)

    async def _terminal(self, key: str, exc: reconcile.TerminalError) -> None:
        assert self._on_terminal is not None
        await self._on_terminal(Request.parse(key), exc)

    def watch(self, source: informer.Informer, map_fn: MapFunc, *predicates: Predicate) -> None:
        """Watch a kind found while running (a template kind met in a reconcile).

        Its cache is not part of :attr:`synced`: the reconcile that asked for it looks.
        """
        source.add_handler(self._handler(Watch(source, map_fn, predicates)))

    def enqueue(self, request: Request) -> None:
        """Reconcile ``request`` soon."""
        self.runtime.enqueue(request.key)

    def enqueue_after(self, request: Request, delay: float) -> None:
        """Reconcile ``request`` after ``delay`` seconds (the earliest request wins)."""
        self.runtime.enqueue_after(request.key, delay)

    @property
    def synced(self) -> bool:
        """Whether every declared informer has loaded (and ``start_after``, if it says so)."""
        return (all(cache.synced for cache in self.informers)
                and (self.started or not self.starting.start_after_synced))

    def follow_first_pass(self) -> FirstPass:
        """Follow this controller's first pass (over the ``for_`` kind); call before :meth:`run`."""
        if self.first_pass is None:
            self.first_pass = FirstPass(self.name)
        return self.first_pass

    def writer(self, resource: resources.Resource,
               field_manager: str | None = None) -> status.StatusWriter:
        """The declared status writer of ``resource`` (of ``field_manager``, where several).

        Made by :meth:`run` before any reconcile; asked earlier, a RuntimeError.
        """
        for (plural, manager), found in self.writers.items():
            if plural == resource.plural and field_manager in (None, manager):
                return found
        raise RuntimeError(f"{self.name}: no status writer of {resource.plural} made yet")

    def _resync_keys(self) -> Iterable[str]:
        if self.starting.resync_requests is not None:
            return [r.key for r in self.starting.resync_requests()]
        return list(self.watches[0].informer.store) if self.watches else []

    async def _resync(self, period: float) -> None:
        while True:
            await self.clock.sleep(period)
            if self.starting.resync_before is not None:
                await self.starting.resync_before()
            for key in self._resync_keys():
                self.runtime.enqueue(key)

    async def _workers(self) -> None:
        if self.starting.start_after is not None:
            await self.starting.start_after()
        self.started = True
        await self.runtime.run()

    async def wait_synced(self) -> None:
        """Wait until every declared informer has loaded."""
        for cache in self.informers:
            await cache.wait_synced()

    async def run(self) -> None:
        """Make the status writers, wait for every declared informer, start, reconcile.

        Until cancelled: the ``on_start`` hooks run once the caches have loaded, the
        workers once ``start_after`` returned, the resync and ``beside`` work beside
        them; the ``on_stop`` hooks once it ends.
        """
        try:
            if not self.starting.beside:
                await self._run()
                return
            async with asyncio.TaskGroup() as group:
                for work in self.starting.beside:
                    group.create_task(_awaited(work), name=f"{self.name}-beside")
                group.create_task(self._run(), name=f"{self.name}-run")
        finally:
            for hook in self.starting.on_stop:
                result = hook()
                if inspect.isawaitable(result):
                    await result

    async def _run(self) -> None:
        for declared in self.starting.statuses if self.term.writes else ():
            key = (declared.resource.plural, declared.field_manager)
            self.writers[key] = await self.term.status_writer(
                declared.resource, declared.field_manager, declared.fields,
                declared.condition_types, declared.nested)
        await self.wait_synced()
        if self.first_pass is not None and self.watches:
            self.first_pass.arm(self.watches[0].informer.store)
        for hook in self.starting.on_start:
            hook()
        if self.resync_period is None:
            await self._workers()
            return
        async with asyncio.TaskGroup() as group:
            group.create_task(self._resync(self.resync_period), name=f"{self.name}-resync")
            group.create_task(self._workers(), name=f"{self.name}-workers")


async def _awaited(work: Wait) -> None:
    await work()


class Builder:
    """Declare a controller: ``for_``, ``owns``, ``watches``, then :meth:`complete`."""

    def __init__(self, name: str, term: runner.Term, *, workers: int = 2,
                 settings: reconcile.ControllerSettings | None = None) -> None:
        self.name = name
        self.term = term
        self.settings = settings or reconcile.ControllerSettings(workers=workers)
        self._watches: list[Watch] = []
        self._also: list[informer.Informer] = []
        self._starting = Starting()
        self._channel = False
        self._on_terminal: OnTerminal | None = None

    def _informer(self, source: resources.Resource | informer.Informer) -> informer.Informer:
        if isinstance(source, resources.Resource):
            return self.term.informers.informer(source)
        return source

    def for_(self, source: Sources, *predicates: Predicate,
             observe: Observer | None = None, delay: float = 0.0,
             on_deleted: Callable[[Request], object] | None = None) -> Builder:
        """The kind this controller reconciles: each of its objects is a request."""
        return self.watches(source, to_self, *predicates, observe=observe, delay=delay,
                            on_deleted=on_deleted)

    def owns(self, source: Sources,
             owner: Callable[[informer.Object], Request | None], *predicates: Predicate,
             observe: Observer | None = None) -> Builder:
        """A kind this controller makes: a change requests its owner (``owner(obj)``)."""
        def to_owner(event: Event) -> Iterable[Request]:
            found = owner(event.obj)
            return () if found is None else (found,)
        return self.watches(source, to_owner, *predicates, observe=observe)

    def watches(self, source: Sources, map_fn: MapFunc,
                *predicates: Predicate, observe: Observer | None = None,
                delay: float = 0.0,
                on_deleted: Callable[[Request], object] | None = None) -> Builder:
        """Any other kind: ``map_fn(event)`` says which requests a change makes.

        ``delay``: the requests wait that long in the queue (the earliest wins).
        ``on_deleted(request)``: called for each object deleted, after ``observe``,
        whatever the predicates say (forget what was kept for it).
        A tuple of sources: each watched the same way, in that order.
        """
        for one in source if isinstance(source, tuple) else (source,):
            self._watches.append(Watch(self._informer(one), map_fn, predicates, observe, delay,
                                       on_deleted))
        return self

    def uses(self, source: resources.Resource | informer.Informer) -> Builder:
        """A cache the reconcile reads without watching it: waited for, part of ``synced``."""
        self._also.append(self._informer(source))
        return self

    def resync(self, period: float, requests: Callable[[], Iterable[Request]] | None = None,
               before: Wait | None = None) -> Builder:
        """Queue every object of the ``for_`` kind (or ``requests()``) again each ``period``.

        ``before``: awaited each period before the requests are queued.
        """
        self._starting = dataclasses.replace(self._starting, resync=period,
                                             resync_requests=requests, resync_before=before)
        return self

    def status(self, resource: resources.Resource | tuple[resources.Resource, ...],
               field_manager: str, fields: frozenset[str],
               condition_types: frozenset[str] = frozenset(), *,
               nested: Mapping[str, frozenset[str]] | None = None) -> Builder:
        """A status writer of ``resource`` (of each, for a tuple), made before the workers start.

        None when the term does not write.  ``nested``: nested fields written, by dotted
        path, to the fields written in each item; one the server cannot take is left out
        of every write (:attr:`status.StatusWriter.nested`).
        """
        declared = tuple(StatusDeclaration(one, field_manager, fields, condition_types,
                                           dict(nested or {}))
                         for one in (resource if isinstance(resource, tuple) else (resource,)))
        self._starting = dataclasses.replace(
            self._starting, statuses=(*self._starting.statuses, *declared))
        return self

    def on_start(self, hook: Hook) -> Builder:
        """Call ``hook()`` once the caches have loaded, before the workers start."""
        self._starting = dataclasses.replace(
            self._starting, on_start=(*self._starting.on_start, hook))
        return self

    def start_after(self, wait: Wait, *, synced: bool = False) -> Builder:
        """Start the workers only once ``await wait()`` returned.

        ``synced``: the controller is synced only once it returned, too.
        """
        self._starting = dataclasses.replace(self._starting, start_after=wait,
                                             start_after_synced=synced)
        return self

    def start_after_first_pass(self, other: Controller, timeout: float) -> Builder:
        """Start the workers once ``other`` has had its first pass, or after ``timeout`` s.

        The first pass: every object of ``other``'s ``for_`` kind known when its caches
        loaded reconciled once (or deleted); a timeout is logged.
        """
        return self.start_after(functools.partial(other.follow_first_pass().wait, timeout))

    def beside(self, work: Wait) -> Builder:
        """Run ``await work()`` beside the controller, from its start to its end."""
        self._starting = dataclasses.replace(self._starting,
                                             beside=(*self._starting.beside, work))
        return self

    def on_stop(self, hook: Hook) -> Builder:
        """Call ``hook()`` once the controller stops (awaited if it returns an awaitable)."""
        self._starting = dataclasses.replace(
            self._starting, on_stop=(*self._starting.on_stop, hook))
        return self

    def channel(self) -> Builder:
        """Requests come from :meth:`Controller.enqueue` alone (``source.Channel``)."""
        self._channel = True
        return self

    def on_terminal(self, hook: OnTerminal) -> Builder:
        """How a :class:`reconcile.TerminalError` is reported (a condition, an Event)."""
        self._on_terminal = hook
        return self

    def complete(self, reconciler: Reconcile) -> Controller:
        """The controller, its handlers registered on the informers."""
        if not self._watches and not self._channel:
            raise ValueError(f"controller {self.name} watches nothing: declare for_() first")
        return Controller(self.name, self.term, list(self._watches), reconciler,
                          settings=self.settings, on_terminal=self._on_terminal,
                          starting=self._starting, also_synced=list(self._also))


class Declared:
    """A controller class whose wiring is a :class:`Controller` in ``self.controller``.

    Or several (one per kind, or a queue another one feeds) in ``self.controllers``,
    run together.
    """

    controller: Controller
    controllers: tuple[Controller, ...] = ()

    def __init__(self, term: runner.Term) -> None:
        """The term's client, clock and Event recorder, taken once for every controller."""
        self.term = term
        self.api = term.api
        self.clock = term.clock
        self.recorder = term.recorder

    def _declared(self) -> tuple[Controller, ...]:
        return self.controllers or (self.controller,)

    @property
    def synced(self) -> bool:
        """Whether the declared caches have loaded."""
        return all(c.synced for c in self._declared())

    async def run(self) -> None:
        """Reconcile until cancelled."""
        declared = self._declared()
        if len(declared) == 1:
            await declared[0].run()
            return
        async with asyncio.TaskGroup() as group:
            for controller in declared:
                group.create_task(controller.run(), name=controller.name)
