"""Clients for member clusters, one per Cluster, built from what Karmada's API says.

A ``Cluster`` names its API server (``spec.apiEndpoint``), the Secret with
its credentials (``spec.secretRef``: ``caBundle`` and ``token``), whether to
skip TLS verification, and how to get there (``spec.proxyURL`` with
``spec.proxyHeader``).  Every controller that talks to members gets its
clients here, so they are built, shared and refreshed one way:

* one :class:`~clusterhealth_core.kube.client.ApiClient` (one connection
  pool) per member, reused by every caller;
* rebuilt when any of the above changes, when the Secret changes (seen
  through an informer on the Secrets' namespace, or on the next
  :meth:`MemberClients.get` without one), and after the member answered 401
  (a rotated token);
* listeners hear which member's client was replaced, so they can restart
  watches that still use the old one;
* a replaced client is *retired*: closed (and sealed: a holder that still
  tries it gets ``errors.ClientClosed``) once nothing is in flight through
  it, i.e. once its users have moved to the new one, or after
  ``retire_grace`` at the latest (:meth:`MemberClients.run`);
* with the Clusters' informer, a deleted Cluster is forgotten: the forget
  handlers stop what their owners keep for it (watches, caches), then its
  client is retired, and no client is built for a Cluster that is gone;
* every client is bounded (:data:`LIMITS`: a request deadline, response
  caps, a few requests at once, see ``docs/core.md``) so that one member
  cannot stall or flood the callers shared by all members, and every write
  asks the control-plane client's guard first: member writes are fenced by
  leadership exactly as control-plane writes are.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Generic, TypeVar

from clusterhealth_core import clock as clocks
from clusterhealth_core import events, retry
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import config, discovery, errors, informer, resources

log = logging.getLogger(__name__)

Listener = Callable[[str], None]
"""``listener(cluster_name)`` after that member's client was invalidated."""
ForgetHandler = Callable[[str], Awaitable[None]]
"""``await handler(cluster_name)`` once that Cluster is deleted: stop using its client."""
REQUEST_TIMEOUT = 30.0
"""Seconds one call to a member may take (Karmada's member clients: 32 s)."""
CONCURRENT_REQUESTS = 2
"""Requests (watches aside) to one member at once; keep it below the workers of the
controllers that share the pool, so that a hung member holds only that many."""
STALL_AFTER = 2.0
"""A member whose requests holding every slot have been in flight this long is stuck, not
busy (a healthy API server answers a write in milliseconds): further requests fail at once
instead of holding a worker while they wait for a slot."""
LIMITS = kube.Limits(request_timeout=REQUEST_TIMEOUT, max_in_flight=CONCURRENT_REQUESTS,
                     stall_after=STALL_AFTER)
RETIRE_GRACE = 120.0
"""A replaced client still in use after this long is closed anyway (its users did not move:
two watch periods, four member request deadlines)."""
SWEEP_INTERVAL = 1.0
MEMBER_NOT_WATCHED = "MemberNotWatched"
"""The Warning Event reason on a Cluster whose member cannot be watched
(:class:`MemberInformers`; e.g. no credentials Secret)."""
READONLY = "readonly"
"""Credentials of the caller's own identity (e.g. the MCI provider's read-only one): the
Secret named like the Cluster in a namespace of the caller's (``own_secrets``)."""
CLUSTER = "cluster"
"""Each Cluster's own ``spec.secretRef`` credentials (Karmada's controllers' way)."""
MODES = (READONLY, CLUSTER)
"""Whose credentials read the members."""


@dataclasses.dataclass(frozen=True)
class Access:
    """Everything about a Cluster that decides how its client is built."""

    endpoint: str
    secret_namespace: str
    secret_name: str
    insecure: bool
    proxy_url: str | None
    proxy_header: tuple[tuple[str, str], ...]

    @property
    def secret_key(self) -> str:
        """``namespace/name`` of the credentials Secret (an informer key)."""
        return f"{self.secret_namespace}/{self.secret_name}"


