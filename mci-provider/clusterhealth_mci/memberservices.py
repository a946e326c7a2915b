"""Where Services run: every member cluster's Services and EndpointSlices, watched.

The members are watched through the core's pools (:mod:`clusterhealth_core.members`):
:class:`~clusterhealth_core.members.MemberClients` builds each member's
client, :class:`~clusterhealth_core.members.MemberInformers` keeps a
:class:`MemberCache` per member on it (moved onto a new client once loaded,
retried, reported with a ``MemberNotWatched`` Warning when it cannot be).
This module says what the provider watches there and answers the
controller's questions: which clusters run Service ``ns/name``, does that
Service have a given port, and which ready endpoints serve it.

Endpoints come from the member's EndpointSlices (ready endpoints, the port
whose name matches the Service port): the load balancer reaches pods
directly, so it needs routable pod IPs (flat network, or pods reachable from
the load balancer).

**Whose credentials** (``--member-credentials``, :data:`clusterhealth_core.members.MODES`).
By default (``readonly``) the provider reads members with an identity of its
own that may only read Services and EndpointSlices (``charts/mci-provider``
``target=member`` creates it in each member): the Secret named like the
Cluster in the provider's credentials namespace (Karmada's shape:
``caBundle``, ``token``) stands in for the Cluster's ``spec.secretRef``,
which is never read.  A Cluster without such a Secret is not watched: the
log and a Warning Event on the Cluster say which Secret to create, and
nothing falls back to the Cluster's own credentials (which, as ``karmadactl
join`` makes them, may do anything in the member: reading them at all is
what this mode avoids).  ``cluster`` uses each Cluster's ``spec.secretRef``,
as Karmada's controllers do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from clusterhealth_core import builder, runner
from clusterhealth_core import clock as clocks
from clusterhealth_core import members as pool_members
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import informer, resources

ChangeHandler = Callable[[str, str, str], None]
"""``handler(cluster, namespace, service_name)`` after a Service or its endpoints changed;
``handler(cluster, "", "")`` when everything known about the cluster may have changed."""
SERVICE_NAME_LABEL = "kubernetes.io/service-name"

MISSING_READONLY_HINT = (
    ": the MCI provider reads members with a read-only identity of its own; create that "
    "Secret (caBundle, token) from the identity `helm install ... --set target=member` made "
    "in the member (charts/mci-provider/README.md, 'Member clusters'), or run with "
    "--member-credentials=cluster to use the Cluster's own credentials")
secret_fields = informer.keep_fields("type", "data")
"""What the provider reads of a cluster Secret: the credentials."""
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


class MemberCache(pool_members.Watched):
    """Informers on one member cluster's Services and EndpointSlices, through one client."""

    def __init__(self, name: str, api: kube.ApiClient, on_change: ChangeHandler, *,
                 settings: informer.InformerSettings, clock: clocks.Clock) -> None:
        super().__init__(name, api, settings=settings, clock=clock)
        self.services = self.factory.informer(resources.SERVICES, transform=service_fields)
        self.slices = self.factory.informer(resources.ENDPOINT_SLICES, transform=slice_fields)
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


class MemberCaches(pool_members.MemberInformers[MemberCache]):
    """The members' :class:`MemberCache`, and the answers across them."""

    @classmethod
    def of_term(cls, term: runner.Term, clusters: informer.Informer, on_change: ChangeHandler,
                *, credentials: str, readonly_namespace: str,
                cluster_namespace: str) -> MemberCaches:
        """Member caches on a pool of their own, reading the ``credentials`` of the module doc.

        ``readonly``: the Secrets of ``readonly_namespace`` named like the Clusters;
        ``cluster``: the Clusters' ``secretRef``, only in ``cluster_namespace``.
        """
        readonly = credentials == pool_members.READONLY
        secret_namespace = readonly_namespace if readonly else cluster_namespace
        secrets = term.informers.informer(resources.SECRETS, namespace=secret_namespace,
                                          transform=secret_fields)
        pool = pool_members.MemberClients(
            term.api, secrets=secrets, clusters=clusters, user_agent="clusterhealth-mci",
            clock=term.clock, secret_namespace=secret_namespace,
            own_secrets=secret_namespace if readonly else None)
        return cls(pool, lambda name, api: MemberCache(
            name, api, on_change, settings=term.informers.settings, clock=term.clock),
            clock=term.clock, on_change=lambda name: on_change(name, "", ""),
            recorder=term.recorder, missing_secret_hint=MISSING_READONLY_HINT if readonly else "")

    @property
    def secrets(self) -> informer.Informer:
        """The informer on the credentials' Secrets (the pool's)."""
        if self.pool.secrets is None:
            raise RuntimeError("member caches without the Secrets' informer")
        return self.pool.secrets

    def cluster_changed(self, event: builder.Event) -> None:
        """A Cluster added, deleted, or reached otherwise: its member is checked again."""
        if (event.type != builder.MODIFIED
                or self.pool.access(event.obj) != self.pool.access(event.old or {})):
            self.mark(str(event.obj["metadata"]["name"]), fresh=True)

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
