"""A binding's aggregated status stays small on a real API server when 100 clusters fail.

Every one of 100 Works reports ``Applied=False`` with the longest message a Work
holds (32,768 characters, as Karmada's execution controller writes a member's
whole error).  Copied whole, the binding's status would be 3.2 MB: over the API
server's 3 MiB request limit and etcd's 1.5 MiB per object, so its write would
fail for good.  The binding-status controller writes all 100 entries with their
messages cut, saying so.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import cpkit

import testkit
from clusterhealth_controlplane import vocabulary
from clusterhealth_controlplane.status import decision
from clusterhealth_core import status
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import environment, waiting

CLUSTERS = 100
MESSAGE = 32768


async def _failed_work(cp: kube.ApiClient, namespace: str, rb_namespace: str,
                       rb_name: str, index: int) -> None:
    name = f"{rb_name}-work"
    await cp.create(resources.NAMESPACES, {"metadata": {"name": namespace}})
    await cp.create(resources.WORKS, {
        "apiVersion": resources.WORKS.api_version, "kind": "Work",
        "metadata": {"name": name, "namespace": namespace,
                     "annotations": {vocabulary.RB_NAMESPACE: rb_namespace,
                                     vocabulary.RB_NAME: rb_name}},
        "spec": {"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
                                             "metadata": {"name": rb_name,
                                                          "namespace": rb_namespace}}]}}},
        namespace=namespace)
    error = f"member {index:03d}: admission webhook denied the request: " + "x" * MESSAGE
    await status.apply_status(cp, resources.WORKS, name, {"conditions": [{
        "type": "Applied", "status": "False", "reason": "AppliedFailed",
        "message": error[:MESSAGE], "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
        field_manager="test-execution", namespace=namespace)


async def test_100_long_errors_fit_in_the_binding(env: environment.LocalEnvironment,
                                                  cp: kube.ApiClient) -> None:
    rb_namespace = await cpkit.make_namespace(cp, "agg")
    rb_name = testkit.unique("cm")
    await cp.create(resources.RESOURCE_BINDINGS, {
        "apiVersion": resources.RESOURCE_BINDINGS.api_version, "kind": "ResourceBinding",
        "metadata": {"name": rb_name, "namespace": rb_namespace},
        "spec": {"resource": {"apiVersion": "v1", "kind": "ConfigMap", "name": rb_name,
                              "namespace": rb_namespace}}}, namespace=rb_namespace)
    clusters = [f"{rb_name}-{i:03d}" for i in range(CLUSTERS)]
    for batch in range(0, CLUSTERS, 20):
        await asyncio.gather(*(
            _failed_work(cp, vocabulary.execution_namespace(c), rb_namespace, rb_name, i)
            for i, c in enumerate(clusters) if batch <= i < batch + 20))

    async def aggregated() -> list[dict[str, Any]] | None:
        found = await cp.get(resources.RESOURCE_BINDINGS, rb_name, namespace=rb_namespace)
        items = (found.get("status") or {}).get("aggregatedStatus") or []
        return items if len(items) == CLUSTERS else None

    try:
        async with cpkit.running_manager(cp, ["bindingStatus"]):
            items = await waiting.eventually(aggregated, timeout=60, interval=0.5)
        stored = await cp.get(resources.RESOURCE_BINDINGS, rb_name, namespace=rb_namespace)
        size = len(json.dumps(stored).encode())
        assert size < 600 * 1024, size  # etcd takes 1.5 MiB; whole messages: 3.2 MB
        assert [i["clusterName"] for i in items] == clusters  # every entry kept
        limit = decision.message_limit(CLUSTERS)
        for index, item in enumerate(items):
            assert item["applied"] is False
            message = item["appliedMessage"]
            assert len(message) == limit
            assert message.startswith(f"member {index:03d}: admission webhook denied")
            assert message.endswith(f"\u2026 (cut from {MESSAGE} characters)")
    finally:
        for cluster in clusters:
            await cp.delete(resources.WORKS, f"{rb_name}-work",
                            namespace=vocabulary.execution_namespace(cluster), missing_ok=True)
        await cp.delete(resources.RESOURCE_BINDINGS, rb_name, namespace=rb_namespace,
                        missing_ok=True)
