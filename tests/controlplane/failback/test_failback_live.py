"""The failback controller against a real API server, with a short window and a batch of one.

Clusters of its own (names unique to each test, endpoints unreachable: the
controller never talks to members), a PropagationPolicy with or without the
opt-in, and bindings claimed by it, written directly as the detector, the
taint manager, the graceful-eviction controller and the scheduler would.
Only ``failback`` runs.
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import cpkit

import testkit
from clusterhealth_controlplane import options
from clusterhealth_controlplane.failback import controller, decision
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import waiting

WINDOW = 2.0
"""Other tests' bindings in flight (the session's API server is shared) hold slots: the
tests not about the batch use a batch of 10, and every test deletes what it made."""
STATUS_MANAGER = "test-cluster-status"


def when(seconds: float = 0.0) -> str:
    moment = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def failback(batch: int = 10) -> options.Options:
    return options.Options(failback=options.Failback(window=WINDOW, batch=batch))


async def ready_cluster(api: kube.ApiClient, name: str) -> None:
    await testkit.make_cluster(api, name)
    await set_ready(api, name, "True")


async def set_ready(api: kube.ApiClient, name: str, ready: str) -> None:
    """The Ready condition, as the cluster-status controller writes it."""
    await api.apply(resources.CLUSTERS, {
        "apiVersion": resources.CLUSTERS.api_version, "kind": "Cluster",
        "metadata": {"name": name},
        "status": {"conditions": [{
            "type": "Ready", "status": ready,
            "reason": "ClusterReady" if ready == "True" else "ClusterNotReachable",
            "message": "test", "lastTransitionTime": when()}]}},
        field_manager=STATUS_MANAGER, subresource="status")


async def set_taints(api: kube.ApiClient, name: str, taints: list[dict[str, Any]]) -> None:
    await api.patch(resources.CLUSTERS, name, {"spec": {"taints": taints or None}})


def placement(first: str, second: str) -> dict[str, Any]:
    return {"clusterAffinity": {"clusterNames": [first, second]},
            "replicaScheduling": {
                "replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
                "weightPreference": {"staticWeightList": [
                    {"targetCluster": {"clusterNames": [first]}, "weight": 1},
                    {"targetCluster": {"clusterNames": [second]}, "weight": 2}]}}}


async def make_policy(api: kube.ApiClient, ns: str, name: str, opt_in: bool,
                      first: str, second: str) -> None:
    body = cpkit.propagation_policy(name, ns, [{"apiVersion": "apps/v1", "kind": "Deployment"}],
                                    placement(first, second))
    if opt_in:
        body["metadata"]["annotations"] = {decision.OPT_IN: "true"}
    await api.create(resources.PROPAGATION_POLICIES, body, namespace=ns)


async def make_binding(api: kube.ApiClient, ns: str, name: str, policy: str, first: str,
                       second: str) -> None:
    """A binding evicted from ``first`` by the taint manager: 3 replicas on ``second``."""
    await api.create(resources.RESOURCE_BINDINGS, {
        "apiVersion": resources.RESOURCE_BINDINGS.api_version, "kind": "ResourceBinding",
        "metadata": {"name": name, "namespace": ns, "annotations": {
            "propagationpolicy.karmada.io/name": policy,
            "propagationpolicy.karmada.io/namespace": ns}},
        "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": ns,
                              "name": name},
                 "replicas": 3, "placement": placement(first, second),
                 "clusters": [{"name": second, "replicas": 3}],
                 "gracefulEvictionTasks": [{
                     "fromCluster": first, "reason": "TaintUntolerated",
                     "producer": "TaintManager", "replicas": 1,
                     "creationTimestamp": when()}]}}, namespace=ns)


async def get(api: kube.ApiClient, ns: str, name: str) -> dict[str, Any]:
    return await api.get(resources.RESOURCE_BINDINGS, name, namespace=ns)


async def end_task(api: kube.ApiClient, ns: str, name: str) -> None:
    """The graceful-eviction task ends (as that controller does once member2 is healthy)."""
    await api.patch(resources.RESOURCE_BINDINGS, name, {"spec": {"gracefulEvictionTasks": None}},
                    namespace=ns)


async def scheduled(api: kube.ApiClient, ns: str, name: str) -> None:
    """The scheduler observes the trigger (and re-divides: here, by hand, 1:2)."""
    obj = await get(api, ns, name)
    first, second = obj["spec"]["placement"]["clusterAffinity"]["clusterNames"]
    await api.patch(resources.RESOURCE_BINDINGS, name, {"spec": {"clusters": [
        {"name": first, "replicas": 1}, {"name": second, "replicas": 2}]}}, namespace=ns)
    await api.apply(resources.RESOURCE_BINDINGS, {
        "apiVersion": resources.RESOURCE_BINDINGS.api_version, "kind": "ResourceBinding",
        "metadata": {"name": name, "namespace": ns},
        "status": {"lastScheduledTime": when(1)}},
        field_manager="test-scheduler", subresource="status")


async def cleanup(api: kube.ApiClient, ns: str, bindings: list[str],
                  clusters: list[str]) -> None:
    for name in bindings:
        await api.delete(resources.RESOURCE_BINDINGS, name, namespace=ns, missing_ok=True)
    for name in clusters:
        await api.delete(resources.CLUSTERS, name, missing_ok=True)


async def scene(api: kube.ApiClient) -> tuple[str, str, str]:
    """Two Ready clusters of the test's own, a namespace and a policy opted in (``opted``)."""
    first, second = testkit.unique("fb1"), testkit.unique("fb2")
    for name in (first, second):
        await ready_cluster(api, name)
    ns = await cpkit.make_namespace(api, "fb")
    await make_policy(api, ns, "opted", True, first, second)
    return first, second, ns


