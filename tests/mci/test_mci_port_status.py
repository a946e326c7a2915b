"""Whether the provider writes load-balancer ports, decided from the server's MCI schema.

Karmada's MCI CRD lists ``error`` as required on every port status (it is
generated from Kubernetes' ``IngressPortStatus``); a healthy port cannot be
written there, so the provider leaves the ports out.  Our CRD takes them.
"""

from __future__ import annotations

from typing import Any, cast

import pytest

from clusterhealth_core import schema, status
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_mci import controller


def _kind(ports: dict[str, Any] | None, *, published: bool = True) -> schema.Kind:
    ingress: dict[str, Any] = {"type": "object", "properties": {"ip": {"type": "string"}}}
    if ports is not None:
        ingress["properties"]["ports"] = {"type": "array", "items": ports}
    root = {"type": "object", "properties": {"status": {"type": "object", "properties": {
        "loadBalancer": {"type": "object", "properties": {
            "ingress": {"type": "array", "items": ingress}}}}}}}
    return schema.Kind(resources.MULTI_CLUSTER_INGRESSES, True, root if published else None)


PORT = {"type": "object", "properties": {
    "port": {"type": "integer"}, "protocol": {"type": "string"}, "error": {"type": "string"}}}


@pytest.mark.parametrize(("kind", "writable"), [
    pytest.param(_kind({**PORT, "required": ["port", "protocol"]}), True, id="ours"),
    pytest.param(_kind({**PORT, "required": ["error", "port", "protocol"]}), False,
                 id="karmada (error required)"),
    pytest.param(_kind(PORT), True, id="nothing required"),
    pytest.param(_kind(None), False, id="ports not declared"),
    pytest.param(_kind(None, published=False), True, id="no schema published"),
])
def test_port_status_writable(kind: schema.Kind, writable: bool) -> None:
    writer = status.StatusWriter(cast(kube.ApiClient, None), kind, controller.FIELD_MANAGER,
                                 frozenset({"loadBalancer"}), nested=controller.PORT_STATUS)
    ingress = [{"ip": "198.18.0.1", "ports": [{"port": 80, "protocol": "TCP"}]}]
    written = writer.supported({"loadBalancer": {"ingress": ingress}})
    expected = ingress if writable else [{"ip": "198.18.0.1"}]
    assert written == {"loadBalancer": {"ingress": expected}}
    assert bool(writer.unsupported_nested) is not writable
