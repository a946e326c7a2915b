"""Test kit for MCI controller tests: Services/EndpointSlices in members, MCIs, polling."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
from collections.abc import AsyncIterator, Sequence
from typing import Any

import prometheus_client

import testkit
from clusterhealth_core import clock as clocks
from clusterhealth_core import election, runner, status
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import waiting
from clusterhealth_mci import controller, metrics
from clusterhealth_mci.providers import base


async def make_service(member: kube.ApiClient, name: str, endpoints: Sequence[tuple[str, int]],
                       namespace: str = "default", port: int = 80) -> None:
    """A Service with a named port and an EndpointSlice listing ``endpoints`` (no kubelet:
    the slice is written by the test, as the endpoint-slice controller would)."""
    await member.create(resources.SERVICES, {"metadata": {"name": name, "namespace": namespace},
                                             "spec": {"ports": [{"name": "http", "port": port,
                                                                 "protocol": "TCP"}]}})
    # one slice per endpoint: the test's backends share 127.0.0.1 on different ports
    for index, (address, number) in enumerate(endpoints):
        await member.create(resources.ENDPOINT_SLICES, {
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"{name}-{index}", "namespace": namespace,
                         "labels": {"kubernetes.io/service-name": name,
                                    "endpointslice.kubernetes.io/managed-by": "tests"}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": number, "protocol": "TCP"}],
            "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
        })


async def delete_service(member: kube.ApiClient, name: str, namespace: str = "default") -> None:
    slices = await member.list(resources.ENDPOINT_SLICES, namespace=namespace,
                               label_selector=f"kubernetes.io/service-name={name}")
    for item in slices["items"]:
        await member.delete(resources.ENDPOINT_SLICES, item["metadata"]["name"],
                            namespace=namespace, missing_ok=True)
    await member.delete(resources.SERVICES, name, namespace=namespace, missing_ok=True)


def mci_body(name: str, service: str, host: str, namespace: str = "default",
             ingress_class: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"rules": [{"host": host, "http": {"paths": [{
        "path": "/", "pathType": "Prefix",
        "backend": {"service": {"name": service, "port": {"number": 80}}}}]}}]}
    if ingress_class:
        spec["ingressClassName"] = ingress_class
    return {"apiVersion": resources.MULTI_CLUSTER_INGRESSES.api_version,
            "kind": "MultiClusterIngress", "metadata": {"name": name, "namespace": namespace},
            "spec": spec}


async def set_actions(cp: kube.ApiClient, cluster: str, actions: Sequence[str]) -> None:
    """Write remedyActions as the remedy controller would (its field manager)."""
    body: dict[str, Any] = {"remedyActions": list(actions)} if actions else {}
    await status.apply_status(cp, resources.CLUSTERS, cluster, body,
                              field_manager="clusterhealth-remedy")


async def mci_status(cp: kube.ApiClient, name: str, namespace: str = "default"
                     ) -> dict[str, Any]:
    obj = await cp.get(resources.MULTI_CLUSTER_INGRESSES, name, namespace=namespace)
    return dict(obj.get("status") or {})


async def gone(cp: kube.ApiClient, name: str, namespace: str = "default") -> bool:
    """Whether MCI ``name`` is gone (its finalizer released)."""
    listing = await cp.list(resources.MULTI_CLUSTER_INGRESSES, namespace=namespace)
    return all(i["metadata"]["name"] != name for i in listing["items"])


eventually = functools.partial(waiting.eventually, timeout=20.0)


@dataclasses.dataclass
class Running:
    """An MCI controller running in-process the way the component runs it (one term)."""

    replica: runner.ElectedController
    registry: prometheus_client.CollectorRegistry
    metrics: metrics.MCIMetrics

    @property
    def controller(self) -> controller.MCIController:
        current = self.replica.current
        assert isinstance(current, controller.MCIController)
        return current

    def sample(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        return self.registry.get_sample_value(name, labels or {})


@contextlib.asynccontextmanager
async def running_controller(cp: kube.ApiClient, provider: base.Provider,
                             settings: controller.ControllerSettings | None = None,
                             ) -> AsyncIterator[Running]:
    """Run the controller through :class:`runner.ElectedController` (election disabled)."""
    registry = prometheus_client.CollectorRegistry()
    mci_metrics = metrics.MCIMetrics(registry)
    made = settings or controller.ControllerSettings(resync_period=5)
    replica = runner.ElectedController(
        cp, False, election.ElectionConfig("mci-test", "default"), clocks.Clock(),
        make=lambda term: controller.MCIController(term, provider, made, mci_metrics),
        leader_gauge=mci_metrics.is_leader, metrics=runner.ProcessMetrics(registry),
        term=runner.TermSettings(controller.COMPONENT), on_stop=mci_metrics.clear)
    task = asyncio.create_task(replica.run())
    try:
        await eventually(lambda: _ready(replica))
        yield Running(replica, registry, mci_metrics)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _ready(replica: runner.ElectedController) -> bool:
    return replica.current is not None and replica.current.synced


async def condition(cp: kube.ApiClient, name: str, type_: str = "LoadBalancerReady",
                    namespace: str = "default") -> dict[str, Any] | None:
    """The MCI's condition ``type_``, if set."""
    conditions = (await mci_status(cp, name, namespace)).get("conditions") or []
    return next((c for c in conditions if c["type"] == type_), None)


async def events_of(cp: kube.ApiClient, name: str, namespace: str = "default",
                    reason: str | None = None) -> list[dict[str, Any]]:
    """Events about MCI ``name`` in ``namespace`` (optionally of one reason)."""
    listing = await cp.list(resources.EVENTS, namespace=namespace,
                            field_selector=f"involvedObject.name={name}")
    return [e for e in listing["items"] if reason is None or e.get("reason") == reason]


async def make_namespace(*apis: kube.ApiClient, prefix: str = "mci") -> str:
    """A fresh namespace, created in every API server given."""
    name = testkit.unique(prefix)
    for api in apis:
        await api.create(resources.NAMESPACES, {"metadata": {"name": name}})
    return name


def path_body(name: str, paths: Sequence[dict[str, Any]], host: str,
              namespace: str = "default") -> dict[str, Any]:
    """An MCI with the given HTTP paths under one host."""
    return {"apiVersion": resources.MULTI_CLUSTER_INGRESSES.api_version,
            "kind": "MultiClusterIngress", "metadata": {"name": name, "namespace": namespace},
            "spec": {"rules": [{"host": host, "http": {"paths": list(paths)}}]}}


def http_path(service: str, path: str = "/", path_type: str = "Prefix",
              port: int | str = 80) -> dict[str, Any]:
    """One HTTP path of an MCI rule (``port``: a number, or a port name)."""
    number_or_name = {"number": port} if isinstance(port, int) else {"name": port}
    return {"path": path, "pathType": path_type,
            "backend": {"service": {"name": service, "port": number_or_name}}}


async def listening(address: str, port: int) -> bool:
    """Whether something accepts TCP connections at ``address:port``."""
    try:
        _, writer = await asyncio.open_connection(address, port)
    except OSError:
        return False
    writer.close()
    return True