def access_of(cluster: Mapping[str, Any], own_secrets: str | None = None) -> Access | None:
    """How to reach the member, or ``None`` when the Cluster lacks an endpoint or a Secret.

    ``own_secrets`` (:data:`READONLY` credentials): the Secret named like the
    Cluster in that namespace stands in for its ``spec.secretRef``, never read.
    """
    spec = cluster.get("spec") or {}
    ref = spec.get("secretRef") or {}
    if own_secrets is not None:
        ref = {"namespace": own_secrets, "name": (cluster.get("metadata") or {}).get("name")}
    if not spec.get("apiEndpoint") or not ref.get("name"):
        return None
    headers = spec.get("proxyHeader") or {}
    return Access(
        endpoint=str(spec["apiEndpoint"]),
        secret_namespace=str(ref.get("namespace", "")),
        secret_name=str(ref["name"]),
        insecure=bool(spec.get("insecureSkipTLSVerification", False)),
        proxy_url=str(spec["proxyURL"]) if spec.get("proxyURL") else None,
        proxy_header=tuple(sorted((str(k), str(v)) for k, v in headers.items())),
    )


@dataclasses.dataclass
class _Entry:
    access: Access
    secret_version: str
    api: kube.ApiClient
    stale: bool = False


class MemberClients:
    """The pool: ``await pool.get(cluster)`` returns that member's client.

    The clients' writes are guarded by ``control_plane``'s guard (a fenced
    term client gives fenced member clients).
    """

    def __init__(
        self,
        control_plane: kube.ApiClient,
        *,
        secrets: informer.Informer | None = None,
        clusters: informer.Informer | None = None,
        user_agent: str = "clusterhealth",
        timeout: float = 10.0,
        limits: kube.Limits = LIMITS,
        clock: clocks.Clock | None = None,
        retire_grace: float = RETIRE_GRACE,
        secret_namespace: str | None = None,
        own_secrets: str | None = None,
    ) -> None:
        self.control_plane = control_plane
        self.own_secrets = own_secrets
        """:data:`READONLY` credentials: the namespace of the Secrets named like the Clusters
        that stand in for their ``spec.secretRef`` (which is then never read)."""
        self.secrets = secrets
        self.clusters = clusters
        self.secret_namespace = secret_namespace
        """The one namespace credentials are read from (None: any): a Cluster whose
        ``secretRef`` points elsewhere is refused, never read."""
        self.user_agent = user_agent
        self.timeout = timeout
        self.limits = limits
        self.clock = clock or clocks.Clock()
        self.retire_grace = retire_grace
        self._entries: dict[str, _Entry] = {}
        self._listeners: list[Listener] = []
        self._forget_handlers: list[ForgetHandler] = []
        self._retired: dict[kube.ApiClient, float] = {}
        """Replaced clients -> when they were replaced."""
        self._gone: set[str] = set()
        self._wake = asyncio.Event()
        if secrets is not None:
            secrets.add_handler(self._on_secret)
        if clusters is not None:
            clusters.add_handler(self._on_cluster)

    def add_listener(self, listener: Listener) -> None:
        """Be told when a member's client is invalidated."""
        self._listeners.append(listener)

    def add_forget_handler(self, handler: ForgetHandler) -> None:
        """Be awaited when a Cluster is forgotten, before its client is retired."""
        self._forget_handlers.append(handler)

    @property
    def size(self) -> tuple[int, int]:
        """``(current clients, retired clients not closed yet)``."""
        return len(self._entries), len(self._retired)

    def _on_cluster(self, event: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event == "DELETED":
            self._gone.add(str(obj["metadata"]["name"]))
            self._wake.set()

    def _notify(self, name: str) -> None:
        for listener in self._listeners:
            try:
                listener(name)
            except Exception:  # a listener bug must not break the pool
                log.exception("member client listener failed for %s", name)

    def invalidate(self, name: str, why: str) -> None:
        """Rebuild ``name``'s client on the next :meth:`get`; tell the listeners."""
        entry = self._entries.get(name)
        if entry is None or entry.stale:
            return
        entry.stale = True
        log.info("member %s: client to be rebuilt (%s)", name, why)
        self._notify(name)

    def _refused(self, name: str, made: list[kube.ApiClient]) -> None:
        """A 401 through ``made[0]``: rebuild, unless that client was already replaced.

        A retired client still in use must not invalidate its fresh successor.
        """
        entry = self._entries.get(name)
        if entry is not None and made and entry.api is made[0]:
            self.invalidate(name, "401 from member")

    def _on_secret(self, event: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        key = informer.key_of(obj)
        version = str(obj["metadata"].get("resourceVersion", ""))
        for name, entry in list(self._entries.items()):
            if entry.access.secret_key == key and (
                    event == "DELETED" or version != entry.secret_version):
                self.invalidate(name, f"Secret {key} {event.lower()}")

    async def _secret(self, access: Access) -> Mapping[str, Any]:
        if self.secrets is not None and self.secrets.synced:
            found = self.secrets.store.get(access.secret_key)
            if found is None:
                raise errors.ConfigError(f"Secret {access.secret_key} does not exist")
            return found
        return await self.control_plane.get(resources.SECRETS, access.secret_name,
                                            namespace=access.secret_namespace)

    def access(self, cluster: Mapping[str, Any]) -> Access | None:
        """How this pool reaches the member (see :func:`access_of`)."""
        return access_of(cluster, self.own_secrets)

    def refusal(self, cluster: Mapping[str, Any]) -> str | None:
        """Why no client is built for ``cluster`` whatever the Secret says, if it is refused."""
        name = str(cluster["metadata"]["name"])
        access = self.access(cluster)
        if access is None:
            return f"cluster {name}: no spec.apiEndpoint or spec.secretRef"
        if self.secret_namespace is not None and access.secret_namespace != self.secret_namespace:
            return (f"cluster {name}: spec.secretRef names Secret {access.secret_key}, outside "
                    f"{self.secret_namespace}, the only namespace member credentials are read "
                    "from; refused (move the Secret there)")
        return None

    def peek(self, name: str) -> kube.ApiClient | None:
        """The current client of ``name``, if one is built and not stale."""
        entry = self._entries.get(name)
        return entry.api if entry is not None and not entry.stale else None

    async def get(self, cluster: Mapping[str, Any]) -> kube.ApiClient:
        """The member's client; built (or rebuilt) when needed.

        Raises :class:`~clusterhealth_core.kube.errors.ConfigError` when the
        Cluster lacks an endpoint or its credentials are unusable, and other
        :class:`~clusterhealth_core.kube.errors.KubeError` when the Secret
        cannot be read; the message names the cluster.
        """
        name = str(cluster["metadata"]["name"])
        refused = self.refusal(cluster)
        if refused is not None:
            raise errors.ConfigError(refused)
        access = self.access(cluster)
        assert access is not None  # refused otherwise
        entry = self._entries.get(name)
        if entry is not None and not entry.stale and entry.access == access:
            return entry.api
        if self.clusters is not None and self.clusters.synced and (
                name in self._gone or self.clusters.store.get(name) is None):
            raise errors.ConfigError(f"cluster {name} no longer exists")
        try:
            secret = await self._secret(access)
            credentials = config.from_cluster_secret(
                access.endpoint, secret, access.insecure, proxy_url=access.proxy_url,
                proxy_headers=dict(access.proxy_header))
            made: list[kube.ApiClient] = []
            api = kube.ApiClient(credentials, user_agent=self.user_agent, timeout=self.timeout,
                                 on_unauthorized=lambda: self._refused(name, made),
                                 limits=self.limits, name=f"cluster {name}",
                                 max_connections=None, guard=self.control_plane.guard)
            made.append(api)
        except errors.ConfigError as exc:
            raise errors.ConfigError(f"cluster {name}: {exc}") from exc
        current = self._entries.get(name)  # another caller may have built one meanwhile
        if current is not None:
            self._retire(current.api)
        self._entries[name] = _Entry(access, str(secret.get("metadata", {}).get(
            "resourceVersion", "")), api)
        return api

    def _retire(self, api: kube.ApiClient) -> None:
        self._retired.setdefault(api, self.clock.monotonic())
        self._wake.set()

    async def forget(self, name: str) -> None:
        """Drop ``name``'s client: the Cluster is gone.

        The forget handlers run first, then the client is retired (closed at
        once when nothing is in flight through it).
        """
        self._gone.discard(name)
        for handler in list(self._forget_handlers):
            try:
                await handler(name)
            except asyncio.CancelledError:
                raise
            except Exception:  # one owner's bug must not keep the others' state
                log.exception("member %s: a forget handler failed", name)
        entry = self._entries.pop(name, None)
        if entry is not None:
            log.info("member %s: client dropped (the Cluster is gone)", name)
            self._retire(entry.api)
        await self.release_retired()

    async def release_retired(self, *, force: bool = False) -> None:
        """Close the replaced clients nothing uses any more (all of them with ``force``).

        A client still busy after ``retire_grace`` is closed too: whoever
        still reads through it gets ``errors.ClientClosed`` and must ask the
        pool again.
        """
        now = self.clock.monotonic()
        for api, since in list(self._retired.items()):
            overdue = now - since >= self.retire_grace
            if not (force or overdue or not api.busy):
                continue
            if overdue and api.busy and not force:
                log.warning("%s: a replaced client still in use after %gs; closing it",
                            api.name, self.retire_grace)
            del self._retired[api]
            api.seal(f"{api.name}: this client was replaced or its Cluster deleted")
            await api.close()

    async def run(self) -> None:
        """Until cancelled: forget deleted Clusters, close retired clients once idle."""
        while True:
            for name in sorted(self._gone):
                await self.forget(name)
            await self.release_retired()
            self._wake.clear()
            if self._gone:
                continue
            wait = SWEEP_INTERVAL if self._retired else None
            try:
                async with asyncio.timeout(wait):
                    await self._wake.wait()
            except TimeoutError:
                pass

    async def close(self) -> None:
        """Close every client."""
        for name, entry in list(self._entries.items()):
            del self._entries[name]
            self._retire(entry.api)
        await self.release_retired(force=True)


# --- informers in the members -------------------------------------------------------------

class Watched:
    """One member's informers, through one client of the pool.

    Subclass it to declare the informers (on :attr:`factory`, in ``__init__``)
    and to answer questions from them; :class:`MemberInformers` starts,
    swaps and stops it.
    """

    def __init__(self, name: str, api: kube.ApiClient, *, settings: informer.InformerSettings,
                 clock: clocks.Clock) -> None:
        self.name = name
        self.api = api
        self.factory = informer.InformerFactory(api, settings=settings, clock=clock)
        self.active = False
        """Whether it answers for the member (and reports its changes)."""

    async def stop(self) -> None:
        """Stop the informers (the client belongs to the pool)."""
        self.active = False
        await self.factory.stop()


W = TypeVar("W", bound=Watched)
MakeWatched = Callable[[str, kube.ApiClient], W]
"""``make(cluster, client)``: a new :class:`Watched` of that member, not started."""
RETRY = retry.Backoff(initial=1.0, factor=2.0, maximum=60.0, jitter=0.2, attempts=1_000_000)
"""How often a member whose client cannot be built is tried again."""


class MemberInformers(Generic[W]):
    """One active :class:`Watched` per Cluster of ``pool.clusters`` whose client can be built.

    Each member is (re)checked when marked (:meth:`mark`): when its Cluster
    changes (the owner marks it), when its Secret changes, and when the pool
    replaces its client.  A new client gets a new :class:`Watched`; the old one
    keeps answering until the new one has loaded, so a credential rotation
    never empties a member's caches for a moment.  A member that cannot be
    watched is reported (:attr:`problems`, the log, and a Warning
    :data:`MEMBER_NOT_WATCHED` Event on its Cluster); one whose client cannot
    be built is tried again with backoff.  Nothing runs before :meth:`start`.
    """

    def __init__(
        self,
        pool: MemberClients,
        make: MakeWatched[W],
        *,
        clock: clocks.Clock,
        on_change: Listener,
        recorder: events.EventRecorder | None = None,
        backoff: retry.Backoff = RETRY,
        missing_secret_hint: str = "",
    ) -> None:
        if pool.clusters is None:
            raise ValueError("MemberInformers needs a pool with the Clusters' informer")
        self.pool = pool
        self.clusters: informer.Informer = pool.clusters
        self.make = make
        self.clock = clock
        self.on_change = on_change
        """``on_change(cluster)`` when everything known of the member may have changed."""
        self.recorder = recorder
        self.backoff = backoff
        self.missing_secret_hint = missing_secret_hint
        """Appended to the problem of a Cluster whose credentials Secret does not exist."""
        self.active: dict[str, W] = {}
        self.problems: dict[str, str] = {}
        """Cluster -> why it is not watched."""
        self._pending: dict[str, tuple[W, asyncio.Task[None]]] = {}
        self._failures: dict[str, int] = {}
        self._rebuilds: dict[str, int] = {}
        """Watches built for a member since one last loaded (a client refused at once)."""
        self._built_at: dict[str, float] = {}
        self._retries: dict[str, asyncio.Task[None]] = {}
        self._syncing: dict[str, asyncio.Task[None]] = {}
        self._dirty: set[str] = set()
        self._started = False
        pool.add_listener(self.mark)
        pool.add_forget_handler(self._forgotten)
        if pool.secrets is not None:
            pool.secrets.add_handler(self._on_secret)

    # --- what changed -------------------------------------------------------------

    def mark(self, name: str, *, fresh: bool = False) -> None:
        """Check member ``name`` again (its Cluster changed, or its client was invalidated).

        ``fresh``: its Cluster or its Secret changed, so a new client may work
        where the last ones were refused: rebuild at once, not after a backoff.
        """
        if fresh:
            self._rebuilds.pop(name, None)
        self._dirty.add(name)
        if self._started and name not in self._syncing:
            self._syncing[name] = asyncio.create_task(self._sync_marked(name),
                                                      name=f"member-{name}-sync")

    def _on_secret(self, event: str, obj: dict[str, Any], old: object) -> None:
        key = informer.key_of(obj)
        for cluster in list(self.clusters.store.values()):
            access = self.pool.access(cluster)
            if access is not None and access.secret_key == key:
                self.mark(str(cluster["metadata"]["name"]), fresh=True)

    def mark_all(self) -> None:
        """Check every member again."""
        for name in {*self.clusters.store, *self.active, *self._pending}:
            self.mark(name)

    async def start(self) -> None:
        """Start watching every Cluster; return once each has been tried (not loaded)."""
        self._started = True
        self.mark_all()
        await asyncio.gather(*(asyncio.shield(t) for t in list(self._syncing.values())),
                             return_exceptions=True)

    # --- keeping watches ----------------------------------------------------------

    async def _sync_marked(self, name: str) -> None:
        try:
            while name in self._dirty:
                self._dirty.discard(name)
                try:
                    await self._sync(name)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # a bug here must not stop the other members
                    log.exception("member %s: could not update its watches", name)
                    self._failed(name, f"cluster {name}: {exc}")
        finally:
            self._syncing.pop(name, None)

    def _problem(self, cluster: Mapping[str, Any]) -> str | None:
        refused = self.pool.refusal(cluster)
        access = self.pool.access(cluster)
        secrets = self.pool.secrets
        if (refused is None and access is not None and secrets is not None and secrets.synced
                and access.secret_key not in secrets.store):
            return (f"cluster {cluster['metadata']['name']}: not watched, the Secret "
                    f"{access.secret_key} does not exist{self.missing_secret_hint}")
        return refused

    async def _sync(self, name: str) -> None:
        cluster = self.clusters.store.get(name)
        problem = self._problem(cluster) if cluster is not None else None
        if cluster is None or problem is not None:
            await self._drop(name)
            if problem is not None:
                self._report(name, problem)
            return
        try:
            api = await self.pool.get(cluster)
        except (errors.KubeError, OSError) as exc:
            self._failed(name, str(exc))
            return
        self._failures.pop(name, None)
        self.problems.pop(name, None)
        pending = self._pending.get(name)
        current = pending[0] if pending is not None else self.active.get(name)
        if current is not None and current.api is api:
            return
        # A client refused (401) right after it was built would be rebuilt in a tight loop:
        # until a member's watches load (or its Cluster or Secret changes), rebuilds back off.
        rebuilds = self._rebuilds.get(name, 0)
        if rebuilds:
            wait = (self._built_at[name] + self.backoff.delay(min(rebuilds - 1, 16))
                    - self.clock.monotonic())
            if wait > 0:
                self._later(name, wait)
                return
        self._rebuilds[name] = rebuilds + 1
        self._built_at[name] = self.clock.monotonic()
        await self._cancel_pending(name)
        watched = self.make(name, api)
        watched.factory.start()
        self._pending[name] = (watched, asyncio.create_task(self._activate(watched),
                                                            name=f"member-{name}-load"))
        log.info("member %s: watching %s through %s", name,
                 ", ".join(i.resource.plural for i in watched.factory.informers),
                 "a new client" if name in self.active else "its client")

    async def _activate(self, watched: W) -> None:
        """Once ``watched`` has loaded, make it answer for its member; stop the one it replaces."""
        await watched.factory.wait_synced()
        name = watched.name
        self._pending.pop(name, None)
        self._rebuilds.pop(name, None)
        old = self.active.get(name)
        self.active[name] = watched
        watched.active = True
        if old is not None:
            await old.stop()
        if not self._pending:  # no old watch still reads through a replaced client
            await self.pool.release_retired()
        self.on_change(name)

    async def _cancel_pending(self, name: str) -> None:
        pending = self._pending.pop(name, None)
        if pending is not None:
            watched, task = pending
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await watched.stop()

    async def _forgotten(self, name: str) -> None:
        """The pool forgets ``name`` (its Cluster is gone): stop its watches first."""
        await self._cancel_pending(name)
        for state in (self.problems, self._failures, self._rebuilds, self._built_at):
            state.pop(name, None)
        old = self.active.pop(name, None)
        if old is not None:
            await old.stop()
            log.info("member %s: no longer watched", name)
            self.on_change(name)

    async def _drop(self, name: str) -> None:
        await self._forgotten(name)
        await self.pool.forget(name)

    def _report(self, name: str, problem: str) -> None:
        if self.problems.get(name) != problem:
            log.warning("%s", problem)
            cluster = self.clusters.store.get(name)
            if self.recorder is not None and cluster is not None:
                self.recorder.record({"apiVersion": resources.CLUSTERS.api_version,
                                      "kind": resources.CLUSTERS.kind, **cluster},
                                     "Warning", MEMBER_NOT_WATCHED, problem)
        self.problems[name] = problem

    def _failed(self, name: str, problem: str) -> None:
        self._report(name, problem)
        failures = self._failures.get(name, 0)
        self._failures[name] = failures + 1
        self._later(name, self.backoff.delay(min(failures, 16)))

    def _later(self, name: str, delay: float) -> None:
        if name not in self._retries:
            self._retries[name] = asyncio.create_task(self._retry(name, delay),
                                                      name=f"member-{name}-retry")

    async def _retry(self, name: str, delay: float) -> None:
        try:
            await self.clock.sleep(delay)
        finally:
            self._retries.pop(name, None)
        self.mark(name)

    async def wait_loaded(self, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds) until every member being loaded is active."""
        tasks = [task for _, task in self._pending.values()]
        if tasks:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await asyncio.gather(*(asyncio.shield(t) for t in tasks),
                                         return_exceptions=True)

    async def close(self) -> None:
        """Stop every member's watches (the pool's clients are closed by its owner)."""
        self._started = False
        tasks = [*self._syncing.values(), *self._retries.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for name in list(self._pending):
            await self._cancel_pending(name)
        for watched in self.active.values():
            await watched.stop()
        self.active.clear()


# --- informers on kinds asked for, in the members -----------------------------------------

ObjectListener = Callable[[str, str, dict[str, Any] | None, dict[str, Any] | None], None]
"""``listener(cluster, event, obj, old)`` of :class:`MemberKinds`; ``event`` "" (with no
objects) means: everything of that member may have changed (its client was replaced)."""


class Kinds(Watched):
    """One member's informers on the kinds asked for (:meth:`watch`), all on one label selector.

    Kinds are resolved through the member's own :attr:`discovery`; every event of every
    informer goes to ``emit(cluster, event, obj, old)``.
    """

    def __init__(self, name: str, api: kube.ApiClient, *, settings: informer.InformerSettings,
                 clock: clocks.Clock, label_selector: str | None,
                 emit: ObjectListener) -> None:
        super().__init__(name, api, settings=settings, clock=clock)
        self.discovery = discovery.Discovery(api)
        self.label_selector = label_selector
        self._emit = emit

    def watch(self, resource: resources.Resource) -> informer.Informer:
        """The informer on ``resource`` (made, with its handler, on first use)."""
        before = len(self.factory.informers)
        made = self.factory.informer(resource, label_selector=self.label_selector)
        if len(self.factory.informers) != before:
            made.add_handler(lambda event, obj, old: self._emit(self.name, event, obj, old))
            log.info("member %s: watching %s", self.name, resource.plural)
        return made

    def get(self, resource: resources.Resource, namespace: str | None,
            name: str) -> dict[str, Any] | None:
        """The cached object, if ``resource`` is watched and the object there."""
        for cache in self.factory.informers:
            if cache.resource == resource:
                return cache.store.get(f"{namespace}/{name}" if namespace else name)
        return None


class MemberKinds(MemberInformers[Kinds]):
    """:class:`MemberInformers` started on demand: a member's :class:`Kinds`, kind by kind.

    Nothing is watched until a caller asks (:meth:`client`, :meth:`resource`,
    :meth:`watch`): then that member gets a :class:`Kinds` on the pool's
    current client, and an informer per kind asked for.  When the pool
    replaces the member's client, the listeners hear ``(cluster, "", None,
    None)`` at once and the informers move onto the new client the next time
    a caller asks (the old ones stop then, the new ones load afresh).  A
    forgotten Cluster's informers stop.  A client that cannot be built is the
    caller's error: there is no background retry and no Event here.
    """

    def __init__(self, pool: MemberClients, *, clock: clocks.Clock,
                 label_selector: str | None = None,
                 settings: informer.InformerSettings | None = None) -> None:
        self.settings = settings or informer.InformerSettings()
        self.label_selector = label_selector
        self._listeners: list[ObjectListener] = []
        super().__init__(pool, self._make, clock=clock,
                         on_change=lambda name: self._emit(name, "", None, None))

    def _make(self, name: str, api: kube.ApiClient) -> Kinds:
        return Kinds(name, api, settings=self.settings, clock=self.clock,
                     label_selector=self.label_selector, emit=self._emit)

    def add_listener(self, listener: ObjectListener) -> None:
        """Hear every change of a watched member object (and every replaced client)."""
        self._listeners.append(listener)

    def _emit(self, cluster: str, event: str, obj: dict[str, Any] | None,
              old: dict[str, Any] | None) -> None:
        for listener in self._listeners:
            try:
                listener(cluster, event, obj, old)
            except Exception:  # one listener's bug must not starve the others
                log.exception("member object listener failed for %s", cluster)

    def mark(self, name: str, *, fresh: bool = False) -> None:
        """The pool invalidated ``name``'s client: tell the listeners; rebuild when asked."""
        self.on_change(name)

    def _on_secret(self, event: str, obj: dict[str, Any], old: object) -> None:
        """Nothing: the pool invalidates the client of a changed Secret (:meth:`mark`)."""

    async def start(self) -> None:
        """Nothing to start: a member is watched once a caller asks for it."""
        self._started = True

    async def _forgotten(self, name: str) -> None:
        watched = self.active.pop(name, None)
        if watched is not None:
            await watched.stop()

    async def client(self, cluster: Mapping[str, Any]) -> kube.ApiClient:
        """The member's client (its informers moved onto it if the pool replaced the last)."""
        return (await self._member(cluster)).api

    async def _member(self, cluster: Mapping[str, Any]) -> Kinds:
        name = str(cluster["metadata"]["name"])
        api = await self.pool.get(cluster)
        current = self.active.get(name)
        if current is not None and current.api is api:
            return current
        made = self.active[name] = self._make(name, api)
        made.active = True
        made.factory.start()
        if current is not None:  # replaced before stopping: a concurrent caller sees the new one
            log.info("member %s: new client, restarting its object watches", name)
            for old in current.factory.informers:
                made.watch(old.resource)
            await current.stop()
            self.on_change(name)
            await self.pool.release_retired()  # the old client may be unused now
        return made

    async def resource(self, cluster: Mapping[str, Any], api_version: str,
                       kind: str) -> resources.Resource:
        """The member's resource for ``kind``; :class:`discovery.NotServed` if it has none."""
        return await (await self._member(cluster)).discovery.resource(api_version, kind)

    async def watch(self, cluster: Mapping[str, Any],
                    resource: resources.Resource) -> informer.Informer:
        """The member's informer on ``resource`` (started on first use)."""
        return (await self._member(cluster)).watch(resource)

    def get(self, cluster: str, resource: resources.Resource, namespace: str | None,
            name: str) -> dict[str, Any] | None:
        """The cached member object, if watched and present."""
        member = self.active.get(cluster)
        return member.get(resource, namespace, name) if member is not None else None
