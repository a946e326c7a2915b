"""Where Services run: a cache of every member cluster's Services and EndpointSlices.

For each ``Cluster`` of the control plane, the member's client comes from
the core's pool (:class:`clusterhealth_core.members.MemberClients`: built
from ``spec.apiEndpoint``, a credentials Secret, TLS settings and
``spec.proxyURL``/``proxyHeader``), and a :class:`MemberCache` keeps
informers on that member's Services and EndpointSlices (one
:class:`~clusterhealth_core.kube.informer.InformerFactory` per member
client).  It answers the controller's questions: which clusters run Service
``ns/name``, does that Service have a given port, and which ready endpoints
serve it.

When the member's client changes (the Cluster's address, proxy or Secret
changed, or the member answered 401 and the pool rebuilt the client), the
member's watches are restarted on the new client.  The old cache keeps
answering until the new one has loaded, so a credential rotation never
makes a member's endpoints vanish from the load balancer for a moment.  A
member that cannot be reached keeps its last known state while its
informers retry; one whose client cannot be built at all is retried with
backoff and reported in :attr:`MemberCaches.problems`.

Endpoints come from the member's EndpointSlices (ready endpoints, the port
whose name matches the Service port): the load balancer reaches pods
directly, so it needs routable pod IPs (flat network, or pods reachable from
the load balancer).

**Whose credentials** (:data:`MODES`).  By default (:data:`READONLY`) the
provider reads members with an identity of its own that may only read
Services and EndpointSlices (``charts/mci-provider`` ``target=member``
creates it in each member): the Secret named like the Cluster in the
provider's credentials namespace (Karmada's shape: ``caBundle``, ``token``)
stands in for the Cluster's ``spec.secretRef``, which is never read.  A
Cluster without such a Secret is not watched: the log and a Warning Event on
the Cluster say which Secret to create, and nothing falls back to the
Cluster's own credentials (which, as ``karmadactl join`` makes them, may do
anything in the member: reading them at all is what this mode avoids).
:data:`CLUSTER` uses each Cluster's ``spec.secretRef``, as Karmada's
controllers do.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

from clusterhealth_core import clock as clocks
from clusterhealth_core import members as pool_members
from clusterhealth_core import retry
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, informer, resources

log = logging.getLogger(__name__)

ChangeHandler = Callable[[str, str, str], None]
"""``handler(cluster, namespace, service_name)`` after a Service or its endpoints changed;
``handler(cluster, "", "")`` when everything known about the cluster may have changed."""
ProblemHandler = Callable[[str, str], None]
"""``handler(cluster, problem)`` when a cluster cannot be watched, for a new reason."""
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
RETRY = retry.Backoff(initial=1.0, factor=2.0, maximum=60.0, jitter=0.2, attempts=1_000_000)
"""How often a member whose client cannot be built is tried again."""

DEFAULT_SETTINGS = informer.InformerSettings()

READONLY = "readonly"
"""Credentials of the provider's own read-only identity, one Secret per Cluster."""
CLUSTER = "cluster"
"""Each Cluster's own ``spec.secretRef`` credentials (Karmada's controllers' way)."""
MODES = (READONLY, CLUSTER)


