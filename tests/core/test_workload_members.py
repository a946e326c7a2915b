"""Members that run workloads: a Deployment in a member gets Ready Pods (real parts).

The members of ``workload_env`` run kube-controller-manager, kube-scheduler
and kwok beside their API server (:mod:`clusterhealth_localenv.workloads`).
"""

from __future__ import annotations

import ipaddress
from typing import Any

import testkit
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import environment, workloads

NAMESPACE = "default"


def deployment(name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                     {"name": "web", "image": "nginx:1.27",
                      "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}},
    }


async def wait_available(env: environment.LocalEnvironment, member: str, name: str,
                         replicas: int, timeout: float = 60) -> dict[str, Any]:
    async def available() -> dict[str, Any] | None:
        obj: dict[str, Any] = await api.get(resources.DEPLOYMENTS, name, namespace=NAMESPACE)
        status = obj.get("status") or {}
        done = (status.get("availableReplicas") == replicas
                and status.get("observedGeneration") == obj["metadata"]["generation"]
                and status.get("replicas") == replicas)
        return obj if done else None

    async with env.client(member) as api:
        found: dict[str, Any] = await testkit.eventually(
            available, timeout, f"{member}/{name}: {replicas} available")
        return found


def test_node_object_has_the_capacity_and_the_kwok_annotation() -> None:
    settings = workloads.WorkloadSettings(node_cpu="4", node_memory="8Gi", node_pods=20,
                                          node_labels={"topology.kubernetes.io/zone": "z1"})
    node = workloads.node_object("m-node-0", settings, "127.0.1.3")
    assert node["metadata"]["annotations"][workloads.KWOK_NODE_ANNOTATION] == "fake"
    assert node["status"]["allocatable"] == {"cpu": "4", "memory": "8Gi", "pods": "20"}
    assert node["metadata"]["labels"]["topology.kubernetes.io/zone"] == "z1"
    assert node["status"]["addresses"] == [{"type": "InternalIP", "address": "127.0.1.3"}]


async def test_every_member_has_ready_nodes(workload_env: environment.LocalEnvironment) -> None:
    for member in workload_env.members:
        async with workload_env.client(member) as api:
            nodes = (await api.list(resources.NODES))["items"]
        assert sorted(n["metadata"]["name"] for n in nodes) == \
            [f"{member}-node-0", f"{member}-node-1"]
        for node in nodes:
            ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
            assert ready and ready[0]["status"] == "True"


async def test_a_deployment_gets_ready_pods_with_loopback_ips(
        workload_env: environment.LocalEnvironment) -> None:
    async with workload_env.client("member1") as api:
        await api.create(resources.DEPLOYMENTS, deployment("ready-pods", 3), namespace=NAMESPACE)
    await wait_available(workload_env, "member1", "ready-pods", 3)
    async with workload_env.client("member1") as api:
        pods = (await api.list(resources.PODS, namespace=NAMESPACE,
                               label_selector="app=ready-pods"))["items"]
    assert len(pods) == 3
    cidr = ipaddress.ip_network(workload_env.workloads["member1"].pod_cidr)
    for pod in pods:
        assert pod["spec"]["nodeName"].startswith("member1-node-")
        assert pod["status"]["phase"] == "Running"
        assert ipaddress.ip_address(pod["status"]["podIP"]) in cidr
    # the other member's API server never saw it: members are separate clusters
    async with workload_env.client("member2") as api:
        try:
            await api.get(resources.DEPLOYMENTS, "ready-pods", namespace=NAMESPACE)
        except errors.NotFound:
            pass
        else:
            raise AssertionError("member2 has member1's Deployment")


async def test_scaling_and_deleted_pods_are_handled_by_the_members_controllers(
        workload_env: environment.LocalEnvironment) -> None:
    async with workload_env.client("member2") as api:
        await api.create(resources.DEPLOYMENTS, deployment("scaled", 1), namespace=NAMESPACE)
        await wait_available(workload_env, "member2", "scaled", 1)
        await api.patch(resources.DEPLOYMENTS, "scaled", {"spec": {"replicas": 4}},
                        namespace=NAMESPACE)
        await wait_available(workload_env, "member2", "scaled", 4)
        pods = (await api.list(resources.PODS, namespace=NAMESPACE,
                               label_selector="app=scaled"))["items"]
        victim = pods[0]["metadata"]["name"]
        await api.delete(resources.PODS, victim, namespace=NAMESPACE)
        async def replaced() -> bool:
            pods = (await api.list(resources.PODS, namespace=NAMESPACE,
                                   label_selector="app=scaled"))["items"]
            names = {p["metadata"]["name"] for p in pods
                     if not p["metadata"].get("deletionTimestamp")}
            return victim not in names and len(names) == 4

        await testkit.eventually(replaced, 60, "the deleted Pod replaced")
    await wait_available(workload_env, "member2", "scaled", 4)
