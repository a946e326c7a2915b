"""Pod Security on the members: the control plane's namespace labels are enforced there.

A team's control-plane namespace enforces the ``restricted`` Pod Security level.
With the namespace sync running beside the propagation controllers, the member's
namespace is created by the namespace's own Work, with those labels, before any
workload lands in it; a Deployment whose Pods are privileged with a hostPath then
gets no Pod in the member (its ReplicaSet is refused by the member's admission), while
a compliant one in the same namespace runs.  Members run real workloads
(``workload_env``: kube-controller-manager, kube-scheduler, kwok).
"""

from __future__ import annotations

from typing import Any

import cpkit

import testkit
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import environment

RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}
COMPLIANT = {"runAsNonRoot": True, "runAsUser": 65532, "allowPrivilegeEscalation": False,
             "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}


def _deployment(name: str, namespace: str, privileged: bool) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "web", "image": "nginx:1.27"}
    spec: dict[str, Any] = {"containers": [container]}
    if privileged:
        container["securityContext"] = {"privileged": True}
        spec["volumes"] = [{"name": "root", "hostPath": {"path": "/"}}]
        container["volumeMounts"] = [{"name": "root", "mountPath": "/host"}]
    else:
        container["securityContext"] = COMPLIANT
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": spec}}}


async def _pods(member: kube.ApiClient, namespace: str, app: str) -> list[dict[str, Any]]:
    found = await member.list(resources.PODS, namespace=namespace, label_selector=f"app={app}")
    return list(found["items"])


async def test_a_privileged_pod_never_runs_where_the_namespace_is_restricted(
        workload_env: environment.LocalEnvironment) -> None:
    env = workload_env
    namespace = testkit.unique("psa")
    names = {"privileged": testkit.unique("host"), "compliant": testkit.unique("web")}
    async with env.client() as cp, env.client("member1") as member, \
            cpkit.running(cp, cpkit.WITH_NAMESPACE_SYNC):
        await cp.create(resources.NAMESPACES, {"metadata": {"name": namespace,
                                                            "labels": RESTRICTED}})
        for kind, name in names.items():
            # the control plane warns but accepts a Deployment: only Pods are enforced
            await cp.create(resources.DEPLOYMENTS,
                            _deployment(name, namespace, kind == "privileged"),
                            namespace=namespace)
        await cp.create(resources.PROPAGATION_POLICIES, cpkit.propagation_policy(
            "pp", namespace, [{"apiVersion": "apps/v1", "kind": "Deployment"}],
            {"clusterAffinity": {"clusterNames": ["member1"]}}), namespace=namespace)
        for name in names.values():
            rb = f"{name}-deployment"
            await testkit.eventually(lambda rb=rb: cpkit.get_or_none(  # type: ignore[misc]
                cp, resources.RESOURCE_BINDINGS, rb, namespace), what=f"binding {rb}")
            await cp.patch(resources.RESOURCE_BINDINGS, rb,
                           {"spec": {"clusters": [{"name": "member1", "replicas": 1}]}},
                           namespace=namespace)
        found = await testkit.eventually(lambda: cpkit.get_or_none(
            member, resources.NAMESPACES, namespace), what="the member's namespace")
        assert found["metadata"]["labels"].items() >= RESTRICTED.items()

        async def running() -> list[dict[str, Any]] | None:
            pods = await _pods(member, namespace, names["compliant"])
            return pods if any(p.get("status", {}).get("phase") == "Running"
                               for p in pods) else None

        await testkit.eventually(running, timeout=90, what="the compliant Pod running")

        async def refused() -> dict[str, Any] | None:
            replica_sets = await member.list(resources.Resource(
                "apps", "v1", "replicasets", "ReplicaSet", True), namespace=namespace,
                label_selector=f"app={names['privileged']}")
            for rs in replica_sets["items"]:
                for condition in (rs.get("status") or {}).get("conditions") or []:
                    if condition.get("type") == "ReplicaFailure" \
                            and "violates PodSecurity" in condition.get("message", ""):
                        return dict(condition)
            return None

        await testkit.eventually(refused, timeout=90,
                               what="the privileged ReplicaSet refused by Pod Security")
        assert await _pods(member, namespace, names["privileged"]) == []
        await cp.delete(resources.NAMESPACES, namespace, missing_ok=True)
