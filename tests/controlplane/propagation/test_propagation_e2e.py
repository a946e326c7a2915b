"""Propagation end to end on members that run workloads: detector, binding, execution, status.

The controllers run in-process as the controller manager runs them; no
scheduler runs, so the test writes the binding's ``spec.clusters`` as the
scheduler would.  Members are real kube-apiservers with kube-controller-
manager, kube-scheduler and kwok (``workload_env``), so member Deployments
get Ready Pods and real status.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import cpkit

import testkit
from clusterhealth_controlplane import vocabulary
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import conditions, environment


def deployment(name: str, namespace: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                         {"name": "web", "image": "nginx:1.27",
                          "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}}}


def policy(name: str, namespace: str, target: str) -> dict[str, Any]:
    return {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                            "name": target}],
                     "placement": {"clusterAffinity": {"clusterNames": ["member1", "member2"]}}}}


async def schedule(cp: kube.ApiClient, namespace: str, name: str,
                   clusters: dict[str, int]) -> None:
    """Write spec.clusters as the scheduler would."""
    await cp.patch(resources.RESOURCE_BINDINGS, name,
                   {"spec": {"clusters": [{"name": c, "replicas": r} for c, r in
                                          clusters.items()]}}, namespace=namespace)


async def available(env: environment.LocalEnvironment, member: str, namespace: str, name: str,
                    replicas: int) -> dict[str, Any] | None:
    async with env.client(member) as api:
        obj = await cpkit.get_or_none(api, resources.DEPLOYMENTS, name, namespace)
    if obj is None:
        return None
    status = obj.get("status") or {}
    ok = (obj["spec"]["replicas"] == replicas and status.get("availableReplicas") == replicas
          and status.get("replicas") == replicas
          and status.get("observedGeneration") == obj["metadata"]["generation"])
    return obj if ok else None


async def test_a_deployment_is_propagated_divided_kept_and_removed(
        workload_env: environment.LocalEnvironment) -> None:
    env = workload_env
    name = testkit.unique("web")
    async with env.client() as cp, cpkit.running(cp):
        namespace = testkit.unique("prop")
        await cp.create(resources.NAMESPACES, {"metadata": {"name": namespace}})
        await cp.create(resources.DEPLOYMENTS, deployment(name, namespace, 3),
                        namespace=namespace)
        await cp.create(resources.PROPAGATION_POLICIES, policy("pp", namespace, name),
                        namespace=namespace)
        rb = f"{name}-deployment"
        await testkit.eventually(lambda: cpkit.get_or_none(
            cp, resources.RESOURCE_BINDINGS, rb, namespace), what="binding")
        await schedule(cp, namespace, rb, {"member1": 1, "member2": 2})

        # one Work per cluster, in the execution namespaces, named as Karmada names them
        work = vocabulary.work_name("Deployment", name, namespace)
        for member in ("member1", "member2"):
            found = await testkit.eventually(lambda m=member: cpkit.get_or_none(  # type: ignore[misc]
                cp, resources.WORKS, work, f"karmada-es-{m}"), what=f"Work in {member}")
            assert found["metadata"]["annotations"][vocabulary.RB_NAME] == rb
            assert found["metadata"]["annotations"][vocabulary.RB_NAMESPACE] == namespace
            manifest = found["spec"]["workload"]["manifests"][0]
            assert "status" not in manifest and "uid" not in manifest["metadata"]
            assert not any(k.startswith("propagationpolicy.karmada.io")
                           for k in manifest["metadata"].get("labels") or {})

        # the members run 1 and 2 replicas, Ready
        await testkit.eventually(lambda: available(env, "member1", namespace, name, 1),
                                 what="member1 Deployment with 1 available")
        await testkit.eventually(lambda: available(env, "member2", namespace, name, 2),
                                 what="member2 Deployment with 2 available")

        # the Works report Applied and healthy status; the binding and the template sum it up
        async def work_healthy(member: str) -> bool:
            obj = await cp.get(resources.WORKS, work, namespace=f"karmada-es-{member}")
            conditions = {c["type"]: c for c in obj.get("status", {}).get("conditions", [])}
            statuses = obj.get("status", {}).get("manifestStatuses") or []
            return (conditions.get("Applied", {}).get("status") == "True"
                    and conditions["Applied"]["reason"] == "AppliedSuccessful"
                    and len(statuses) == 1 and statuses[0]["health"] == "Healthy"
                    and statuses[0]["identifier"]["resource"] == "deployments")
        for member in ("member1", "member2"):
            await testkit.eventually(lambda m=member: work_healthy(m),  # type: ignore[misc]
                                     what=f"Work status in {member}")
            # the binding controller created it with the execution finalizer (as Karmada
            # does): the execution controller never had to add it in a second reconcile
            obj = await cp.get(resources.WORKS, work, namespace=f"karmada-es-{member}")
            assert vocabulary.EXECUTION_FINALIZER in obj["metadata"]["finalizers"]
            finalizer_writers = {m["manager"] for m in obj["metadata"]["managedFields"]
                                 if "f:finalizers" in (m.get("fieldsV1") or {})
                                 .get("f:metadata", {})}
            assert finalizer_writers == {"clusterhealth-binding"}, finalizer_writers

        async def template_available(count: int) -> dict[str, Any] | None:
            obj = await cp.get(resources.DEPLOYMENTS, name, namespace=namespace)
            status = obj.get("status") or {}
            if status.get("availableReplicas") == count and status.get("replicas") == count \
                    and status.get("observedGeneration") == obj["metadata"]["generation"]:
                return obj
            return None
        await testkit.eventually(lambda: template_available(3), what="template status 3")

        async def binding_aggregated() -> bool:
            obj = await cp.get(resources.RESOURCE_BINDINGS, rb, namespace=namespace)
            status = obj.get("status") or {}
            items = {i["clusterName"]: i for i in status.get("aggregatedStatus") or []}
            conditions = {c["type"]: c for c in status.get("conditions") or []}
            return (sorted(items) == ["member1", "member2"]
                    and all(i["applied"] and i["health"] == "Healthy" for i in items.values())
                    and conditions.get("FullyApplied", {}).get("status") == "True")
        await testkit.eventually(binding_aggregated, what="binding aggregatedStatus")

        # rebalanced when the scheduler's result changes
        await schedule(cp, namespace, rb, {"member1": 2, "member2": 1})
        await testkit.eventually(lambda: available(env, "member1", namespace, name, 2),
                                 what="member1 rebalanced to 2")
        await testkit.eventually(lambda: available(env, "member2", namespace, name, 1),
                                 what="member2 rebalanced to 1")

        # a member's Deployment deleted by hand comes back
        async with env.client("member2") as member2:
            old_uid = (await member2.get(resources.DEPLOYMENTS, name,
                                         namespace=namespace))["metadata"]["uid"]
            await member2.delete(resources.DEPLOYMENTS, name, namespace=namespace)

            async def recreated() -> bool:
                obj = await cpkit.get_or_none(member2, resources.DEPLOYMENTS, name, namespace)
                return obj is not None and obj["metadata"]["uid"] != old_uid
            await testkit.eventually(recreated, what="member2 Deployment re-created")
        await testkit.eventually(lambda: available(env, "member2", namespace, name, 1),
                                 what="re-created Deployment available")

        # a hand edit of a field the Work sets is put back
        async with env.client("member1") as member1:
            await member1.patch(resources.DEPLOYMENTS, name, {"spec": {"replicas": 5}},
                                namespace=namespace)
        await testkit.eventually(lambda: available(env, "member1", namespace, name, 2),
                                 what="member1 replicas put back to 2")
        await testkit.eventually(lambda: template_available(3), what="template status 3 again")

        # template deleted: binding, Works and member Deployments gone
        await cp.delete(resources.DEPLOYMENTS, name, namespace=namespace)

        async def all_gone() -> bool:
            if await cpkit.get_or_none(cp, resources.RESOURCE_BINDINGS, rb, namespace):
                return False
            for member in ("member1", "member2"):
                if await cpkit.get_or_none(cp, resources.WORKS, work, f"karmada-es-{member}"):
                    return False
                async with env.client(member) as api:
                    if await cpkit.get_or_none(api, resources.DEPLOYMENTS, name, namespace):
                        return False
            return True
        await testkit.eventually(all_gone, what="binding, Works and member objects gone")


def raw_work(name: str, cluster: str, manifests: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
            "metadata": {"name": name, "namespace": f"karmada-es-{cluster}"},
            "spec": {"workload": {"manifests": manifests}}}


def configmap(name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace}, "data": {"a": "1"}}


async def ensure_namespace(api: kube.ApiClient, name: str) -> None:
    with contextlib.suppress(errors.Conflict):
        await api.create(resources.NAMESPACES, {"metadata": {"name": name}})


async def test_a_service_gets_its_cluster_ip_from_each_member(
        workload_env: environment.LocalEnvironment) -> None:
    """The control plane's cluster IP stays there: each member allocates its own."""
    env = workload_env
    name = testkit.unique("svc")
    async with env.client() as cp, cpkit.running(cp):
        namespace = testkit.unique("prop")
        await cp.create(resources.NAMESPACES, {"metadata": {"name": namespace}})
        service = await cp.create(resources.SERVICES, {
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"app": name}, "ports": [{"port": 80}]}}, namespace=namespace)
        assert service["spec"]["clusterIP"]  # allocated by the control plane's API server
        await cp.create(resources.PROPAGATION_POLICIES, {
            "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": "pp", "namespace": namespace},
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Service",
                                            "name": name}],
                     "placement": {"clusterAffinity": {"clusterNames": ["member1",
                                                                        "member2"]}}}},
            namespace=namespace)
        rb = f"{name}-service"
        await testkit.eventually(lambda: cpkit.get_or_none(
            cp, resources.RESOURCE_BINDINGS, rb, namespace), what="binding")
        await cp.patch(resources.RESOURCE_BINDINGS, rb, {"spec": {"clusters": [
            {"name": "member1"}, {"name": "member2"}]}}, namespace=namespace)
        work = vocabulary.work_name("Service", name, namespace)
        for member in ("member1", "member2"):
            found = await testkit.eventually(lambda m=member: cpkit.get_or_none(  # type: ignore[misc]
                cp, resources.WORKS, work, f"karmada-es-{m}"), what=f"Work in {member}")
            manifest = found["spec"]["workload"]["manifests"][0]
            assert "clusterIP" not in manifest["spec"] and "clusterIPs" not in manifest["spec"]

            async def in_member(m: str = member) -> dict[str, Any] | None:
                async with env.client(m) as api:
                    return await cpkit.get_or_none(api, resources.SERVICES, name, namespace)
            copy = await testkit.eventually(in_member, what=f"Service in {member}")
            assert copy["spec"]["clusterIP"], copy  # the member's own allocation
            assert copy["spec"]["ports"][0]["port"] == 80


