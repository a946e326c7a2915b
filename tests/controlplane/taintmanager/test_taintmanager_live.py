"""The taint manager against a real API server: taints written on Clusters, bindings evicted.

The environment is this module's own (a control plane, no members): the storm
guard counts every Cluster of the server, so no other test's Clusters may be
there.  Taints are written on the Clusters directly (the taint controller is
not part of this test).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
from collections.abc import AsyncIterator
from typing import Any

import cpkit
import pytest

import testkit
from clusterhealth_controlplane import options
from clusterhealth_controlplane.taintmanager import decision
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import environment, waiting

# Keys of the taints these tests write by hand. Not Karmada's not-ready/unreachable: those
# stand only while the Cluster's Ready is not True (the taint controller derives them from
# it), and most Clusters here are Ready so as not to set off the storm guard.
NOT_READY = "example.com/not-ready"
UNREACHABLE = "example.com/unreachable"
UNLIMITED = options.Options(
    eviction=options.Eviction(rate=0.0, secondary_rate=0.0, unhealthy_cluster_threshold=0.55,
                              workers=4),
    # after the storm guard lifts, evictions wait success threshold + probe period + 2 s
    health=options.ClusterHealth(success_threshold=1.0, update_frequency=0.5))


@pytest.fixture(scope="module")
async def tm_env() -> AsyncIterator[environment.LocalEnvironment]:
    async with environment.LocalEnvironment(environment.EnvironmentConfig(members=())) as local:
        yield local


@pytest.fixture
async def cp(tm_env: environment.LocalEnvironment) -> AsyncIterator[kube.ApiClient]:
    async with tm_env.client() as api:
        yield api
        for obj in (await api.list(resources.CLUSTERS))["items"]:
            await api.delete(resources.CLUSTERS, obj["metadata"]["name"], missing_ok=True)


def now_seconds() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC).replace(microsecond=0)


def taint(key: str, added: datetime.datetime | None = None) -> dict[str, Any]:
    return {"key": key, "effect": "NoExecute",
            "timeAdded": decision.format_time(added or now_seconds())}


async def ready_cluster(api: kube.ApiClient, name: str, *taints: dict[str, Any],
                        ready: str = "True") -> None:
    await testkit.make_cluster(api, name, list(taints))
    await set_ready(api, name, ready)


async def set_ready(api: kube.ApiClient, name: str, ready: str) -> None:
    await api.apply(resources.CLUSTERS, {"metadata": {"name": name}, "status": {"conditions": [
        {"type": "Ready", "status": ready, "reason": "Test", "message": "",
         "lastTransitionTime": "2026-01-01T00:00:00Z"}]}},
        field_manager="test-cluster-status", subresource="status")


async def set_taints(api: kube.ApiClient, name: str, *taints: dict[str, Any]) -> None:
    await api.patch(resources.CLUSTERS, name, {"spec": {"taints": list(taints)}},
                    patch_type="merge")


def binding_object(name: str, namespace: str | None, targets: dict[str, int],
                   tolerations: list[dict[str, Any]] | None = None,
                   **spec: Any) -> dict[str, Any]:
    resource = resources.RESOURCE_BINDINGS if namespace else resources.CLUSTER_RESOURCE_BINDINGS
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": resource.api_version, "kind": resource.kind, "metadata": meta,
            "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment",
                                  "name": name.removesuffix("-deployment"),
                                  **({"namespace": namespace} if namespace else {})},
                     "replicas": sum(targets.values()),
                     "placement": {"clusterTolerations": tolerations or []},
                     "clusters": [{"name": n, "replicas": r} for n, r in targets.items()],
                     **spec}}


async def get_binding(api: kube.ApiClient, name: str, namespace: str | None) -> dict[str, Any]:
    resource = resources.RESOURCE_BINDINGS if namespace else resources.CLUSTER_RESOURCE_BINDINGS
    return await api.get(resource, name, namespace=namespace)


def evicted_from(obj: dict[str, Any], cluster: str) -> bool:
    spec = obj["spec"]
    return (cluster not in [t["name"] for t in spec.get("clusters") or []]
            and cluster in [t["fromCluster"] for t in spec.get("gracefulEvictionTasks") or []])


def metric(running: cpkit.Running, name: str, **labels: str) -> float | None:
    return running.registry.get_sample_value(name, labels)


async def events_about(api: kube.ApiClient, name: str, reason: str) -> list[dict[str, Any]]:
    found = (await api.list(resources.EVENTS, namespace="default"))["items"]
    return [e for e in found if e.get("involvedObject", {}).get("name") == name
            and e.get("reason") == reason]


async def test_an_untolerated_taint_evicts_bindings_at_once(cp: kube.ApiClient) -> None:
    ns = await cpkit.make_namespace(cp, "tm")
    a, b = testkit.unique("a"), testkit.unique("b")
    await ready_cluster(cp, a, taint(UNREACHABLE))
    await ready_cluster(cp, b)
    await cp.create(resources.RESOURCE_BINDINGS,
                    binding_object("web-deployment", ns, {a: 2, b: 1},
                                   [{"key": NOT_READY, "operator": "Exists",
                                     "effect": "NoExecute", "tolerationSeconds": 300}],
                                   failover={"cluster": {"purgeMode": "Directly"}}),
                    namespace=ns)
    crb = testkit.unique("crb")
    await cp.create(resources.CLUSTER_RESOURCE_BINDINGS, binding_object(crb, None, {a: 1}))
    await cp.create(resources.RESOURCE_BINDINGS,
                    binding_object("other-deployment", ns, {b: 3}), namespace=ns)
    untouched = await get_binding(cp, "other-deployment", ns)

    async with cpkit.running_manager(cp, ["taintManager"], failover=UNLIMITED) as running:
        async def evicted() -> dict[str, Any] | None:
            obj = await get_binding(cp, "web-deployment", ns)
            return obj if evicted_from(obj, a) else None
        obj = await waiting.eventually(evicted)
        assert obj["spec"]["clusters"] == [{"name": b, "replicas": 1}]
        [task] = obj["spec"]["gracefulEvictionTasks"]
        assert {k: v for k, v in task.items() if k != "creationTimestamp"} == {
            "fromCluster": a, "replicas": 2, "reason": "TaintUntolerated",
            "producer": "TaintManager", "purgeMode": "Directly",
            "message": f"cluster {a}: taint {UNREACHABLE}:NoExecute is not tolerated"}

        async def crb_evicted() -> bool:
            return evicted_from(await get_binding(cp, crb, None), a)
        await waiting.eventually(crb_evicted)
        crb_obj = await get_binding(cp, crb, None)
        assert crb_obj["spec"]["clusters"] == []
        assert crb_obj["spec"]["gracefulEvictionTasks"][0]["purgeMode"] == "Gracefully"
        assert metric(running, "clusterhealth_evictions_total", result="success",
                      reason="TaintUntolerated") == 2
        assert metric(running, "clusterhealth_eviction_queue_depth") == 0
        assert metric(running, "clusterhealth_eviction_latency_seconds_count") == 2
        await asyncio.sleep(0.5)
        after = await get_binding(cp, "other-deployment", ns)
        assert after["metadata"]["resourceVersion"] == untouched["metadata"]["resourceVersion"]
        # a second look at the evicted binding adds no second task
        again = await get_binding(cp, "web-deployment", ns)
        assert len(again["spec"]["gracefulEvictionTasks"]) == 1


async def test_a_tolerated_taint_evicts_after_its_toleration_not_before(
        cp: kube.ApiClient) -> None:
    ns = await cpkit.make_namespace(cp, "tm")
    a, b = testkit.unique("a"), testkit.unique("b")
    added = now_seconds()
    await ready_cluster(cp, a, taint(NOT_READY, added))
    await ready_cluster(cp, b)
    tolerations = [{"key": NOT_READY, "operator": "Exists", "effect": "NoExecute",
                    "tolerationSeconds": 2}]
    await cp.create(resources.RESOURCE_BINDINGS,
                    binding_object("web-deployment", ns, {a: 1, b: 1}, tolerations),
                    namespace=ns)
    async with cpkit.running_manager(cp, ["taintManager"], failover=UNLIMITED):
        early = await get_binding(cp, "web-deployment", ns)
        assert not early["spec"].get("gracefulEvictionTasks")

        async def evicted() -> dict[str, Any] | None:
            obj = await get_binding(cp, "web-deployment", ns)
            return obj if evicted_from(obj, a) else None
        obj = await waiting.eventually(evicted, timeout=30)
        [task] = obj["spec"]["gracefulEvictionTasks"]
        written = decision.parse_time(task["creationTimestamp"])
        assert written is not None and written >= added + datetime.timedelta(seconds=2)


async def test_a_taint_removed_before_the_deadline_leaves_the_binding_alone(
        cp: kube.ApiClient) -> None:
    ns = await cpkit.make_namespace(cp, "tm")
    a = testkit.unique("a")
    added = now_seconds()
    await ready_cluster(cp, a, taint(NOT_READY, added))
    tolerations = [{"key": NOT_READY, "operator": "Exists", "effect": "NoExecute",
                    "tolerationSeconds": 3}]
    await cp.create(resources.RESOURCE_BINDINGS,
                    binding_object("web-deployment", ns, {a: 2}, tolerations), namespace=ns)
    before = await get_binding(cp, "web-deployment", ns)
    async with cpkit.running_manager(cp, ["taintManager"], failover=UNLIMITED) as running:
        await asyncio.sleep(1.0)
        await set_taints(cp, a)
        deadline = added + datetime.timedelta(seconds=3)
        await asyncio.sleep(max(0.0, (deadline - datetime.datetime.now(datetime.UTC))
                                .total_seconds()) + 2.0)
        after = await get_binding(cp, "web-deployment", ns)
        assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
        assert metric(running, "clusterhealth_evictions_total", result="success",
                      reason="TaintUntolerated") == 0


async def test_the_storm_guard_holds_evictions_and_lets_them_go_when_it_lifts(
        cp: kube.ApiClient) -> None:
    ns = await cpkit.make_namespace(cp, "tm")
    names = [testkit.unique(f"s{i}") for i in range(4)]
    await ready_cluster(cp, names[0], taint(UNREACHABLE), ready="False")
    await ready_cluster(cp, names[1], ready="False")
    await ready_cluster(cp, names[2], ready="Unknown")
    await ready_cluster(cp, names[3])
    await cp.create(resources.RESOURCE_BINDINGS,
                    binding_object("web-deployment", ns, {names[0]: 2, names[3]: 1}),
                    namespace=ns)
    before = await get_binding(cp, "web-deployment", ns)
    async with cpkit.running_manager(cp, ["taintManager"], failover=UNLIMITED) as running:
        async def held() -> dict[str, Any] | None:
            obj = await cp.get(resources.CLUSTERS, names[0])
            found = [c for c in obj.get("status", {}).get("conditions", [])
                     if c["type"] == decision.CONDITION]
            return found[0] if found and found[0]["status"] == "True" else None
        condition = await waiting.eventually(held)
        assert condition["reason"] == "TooManyUnhealthyClusters"
        assert condition["message"] == ("3 of 4 clusters (75%) are unhealthy, above the 55% "
                                        "threshold: evictions paused")
        cluster_obj = await cp.get(resources.CLUSTERS, names[0])
        assert [c["type"] for c in cluster_obj["status"]["conditions"]] == [
            "Ready", decision.CONDITION]  # the other writer's condition stays
        await waiting.eventually(lambda: events_about(cp, names[0], decision.CONDITION))
        assert metric(running, "clusterhealth_eviction_storm_guard") == 1
        assert metric(running, "clusterhealth_unhealthy_cluster_fraction") == 0.75
        assert metric(running, "clusterhealth_eviction_queue_depth") == 1
        await asyncio.sleep(1.0)
        still = await get_binding(cp, "web-deployment", ns)
        assert still["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
        # no condition on a Cluster without NoExecute taint
        assert all(c["type"] != decision.CONDITION for c in (await cp.get(
            resources.CLUSTERS, names[1])).get("status", {}).get("conditions", []))

        # two Clusters recover: 1 of 4 unhealthy, the guard lifts, the eviction runs
        await set_ready(cp, names[1], "True")
        await set_ready(cp, names[2], "True")

        async def evicted() -> bool:
            return evicted_from(await get_binding(cp, "web-deployment", ns), names[0])
        await waiting.eventually(evicted)

        async def lifted() -> dict[str, Any] | None:
            obj = await cp.get(resources.CLUSTERS, names[0])
            found = [c for c in obj.get("status", {}).get("conditions", [])
                     if c["type"] == decision.CONDITION]
            return found[0] if found and found[0]["status"] == "False" else None
        condition = await waiting.eventually(lifted)
        assert condition["reason"] == "EnoughHealthyClusters"
        await waiting.eventually(lambda: events_about(cp, names[0],
                                                      f"{decision.CONDITION}Lifted"))
        assert metric(running, "clusterhealth_eviction_storm_guard") == 0
        assert metric(running, "clusterhealth_unhealthy_cluster_fraction") == 0.25


async def test_the_secondary_rate_lets_evictions_through_while_held(
        cp: kube.ApiClient) -> None:
    ns = await cpkit.make_namespace(cp, "tm")
    names = [testkit.unique(f"r{i}") for i in range(2)]
    await ready_cluster(cp, names[0], taint(UNREACHABLE), ready="False")
    await ready_cluster(cp, names[1], ready="False")
    for i in range(3):
        await cp.create(resources.RESOURCE_BINDINGS,
                        binding_object(f"web{i}-deployment", ns, {names[0]: 1}), namespace=ns)
    slow = options.Options(eviction=options.Eviction(rate=0.0, secondary_rate=5.0,
                                                     unhealthy_cluster_threshold=0.55))
    async with cpkit.running_manager(cp, ["taintManager"], failover=slow) as running:
        async def all_evicted() -> bool:
            objs = [await get_binding(cp, f"web{i}-deployment", ns) for i in range(3)]
            return all(evicted_from(o, names[0]) for o in objs)
        await waiting.eventually(all_evicted)
        assert metric(running, "clusterhealth_eviction_storm_guard") == 1
        cluster_obj = await cp.get(resources.CLUSTERS, names[0])
        [condition] = [c for c in cluster_obj["status"]["conditions"]
                       if c["type"] == decision.CONDITION]
        assert condition["message"].endswith("evictions slowed to 5/s")


async def test_a_binding_deleted_while_held_is_forgotten(cp: kube.ApiClient) -> None:
    ns = await cpkit.make_namespace(cp, "tm")
    name = testkit.unique("d")
    await ready_cluster(cp, name, taint(UNREACHABLE), ready="False")
    await cp.create(resources.RESOURCE_BINDINGS,
                    binding_object("web-deployment", ns, {name: 1}), namespace=ns)
    async with cpkit.running_manager(cp, ["taintManager"], failover=UNLIMITED) as running:
        async def queued() -> bool:
            return metric(running, "clusterhealth_eviction_queue_depth") == 1
        await waiting.eventually(queued)
        with contextlib.suppress(errors.NotFound):
            await cp.delete(resources.RESOURCE_BINDINGS, "web-deployment", namespace=ns)

        async def forgotten() -> bool:
            return metric(running, "clusterhealth_eviction_queue_depth") == 0
        await waiting.eventually(forgotten)
