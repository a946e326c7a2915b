"""The binding-status controller keeps the scheduler's condition, on both control planes.

On Karmada's CRDs a binding's ``status.conditions`` is an atomic list: a
server-side apply of ``FullyApplied`` alone would remove the scheduler's
``Scheduled`` (and a graceful-eviction task would then wait for its timeout
instead of the healthy replacement).  The scheduler's condition is written the
way the scheduler writes it (its status writer, as its field manager), then
the controller runs: both conditions must stay.
"""

from __future__ import annotations

import datetime

import cpkit
import pytest

import testkit
from clusterhealth_core import schema, status
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources

SCHEDULER = "clusterhealth-scheduler"


def binding(name: str, namespace: str) -> dict[str, object]:
    return {"apiVersion": resources.RESOURCE_BINDINGS.api_version, "kind": "ResourceBinding",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment",
                                  "namespace": namespace, "name": name},
                     "replicas": 1, "clusters": [{"name": "member1", "replicas": 1}]}}


@pytest.mark.planes("ours", "karmada")
async def test_fully_applied_leaves_scheduled_in_place(cp: kube.ApiClient) -> None:
    namespace = await cpkit.make_namespace(cp, "binding-status")
    name = testkit.unique("web")
    created = await cp.create(resources.RESOURCE_BINDINGS, binding(name, namespace),
                              namespace=namespace)
    kind = await schema.discover(cp, resources.RESOURCE_BINDINGS)
    writer = status.StatusWriter(cp, kind, SCHEDULER,
                                 frozenset({"conditions", "schedulerObservedGeneration"}),
                                 frozenset({"Scheduled"}))
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    await writer.write(name, {"schedulerObservedGeneration": created["metadata"]["generation"],
                              "conditions": [{"type": "Scheduled", "status": "True",
                                              "reason": "Success", "message": "scheduled",
                                              "lastTransitionTime": now}]},
                       namespace=namespace)
    async with cpkit.running(cp, ("bindingStatus",)):
        async def both() -> set[str] | None:
            live = await cp.get(resources.RESOURCE_BINDINGS, name, namespace=namespace)
            types = {c["type"] for c in (live.get("status") or {}).get("conditions") or []}
            return types if "FullyApplied" in types else None
        types = await testkit.eventually(both, timeout=30, what="FullyApplied written")
    assert types == {"Scheduled", "FullyApplied"}
    await cp.delete(resources.NAMESPACES, namespace)