async def test_a_kind_the_member_does_not_serve_fails_the_whole_work(
        workload_env: environment.LocalEnvironment) -> None:
    env = workload_env
    name = testkit.unique("unserved")
    async with env.client() as cp, cpkit.running(cp, ("execution", "workStatus")):
        await ensure_namespace(cp, "karmada-es-member1")
        await cp.create(resources.WORKS, raw_work(name, "member1", [
            configmap(name, "default"),
            {"apiVersion": "example.io/v1", "kind": "Widget",
             "metadata": {"name": name, "namespace": "default"}}]),
            namespace="karmada-es-member1")

        async def failed() -> dict[str, Any] | None:
            obj = await cp.get(resources.WORKS, name, namespace="karmada-es-member1")
            for c in obj.get("status", {}).get("conditions", []):
                if c["type"] == "Applied" and c["status"] == "False":
                    return dict(c)
            return None
        condition = await testkit.eventually(failed, what="Applied=False")
        assert condition["reason"] == "AppliedFailed"
        assert "member1 does not serve Widget (example.io/v1)" in condition["message"]
        async with env.client("member1") as member1:
            assert await cpkit.get_or_none(member1, resources.CONFIGMAPS, name,
                                             "default") is None  # nothing half-applied
        await cp.delete(resources.WORKS, name, namespace="karmada-es-member1")
        await testkit.eventually(lambda: _gone(cp, name, "karmada-es-member1"),
                                 what="Work deleted")


