"""The graceful-eviction controller against a real API server, with short timers.

Bindings, their status and their tasks are written directly (as the
scheduler, the binding-status controller and the taint manager would); only
``gracefulEviction`` runs.  No binding is updated after a task is stamped,
so a task ended at its deadline proves the controller came back on its own.
"""

from __future__ import annotations

import copy
import datetime
from typing import Any

import cpkit
import prometheus_client

import testkit
from clusterhealth_controlplane import options
from clusterhealth_controlplane.gracefuleviction import controller
from clusterhealth_core import builder
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import environment, waiting

STATUS_MANAGER = "test-binding-status"


def when(seconds: float = 0.0) -> str:
    moment = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def task(cluster: str, created: str | None = None, **extra: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"fromCluster": cluster, "reason": "TaintUntolerated",
                             "producer": "TaintManager", "replicas": 1, **extra}
    if created is not None:
        found["creationTimestamp"] = created
    return found


def body(name: str, namespace: str | None, tasks: list[dict[str, Any]],
         targets: dict[str, int]) -> dict[str, Any]:
    resource = resources.RESOURCE_BINDINGS if namespace else resources.CLUSTER_RESOURCE_BINDINGS
    meta: dict[str, Any] = {"name": name}
    reference: dict[str, Any] = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
    if namespace:
        meta["namespace"] = namespace
        reference["namespace"] = namespace
    else:
        reference = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                     "name": name}
    return {"apiVersion": resource.api_version, "kind": resource.kind, "metadata": meta,
            "spec": {"resource": reference, "replicas": 3,
                     "clusters": [{"name": c, "replicas": r} for c, r in targets.items()],
                     "gracefulEvictionTasks": tasks}}


async def create(api: kube.ApiClient, name: str, namespace: str | None,
                 tasks: list[dict[str, Any]], targets: dict[str, int],
                 health: dict[str, str] | None = None, scheduled: bool = True
                 ) -> dict[str, Any]:
    """A binding, with the status the scheduler and the binding-status controller would write."""
    resource = resources.RESOURCE_BINDINGS if namespace else resources.CLUSTER_RESOURCE_BINDINGS
    made = await api.create(resource, body(name, namespace, tasks, targets), namespace=namespace)
    generation = made["metadata"]["generation"]
    status: dict[str, Any] = {
        "conditions": [{"type": "Scheduled", "status": "True" if scheduled else "False",
                        "reason": "Success" if scheduled else "NoClusterFit",
                        "message": "test", "lastTransitionTime": when()},
                       {"type": "FullyApplied", "status": "True", "reason": "FullyAppliedSuccess",
                        "message": "test", "lastTransitionTime": when(),
                        "observedGeneration": generation}],
        "aggregatedStatus": [{"clusterName": c, "applied": True, "health": h}
                             for c, h in (health or {}).items()]}
    if scheduled:
        status["schedulerObservedGeneration"] = generation
    await api.apply(resource, {"apiVersion": resource.api_version, "kind": resource.kind,
                               "metadata": {"name": name, "namespace": namespace}
                               if namespace else {"name": name},
                               "status": status},
                    field_manager=STATUS_MANAGER, subresource="status")
    return made


async def tasks_of(api: kube.ApiClient, name: str, namespace: str | None) -> list[Any]:
    resource = resources.RESOURCE_BINDINGS if namespace else resources.CLUSTER_RESOURCE_BINDINGS
    obj = await api.get(resource, name, namespace=namespace)
    return list(obj["spec"].get("gracefulEvictionTasks") or [])


def ends(registry: prometheus_client.CollectorRegistry, why: str) -> float:
    value = registry.get_sample_value("clusterhealth_graceful_eviction_task_ends_total",
                                      {"why": why})
    return value or 0.0