def readonly_view(cluster: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    """The Cluster as the client pool sees it in :data:`READONLY` mode.

    Its ``spec.secretRef`` is replaced by the Secret named like the Cluster in
    ``namespace``; the endpoint, TLS and proxy settings stay the Cluster's.
    """
    spec = dict(cluster.get("spec") or {})
    spec["secretRef"] = {"namespace": namespace, "name": str(cluster["metadata"]["name"])}
    return {**cluster, "spec": spec}

service_fields = informer.keep_fields("spec.ports")
"""What the controller reads of a member's Service: its ports."""


def slice_fields(obj: informer.Object) -> informer.Object:
    """What it reads of an EndpointSlice: its Service, ports, and ready addresses."""
    meta = obj.get("metadata") or {}
    service = (meta.get("labels") or {}).get(SERVICE_NAME_LABEL)
    kept_meta = {k: meta[k] for k in ("name", "namespace", "resourceVersion") if k in meta}
    if service is not None:
        kept_meta["labels"] = {SERVICE_NAME_LABEL: service}
    return {
        "metadata": kept_meta,
        "ports": [{"name": p.get("name") or "", "port": p.get("port")}
                  for p in obj.get("ports") or []],
        "endpoints": [{"addresses": list(e.get("addresses") or []),
                       "conditions": {"ready": (e.get("conditions") or {}).get("ready", True)}}
                      for e in obj.get("endpoints") or []],
    }


def _service_of(obj: Mapping[str, Any] | None) -> tuple[str, str] | None:
    if not obj:
        return None
    meta = obj.get("metadata") or {}
    service = (meta.get("labels") or {}).get(SERVICE_NAME_LABEL)
    return (str(meta.get("namespace", "")), str(service)) if service else None


def port_entry(service: Mapping[str, Any], port: str) -> Mapping[str, Any] | None:
    """The Service's port ``port``: a number matches ``port``, anything else ``name``."""
    for entry in (service.get("spec") or {}).get("ports") or []:
        if (str(entry.get("port")) == port) if port.isdigit() else (entry.get("name") == port):
            return dict(entry)
    return None


class MemberCache:
    """Informers on one member cluster's Services and EndpointSlices, through one client."""

    def __init__(self, name: str, api: kube.ApiClient, on_change: ChangeHandler, *,
                 settings: informer.InformerSettings, clock: clocks.Clock) -> None:
        self.name = name
        self.api = api
        self.factory = informer.InformerFactory(api, settings=settings, clock=clock)
        self.services = self.factory.informer(resources.SERVICES, transform=service_fields)
        self.slices = self.factory.informer(resources.ENDPOINT_SLICES, transform=slice_fields)
        self.active = False
        """Whether this cache answers for the member (and reports its changes)."""
        self._on_change = on_change
        self._slices_of: dict[tuple[str, str], set[str]] = {}
        self.services.add_handler(self._service_changed)
        self.slices.add_handler(self._slice_changed)

    def _service_changed(self, event: str, obj: dict[str, Any], old: object) -> None:
        if self.active:
            meta = obj["metadata"]
            self._on_change(self.name, str(meta.get("namespace", "")), str(meta["name"]))

    def _slice_changed(self, event: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        key = informer.key_of(obj)
        before, after = _service_of(old), _service_of(obj)
        if before is not None:
            self._slices_of.get(before, set()).discard(key)
        if after is not None and event != "DELETED":
            self._slices_of.setdefault(after, set()).add(key)
        if self.active:
            for service in {before, after} - {None}:
                assert service is not None
                self._on_change(self.name, *service)

    def start(self) -> None:
        """Start the informers."""
        self.factory.start()

    async def stop(self) -> None:
        """Stop the informers (the client belongs to the pool)."""
        self.active = False
        await self.factory.stop()

    @property
    def synced(self) -> bool:
        """Whether both informers have loaded."""
        return self.factory.synced

    async def wait_synced(self) -> None:
        """Wait until both informers have loaded."""
        await self.factory.wait_synced()

    def service(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The member's Service ``namespace/name`` (ports only), if it has one."""
        return self.services.store.get(f"{namespace}/{name}")

    def endpoints(self, namespace: str, name: str, port: str) -> list[tuple[str, int]]:
        """Ready (address, port) pairs of the Service port ``port`` (number or name)."""
        service = self.service(namespace, name)
        entry = port_entry(service, port) if service is not None else None
        if entry is None:
            return []
        port_name = entry.get("name") or ""
        found: set[tuple[str, int]] = set()
        for key in self._slices_of.get((namespace, name), ()):
            obj = self.slices.store.get(key)
            if obj is None:
                continue
            numbers = [p["port"] for p in obj.get("ports") or []
                       if p.get("name", "") == port_name and p.get("port")]
            if not numbers:
                continue
            for endpoint in obj.get("endpoints") or []:
                if endpoint["conditions"]["ready"] is False:
                    continue
                for address in endpoint["addresses"]:
                    found.add((str(address), int(numbers[0])))
        return sorted(found)


class MemberCaches:
    """One active :class:`MemberCache` per Cluster whose client the pool can build."""

    def __init__(
        self,
        pool: pool_members.MemberClients,
        clusters: Callable[[], Mapping[str, Mapping[str, Any]]],
        on_change: ChangeHandler,
        *,
        clock: clocks.Clock,
        settings: informer.InformerSettings = DEFAULT_SETTINGS,
        secret_namespace: str | None = None,
        backoff: retry.Backoff = RETRY,
        on_problem: ProblemHandler | None = None,
        missing_secret_hint: str = "",
    ) -> None:
        self.pool = pool
        self.clusters = clusters
        self.on_change = on_change
        self.clock = clock
        self.settings = settings
        self.secret_namespace = secret_namespace
        self.backoff = backoff
        self.on_problem = on_problem
        self.missing_secret_hint = missing_secret_hint
        """Appended to the problem of a Cluster whose credentials Secret does not exist."""
        self.active: dict[str, MemberCache] = {}
        self.problems: dict[str, str] = {}
        """Cluster -> why the controller cannot watch it (no client could be built)."""
        self._pending: dict[str, tuple[MemberCache, asyncio.Task[None]]] = {}
        self._failures: dict[str, int] = {}
        self._rebuilds: dict[str, int] = {}
        """Caches built for a member since one last loaded (a client refused at once)."""
        self._built_at: dict[str, float] = {}
        self._retries: dict[str, asyncio.Task[None]] = {}
        self._dirty: set[str] = set()
        self._wake = asyncio.Event()
        pool.add_listener(self.mark)
        if pool.secrets is not None:
            pool.secrets.add_handler(self._on_secret)

    # --- what changed -------------------------------------------------------------

    def mark(self, name: str, *, fresh: bool = False) -> None:
        """Check cluster ``name`` again soon (its client was invalidated).

        ``fresh``: its Cluster or its Secret changed, so a new client may work
        where the last ones were refused: rebuild at once, not after a backoff.
        """
        if fresh:
            self._rebuilds.pop(name, None)
        self._dirty.add(name)
        self._wake.set()

    def _on_secret(self, event: str, obj: dict[str, Any], old: object) -> None:
        key = informer.key_of(obj)
        for name, cluster in self.clusters().items():
            access = pool_members.access_of(cluster)
            if access is not None and access.secret_key == key:
                self.mark(name, fresh=True)

    def mark_all(self) -> None:
        """Check every cluster again soon."""
        for name in {*self.clusters(), *self.active, *self._pending}:
            self.mark(name)

    # --- keeping caches -----------------------------------------------------------

    async def run(self) -> None:
        """Bring the caches in line with the Clusters whenever one is marked (until cancelled)."""
        while True:
            await self._wake.wait()
            await self.sync_marked()

    async def sync_marked(self) -> None:
        """Start, replace or stop the caches of every marked cluster."""
        self._wake.clear()
        names, self._dirty = sorted(self._dirty), set()
        for name in names:
            try:
                await self._sync(name)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bug here must not stop the other members
                log.exception("member %s: could not update its watches", name)
                self._failed(name, f"cluster {name}: {exc}")

    async def _sync(self, name: str) -> None:
        cluster = self.clusters().get(name)
        access = pool_members.access_of(cluster) if cluster is not None else None
        problem = None
        if cluster is not None and access is None:
            problem = f"cluster {name}: no spec.apiEndpoint or spec.secretRef"
        elif (access is not None and self.secret_namespace is not None
              and access.secret_namespace != self.secret_namespace):
            problem = (f"cluster {name}: its Secret {access.secret_key} is outside "
                       f"{self.secret_namespace}, the only namespace this controller reads "
                       "credentials from (--cluster-secret-namespace)")
        elif (access is not None and self.pool.secrets is not None and self.pool.secrets.synced
              and access.secret_key not in self.pool.secrets.store):
            problem = (f"cluster {name}: not watched, the Secret {access.secret_key} does not "
                       f"exist{self.missing_secret_hint}")
        if cluster is None or problem is not None:
            await self._drop(name)
            if problem is not None:
                self._report(name, problem)
            return
        assert cluster is not None
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
        # until a cache loads (or the Cluster or Secret changes), rebuilds back off.
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
        cache = MemberCache(name, api, self.on_change, settings=self.settings, clock=self.clock)
        cache.start()
        self._pending[name] = (cache, asyncio.create_task(self._activate(cache),
                                                          name=f"member-{name}-sync"))
        log.info("member %s: watching Services and EndpointSlices through %s", name,
                 "a new client" if name in self.active else "its client")

    async def _activate(self, cache: MemberCache) -> None:
        """Once ``cache`` has loaded, make it answer for its member; stop the one it replaces."""
        await cache.wait_synced()
        self._pending.pop(cache.name, None)
        self._rebuilds.pop(cache.name, None)
        old = self.active.get(cache.name)
        self.active[cache.name] = cache
        cache.active = True
        if old is not None:
            await old.stop()
        if not self._pending:  # no old cache is still reading through a replaced client
            await self.pool.release_retired()
        self.on_change(cache.name, "", "")

    async def _cancel_pending(self, name: str) -> None:
        pending = self._pending.pop(name, None)
        if pending is not None:
            cache, task = pending
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await cache.stop()

    async def _drop(self, name: str) -> None:
        await self._cancel_pending(name)
        self.problems.pop(name, None)
        self._failures.pop(name, None)
        self._rebuilds.pop(name, None)
        self._built_at.pop(name, None)
        old = self.active.pop(name, None)
        if old is not None:
            await old.stop()
            log.info("member %s: no longer watched", name)
            self.on_change(name, "", "")
        await self.pool.forget(name)

    def _report(self, name: str, problem: str) -> None:
        if self.problems.get(name) != problem:
            log.warning("%s", problem)
            if self.on_problem is not None:
                self.on_problem(name, problem)
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
        for task in list(self._retries.values()):
            task.cancel()
        await asyncio.gather(*self._retries.values(), return_exceptions=True)
        for name in list(self._pending):
            await self._cancel_pending(name)
        for cache in self.active.values():
            await cache.stop()
        self.active.clear()

    # --- answers ------------------------------------------------------------------

    def located(self, namespace: str, name: str) -> list[str]:
        """Clusters running Service ``namespace/name``."""
        return sorted(c for c, m in self.active.items() if m.service(namespace, name) is not None)

    def service(self, cluster: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        """Service ``namespace/name`` in ``cluster``, if known there."""
        member = self.active.get(cluster)
        return member.service(namespace, name) if member is not None else None

    def endpoints(self, cluster: str, namespace: str, name: str, port: str
                  ) -> list[tuple[str, int]]:
        """Ready endpoints of a Service port in one cluster."""
        member = self.active.get(cluster)
        return member.endpoints(namespace, name, port) if member else []