async def _gone(cp: kube.ApiClient, name: str, namespace: str) -> bool:
    return await cpkit.get_or_none(cp, resources.WORKS, name, namespace) is None


async def test_an_unreachable_member_keeps_the_finalizer_until_its_cluster_is_gone(
        workload_env: environment.LocalEnvironment) -> None:
    env = workload_env
    name = testkit.unique("ghost")
    async with env.client() as cp, cpkit.running(cp, ("execution",)):
        await cp.create(resources.CLUSTERS, {
            "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": name},
            "spec": {"apiEndpoint": "https://127.0.0.1:1", "syncMode": "Push",
                     "secretRef": {"namespace": "karmada-cluster", "name": "member1"}}})
        await ensure_namespace(cp, f"karmada-es-{name}")
        await cp.create(resources.WORKS, raw_work(name, name, [configmap(name, "default")]),
                        namespace=f"karmada-es-{name}")

        async def finalized() -> bool:
            obj = await cp.get(resources.WORKS, name, namespace=f"karmada-es-{name}")
            return vocabulary.EXECUTION_FINALIZER in obj["metadata"].get("finalizers", [])
        await testkit.eventually(finalized, what="finalizer on the Work")
        await cp.delete(resources.WORKS, name, namespace=f"karmada-es-{name}")
        # the member cannot be reached: the Work waits (the probe times out quickly)
        for _ in range(3):
            obj = await cp.get(resources.WORKS, name, namespace=f"karmada-es-{name}")
            assert obj["metadata"].get("deletionTimestamp")
            assert vocabulary.EXECUTION_FINALIZER in obj["metadata"]["finalizers"]
            await asyncio.sleep(1.0)
        await cp.delete(resources.CLUSTERS, name)
        await testkit.eventually(lambda: _gone(cp, name, f"karmada-es-{name}"),
                                 what="Work gone with its Cluster")