async def ended_why(api: kube.ApiClient, name: str, namespace: str | None) -> list[str]:
    """Why the binding's tasks ended, from the controller's Events on it (cluster: why)."""
    found = await api.list(resources.EVENTS, namespace=namespace or "default")
    whys = []
    for event in found.get("items") or []:
        involved = event.get("involvedObject") or {}
        if involved.get("name") == name and involved.get("kind", "").endswith("Binding") \
                and event.get("reason") == controller.EVENT_ENDED:
            message = str(event.get("message"))
            cluster = message.split("cluster ", 1)[1].split(" ", 1)[0]
            whys.append(f"{cluster}: {message.split('(', 1)[1].split(')', 1)[0]}")
    return sorted(whys)


async def remove(api: kube.ApiClient, name: str, namespace: str | None) -> None:
    resource = resources.RESOURCE_BINDINGS if namespace else resources.CLUSTER_RESOURCE_BINDINGS
    await api.delete(resource, name, namespace=namespace, missing_ok=True)


def short(timeout: float) -> options.Options:
    return options.Options(eviction=options.Eviction(graceful_eviction_timeout=timeout))


async def test_a_task_ends_once_the_replacement_is_scheduled_and_healthy(
        env: environment.LocalEnvironment) -> None:
    async with env.client() as api, cpkit.running_manager(
            api, ["gracefulEviction"], failover=short(3600)) as running:
        ns = await cpkit.make_namespace(api, "ge")
        await create(api, "web-deployment", ns, [task("member1", when())], {"member2": 3},
                     health={"member2": "Healthy", "member1": "Unhealthy"})

        async def ended() -> bool:
            return await tasks_of(api, "web-deployment", ns) == []
        await waiting.eventually(ended)
        assert await waiting.eventually(lambda: ended_why(api, "web-deployment", ns)) == [
            "member1: healthy"]
        assert ends(running.registry, "healthy") >= 1

        # not yet healthy: kept (stamped, so the controller has seen it), far from its deadline
        await create(api, "db-deployment", ns, [task("member1")], {"member2": 3},
                     health={"member2": "Unhealthy"})

        async def stamped() -> list[Any] | None:
            found = await tasks_of(api, "db-deployment", ns)
            return found if found and found[0].get("creationTimestamp") else None
        kept = await waiting.eventually(stamped)
        assert [t["fromCluster"] for t in kept] == ["member1"]
        for name in ("web-deployment", "db-deployment"):
            await remove(api, name, ns)


async def test_a_task_ends_at_the_timeout_even_when_the_binding_cannot_be_scheduled(
        env: environment.LocalEnvironment) -> None:
    # Karmada 5803: the only cluster evicted, nothing else fits, Scheduled=False and the
    # generation never observed; the task must still end (and the copy go) at the deadline
    async with env.client() as api, cpkit.running_manager(
            api, ["gracefulEviction"], failover=short(3)) as running:
        ns = await cpkit.make_namespace(api, "ge")
        await create(api, "web-deployment", ns, [task("member1")], {}, scheduled=False)
        name = testkit.unique("role")
        await create(api, name, None, [task("member2")], {"member1": 0},
                     health={"member1": "Unhealthy"})

        async def stamped() -> bool:
            found = await tasks_of(api, "web-deployment", ns)
            return bool(found and found[0].get("creationTimestamp"))
        await waiting.eventually(stamped)

        async def both_ended() -> bool:
            return (await tasks_of(api, "web-deployment", ns) == []
                    and await tasks_of(api, name, None) == [])
        await waiting.eventually(both_ended, timeout=30)
        assert await waiting.eventually(lambda: ended_why(api, "web-deployment", ns)) == [
            "member1: timeout"]
        assert await waiting.eventually(lambda: ended_why(api, name, None)) == [
            "member2: timeout"]
        assert ends(running.registry, "timeout") >= 2
        await remove(api, "web-deployment", ns)
        await remove(api, name, None)


