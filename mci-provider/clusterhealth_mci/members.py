"""Where Services run: a cache of every member cluster's Services and EndpointSlices.

For each ``Cluster`` in the control plane it connects to the member through
the credentials in the Cluster's ``secretRef`` Secret (Karmada's ``caBundle``
and ``token``), and keeps informers on Services and EndpointSlices.  It
answers two questions for the controller: which clusters run Service
``ns/name``, and which ready endpoints serve a given Service port there.

Endpoints come from the member's EndpointSlices (ready endpoints, the port
whose name matches the Service port): the load balancer reaches pods
directly, so it needs routable pod IPs (flat network, or pods reachable from
the load balancer).  A member that cannot be reached keeps its last known
state while its informers retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any

from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import config as kubecfg
from clusterhealth_core.kube import errors, informer, resources

log = logging.getLogger(__name__)

ChangeHandler = Callable[[str, str, str], None]
"""``handler(cluster, namespace, service_name)`` after a Service or its endpoints changed."""


@dataclasses.dataclass(frozen=True)
class Access:
    """How to reach one member (compared to restart watches when it changes)."""

    endpoint: str
    secret_namespace: str
    secret_name: str
    insecure: bool


def access_of(cluster: Mapping[str, Any]) -> Access | None:
    """The member's address and credentials reference, if the Cluster has both."""
    spec = cluster.get("spec") or {}
    ref = spec.get("secretRef") or {}
    if not spec.get("apiEndpoint") or not ref.get("name"):
        return None
    return Access(str(spec["apiEndpoint"]), str(ref.get("namespace", "")), str(ref["name"]),
                  bool(spec.get("insecureSkipTLSVerification", False)))


class Member:
    """Informers on one member cluster's Services and EndpointSlices."""

    def __init__(self, name: str, api: kube.ApiClient, on_change: ChangeHandler) -> None:
        self.name = name
        self.api = api
        self.services = informer.Informer(api, resources.SERVICES)
        self.slices = informer.Informer(api, resources.ENDPOINT_SLICES)
        self.services.add_handler(self._service_changed)
        self.slices.add_handler(self._slice_changed)
        self._on_change = on_change
        self._tasks: list[asyncio.Task[None]] = []

    def _service_changed(self, event: str, obj: dict[str, Any], old: object) -> None:
        meta = obj["metadata"]
        self._on_change(self.name, str(meta.get("namespace", "")), str(meta["name"]))

    def _slice_changed(self, event: str, obj: dict[str, Any], old: object) -> None:
        service = (obj["metadata"].get("labels") or {}).get("kubernetes.io/service-name")
        if service:
            self._on_change(self.name, str(obj["metadata"].get("namespace", "")), str(service))

    def start(self) -> None:
        """Start the informers."""
        self._tasks = [asyncio.create_task(self.services.run(), name=f"{self.name}-services"),
                       asyncio.create_task(self.slices.run(), name=f"{self.name}-slices")]

    async def stop(self) -> None:
        """Stop the informers and close the connection."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.api.close()

    def has_service(self, namespace: str, name: str) -> bool:
        """Whether the member runs Service ``namespace/name``."""
        return f"{namespace}/{name}" in self.services.store

    def endpoints(self, namespace: str, name: str, port: str) -> list[tuple[str, int]]:
        """Ready (address, port) pairs of the Service port ``port`` (number or name)."""
        service = self.services.store.get(f"{namespace}/{name}")
        if service is None:
            return []
        port_name = None
        for entry in (service.get("spec") or {}).get("ports") or []:
            if str(entry.get("port")) == port or entry.get("name") == port:
                port_name = entry.get("name") or ""
                break
        if port_name is None:
            return []
        found: set[tuple[str, int]] = set()
        for obj in self.slices.store.values():
            meta = obj["metadata"]
            if meta.get("namespace") != namespace or (meta.get("labels") or {}).get(
                    "kubernetes.io/service-name") != name:
                continue
            numbers = [p.get("port") for p in obj.get("ports") or []
                       if (p.get("name") or "") == port_name and p.get("port")]
            if not numbers:
                continue
            for endpoint in obj.get("endpoints") or []:
                if (endpoint.get("conditions") or {}).get("ready", True) is False:
                    continue
                for address in endpoint.get("addresses") or []:
                    found.add((str(address), int(numbers[0])))
        return sorted(found)


class Members:
    """One :class:`Member` per Cluster with usable credentials."""

    def __init__(self, control_plane: kube.ApiClient, on_change: ChangeHandler) -> None:
        self.control_plane = control_plane
        self.on_change = on_change
        self.members: dict[str, Member] = {}
        self._access: dict[str, Access] = {}
        self.problems: dict[str, str] = {}

    async def sync(self, clusters: Mapping[str, Mapping[str, Any]]) -> None:
        """Start, restart or stop member watches to match the Clusters."""
        for name in list(self.members):
            if name not in clusters or access_of(clusters[name]) != self._access.get(name):
                await self.members.pop(name).stop()
                self._access.pop(name, None)
                self.on_change(name, "", "")
        for name, cluster in clusters.items():
            access = access_of(cluster)
            if name in self.members or access is None:
                continue
            try:
                secret = await self.control_plane.get(
                    resources.SECRETS, access.secret_name, namespace=access.secret_namespace)
                credentials = kubecfg.from_cluster_secret(access.endpoint, secret,
                                                          access.insecure)
            except (errors.KubeError, OSError) as exc:
                self.problems[name] = f"cannot use the credentials of cluster {name}: {exc}"
                log.warning("%s", self.problems[name])
                continue
            self.problems.pop(name, None)
            member = Member(name, kube.ApiClient(credentials, user_agent="clusterhealth-mci"),
                            self.on_change)
            member.start()
            self.members[name] = member
            self._access[name] = access

    def located(self, namespace: str, name: str) -> list[str]:
        """Clusters running Service ``namespace/name``."""
        return sorted(c for c, m in self.members.items() if m.has_service(namespace, name))

    def endpoints(self, cluster: str, namespace: str, name: str, port: str
                  ) -> list[tuple[str, int]]:
        """Ready endpoints of a Service port in one cluster."""
        member = self.members.get(cluster)
        return member.endpoints(namespace, name, port) if member else []

    async def close(self) -> None:
        """Stop every member watch."""
        for member in self.members.values():
            await member.stop()
        self.members.clear()