def triggered(obj: dict[str, Any]) -> bool:
    return bool(obj["spec"].get("rescheduleTriggeredAt"))


async def test_an_opted_in_binding_fails_back_after_the_window_and_others_are_untouched(
        env: Any) -> None:
    async with env.client() as api:
        first, second, ns = await scene(api)
        await make_policy(api, ns, "plain", False, first, second)
        try:
            async with cpkit.running_manager(api, ["failback"], failover=failback()) as running:
                await make_binding(api, ns, "web-deployment", "opted", first, second)
                await make_binding(api, ns, "db-deployment", "plain", first, second)

                # the eviction is recorded while the task is there
                async def recorded() -> dict[str, str]:
                    return decision.record(await get(api, ns, "web-deployment"))
                assert list(await waiting.eventually(recorded)) == [first]
                await end_task(api, ns, "db-deployment")
                await end_task(api, ns, "web-deployment")

                async def failed_back() -> dict[str, Any] | None:
                    obj = await get(api, ns, "web-deployment")
                    return obj if triggered(obj) else None
                done = await waiting.eventually(failed_back, timeout=30)
                annotations = done["metadata"]["annotations"]
                assert decision.EVICTED_FROM not in annotations  # the record is cleared
                assert annotations[decision.TRIGGERED] == done["spec"]["rescheduleTriggeredAt"]

                # counted once the write's answer is back, which may come after our read above
                async def counted() -> bool:
                    count = running.registry.get_sample_value("clusterhealth_failbacks_total")
                    return count == 1
                await waiting.eventually(counted, timeout=20)

                async def event() -> bool:
                    found = await api.list(resources.EVENTS, namespace=ns)
                    return any(e["involvedObject"]["name"] == "web-deployment"
                               and e["reason"] == controller.EVENT_FAILBACK
                               for e in found.get("items") or [])
                await waiting.eventually(event)

                # no opt-in: never recorded, never triggered
                plain = await get(api, ns, "db-deployment")
                assert not triggered(plain)
                assert decision.EVICTED_FROM not in (plain["metadata"].get("annotations") or {})
        finally:
            await cleanup(api, ns, ["web-deployment", "db-deployment"], [first, second])


async def test_a_cluster_tainted_again_during_the_window_waits(env: Any) -> None:
    async with env.client() as api:
        first, second, ns = await scene(api)
        await set_taints(api, first, [{"key": "cluster.karmada.io/not-ready",
                                       "effect": "NoExecute", "timeAdded": when()}])
        try:
            async with cpkit.running_manager(api, ["failback"], failover=failback()):
                await make_binding(api, ns, "web-deployment", "opted", first, second)

                async def recorded() -> dict[str, str]:
                    return decision.record(await get(api, ns, "web-deployment"))
                await waiting.eventually(recorded)
                await end_task(api, ns, "web-deployment")

                # tainted, then untainted and tainted again inside the window, then Ready False
                await asyncio.sleep(WINDOW + 1)
                assert not triggered(await get(api, ns, "web-deployment"))
                await set_taints(api, first, [])
                await asyncio.sleep(WINDOW / 2)
                await set_taints(api, first, [{"key": "cluster.karmada.io/not-ready",
                                               "effect": "NoSchedule", "timeAdded": when()}])
                await asyncio.sleep(WINDOW + 1)
                assert not triggered(await get(api, ns, "web-deployment"))
                await set_ready(api, first, "False")
                await set_taints(api, first, [])
                await asyncio.sleep(WINDOW + 1)
                assert not triggered(await get(api, ns, "web-deployment"))

                # healthy for the whole window: back
                await set_ready(api, first, "True")

                async def failed_back() -> bool:
                    return triggered(await get(api, ns, "web-deployment"))
                await waiting.eventually(failed_back, timeout=30)
        finally:
            await cleanup(api, ns, ["web-deployment"], [first, second])


async def test_at_most_a_batch_of_bindings_is_in_flight(env: Any) -> None:
    names = ["a-deployment", "b-deployment", "c-deployment"]
    async with env.client() as api:
        first, second, ns = await scene(api)
        try:
            async with cpkit.running_manager(api, ["failback"], failover=failback(batch=1)):
                for name in names:
                    await make_binding(api, ns, name, "opted", first, second)

                async def all_recorded() -> bool:
                    return all([decision.record(await get(api, ns, n)) for n in names])
                await waiting.eventually(all_recorded)
                for name in names:
                    await end_task(api, ns, name)

                seen: list[str] = []
                for _ in names:
                    async def one_more() -> list[str] | None:
                        found = [n for n in names if triggered(await get(api, ns, n))]
                        return found if len(found) > len(seen) else None
                    now = await waiting.eventually(one_more, timeout=30)
                    assert len(now) == len(seen) + 1, now  # one at a time
                    new = next(n for n in now if n not in seen)
                    await asyncio.sleep(1.0)  # the others wait while it is in flight
                    assert [n for n in names if triggered(await get(api, ns, n))] == now
                    seen.append(new)
                    await scheduled(api, ns, new)  # observed: the slot frees
        finally:
            await cleanup(api, ns, names, [first, second])