async def test_a_tasks_grace_period_ends_it_before_the_timeout(
        env: environment.LocalEnvironment) -> None:
    async with env.client() as api, cpkit.running_manager(
            api, ["gracefulEviction"], failover=short(3600)) as running:
        ns = await cpkit.make_namespace(api, "ge")
        await create(api, "web-deployment", ns,
                     [task("member1", gracePeriodSeconds=2), task("member3")], {"member2": 3},
                     health={"member2": "Unhealthy"})

        async def one_left() -> list[Any] | None:
            found = await tasks_of(api, "web-deployment", ns)
            return found if [t["fromCluster"] for t in found] == ["member3"] else None
        left = await waiting.eventually(one_left, timeout=30)
        assert left[0].get("creationTimestamp")  # stamped, and kept: its deadline is an hour
        assert await waiting.eventually(lambda: ended_why(api, "web-deployment", ns)) == [
            "member1: grace_period"]
        assert ends(running.registry, "grace_period") >= 1
        await remove(api, "web-deployment", ns)


async def test_suppress_deletion_keeps_a_task_past_every_deadline(
        env: environment.LocalEnvironment) -> None:
    async with env.client() as api, cpkit.running_manager(
            api, ["gracefulEviction"], failover=short(1)) as running:
        ns = await cpkit.make_namespace(api, "ge")
        held = task("member1", when(-3600), suppressDeletion=True)
        await create(api, "web-deployment", ns,
                     [held, task("member3", when(-3600)),
                      task("member4", when(), suppressDeletion=False)], {"member2": 3},
                     health={"member2": "Unhealthy"})

        async def only_held() -> list[Any] | None:
            found = await tasks_of(api, "web-deployment", ns)
            return found if len(found) == 1 else None
        assert await waiting.eventually(only_held) == [held]

        async def two_ended() -> list[str] | None:
            found = await ended_why(api, "web-deployment", ns)
            return found if len(found) == 2 else None
        assert await waiting.eventually(two_ended) == ["member3: timeout",
                                                       "member4: confirmed"]
        gauge = running.registry.get_sample_value("clusterhealth_graceful_eviction_tasks")
        assert gauge is not None and gauge >= 1
        await remove(api, "web-deployment", ns)


async def test_a_stale_view_never_drops_a_task_another_writer_added(
        env: environment.LocalEnvironment) -> None:
    # Karmada 7302: two writers of the task list; the one with an old view must not win
    async with env.client() as api, cpkit.running_manager(
            api, ["gracefulEviction"], failover=short(3600)) as running:
        part = running.manager.parts["gracefulEviction"]
        assert isinstance(part, controller.GracefulEvictionController)
        ns = await cpkit.make_namespace(api, "ge")
        held = task("member1", when(), suppressDeletion=True)
        made = await create(api, "web-deployment", ns, [held], {"member2": 3})
        key = f"{ns}/web-deployment"

        async def cached_version(version: str) -> dict[str, Any] | None:
            found = part.bindings.namespaced.store.get(key)
            return found if found and found["metadata"]["resourceVersion"] == version \
                else None
        live = await api.get(resources.RESOURCE_BINDINGS, "web-deployment", namespace=ns)
        stale = copy.deepcopy(await waiting.eventually(
            lambda: cached_version(live["metadata"]["resourceVersion"])))
        assert stale["metadata"]["uid"] == made["metadata"]["uid"]

        # the taint manager adds a task; then the controller acts on its old view, in which
        # member1's task was (say) confirmed for deletion
        added = task("member3", when())
        live["spec"]["gracefulEvictionTasks"] = [held, added]
        newer = await api.update(resources.RESOURCE_BINDINGS, live)
        await waiting.eventually(lambda: cached_version(newer["metadata"]["resourceVersion"]))
        stale["spec"]["gracefulEvictionTasks"] = [{**held, "suppressDeletion": False}]
        part.bindings.namespaced.store[key] = stale
        await part.reconcile_binding(builder.Request(ns, "web-deployment"))

        found = await tasks_of(api, "web-deployment", ns)
        assert [(t["fromCluster"], t.get("suppressDeletion")) for t in found] == [
            ("member1", True), ("member3", None)]
        await remove(api, "web-deployment", ns)
