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
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from clusterhealth_core import clock as clocks
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import config, errors, informer, resources

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


def access_of(cluster: Mapping[str, Any]) -> Access | None:
    """How to reach the member, or ``None`` when the Cluster lacks an endpoint or a Secret."""
    spec = cluster.get("spec") or {}
    ref = spec.get("secretRef") or {}
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
    ) -> None:
        self.control_plane = control_plane
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
        access = access_of(cluster)
        if access is None:
            raise errors.ConfigError(f"cluster {name}: no spec.apiEndpoint or spec.secretRef")
        if self.secret_namespace is not None and access.secret_namespace != self.secret_namespace:
            raise errors.ConfigError(
                f"cluster {name}: spec.secretRef names Secret {access.secret_key}, outside "
                f"{self.secret_namespace}, the only namespace member credentials are read "
                "from; refused (move the Secret there)")
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