async def test_a_work_waits_for_its_cluster_to_be_ready_and_follows_the_ready_change(
        workload_env: environment.LocalEnvironment) -> None:
    """A not-Ready member is not polled: its Cluster's Ready change queues its Works.

    The Works of a not-Ready Cluster come back only after
    ``execution.controller.RETRY_NOT_READY`` (300 s) on their own, so a Work applied,
    and a deleted one cleaned, within 60 s of the change came from the change.
    """
    env = workload_env
    name = testkit.unique("notready")
    namespace = f"karmada-es-{name}"
    async with env.client() as cp, env.client("member1") as member, \
            cpkit.running(cp, ("execution",)):
        try:
            await cp.create(resources.CLUSTERS, {
                "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
                "metadata": {"name": name},
                "spec": {"apiEndpoint": env.servers["member1"].url, "syncMode": "Push",
                         "secretRef": {"namespace": "karmada-cluster", "name": "member1"}}})
            await conditions.set_condition(cp, name, "Ready", "False", manager="test")
            await ensure_namespace(cp, namespace)
            await cp.create(resources.WORKS, raw_work(name, name, [configmap(name, "default")]),
                            namespace=namespace)
            await asyncio.sleep(3)  # the Work is reconciled at once, and waits
            assert await cpkit.get_or_none(member, resources.CONFIGMAPS, name, "default") is None
            await conditions.set_condition(cp, name, "Ready", "True", manager="test")
            await testkit.eventually(
                lambda: cpkit.get_or_none(member, resources.CONFIGMAPS, name, "default"),
                timeout=60, what="the ConfigMap applied once the Cluster is Ready")

            await conditions.set_condition(cp, name, "Ready", "False", manager="test")
            await asyncio.sleep(1)
            await cp.delete(resources.WORKS, name, namespace=namespace)
            await asyncio.sleep(3)  # not Ready: the member's objects stay, and the finalizer
            assert await cpkit.get_or_none(member, resources.CONFIGMAPS, name, "default")
            assert not await _gone(cp, name, namespace)
            await conditions.set_condition(cp, name, "Ready", "True", manager="test")
            await testkit.eventually(lambda: _gone(cp, name, namespace), timeout=60,
                                     what="the Work finalized once the Cluster is Ready")
            assert await cpkit.get_or_none(member, resources.CONFIGMAPS, name, "default") is None
        finally:
            await cp.delete(resources.CLUSTERS, name, missing_ok=True)
            await member.delete(resources.CONFIGMAPS, name, namespace="default",
                                missing_ok=True)
