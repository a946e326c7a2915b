"""Test kit for MCI controller tests: Services/EndpointSlices in members, MCIs, polling."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from typing import Any

from clusterhealth_core import status
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import waiting


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


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


eventually = functools.partial(waiting.eventually, timeout=20.0)
