"""The whole chain: template + policy -> detector -> scheduler -> Works -> members -> status.

Seed 000's demo, first half: a 3-replica Deployment and a PropagationPolicy
(Divided, weights 1:2 over member1 and member2) in the control plane; the
controller manager (in-process, every controller) and the scheduler (its own
process, as shipped) place 1 replica on member1 and 2 on member2, whose own
controllers, scheduler and kwok run the Pods; the template's status shows 3
available.  Then the weights change (rebalanced), the policy switches to
Duplicated (3 on each) and the template is deleted (gone from the members).

The cluster-status controller runs with them and reports the members' served
APIs and resources on their Clusters.  A second test divides replicas by the
members' available replicas (dynamic weights), which come from the
``resourceSummary`` that controller computes from the members' Nodes and Pods.
"""

from __future__ import annotations

import pathlib
import subprocess
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import cpkit
import pytest

import testkit
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import environment

CONTROLLERS = (*cpkit.PROPAGATION, "clusterStatus")


@pytest.fixture
def scheduler(workload_env: environment.LocalEnvironment, python_env: dict[str, str],
              tmp_path: pathlib.Path) -> Iterator[subprocess.Popen[bytes]]:
    with cpkit.scheduler_process(workload_env, python_env, tmp_path / "scheduler.log") as proc:
        yield proc


def divided(weights: dict[str, int]) -> dict[str, Any]:
    return {"clusterAffinity": {"clusterNames": list(weights)},
            "replicaScheduling": {
                "replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
                "weightPreference": {"staticWeightList": [
                    {"targetCluster": {"clusterNames": [c]}, "weight": w}
                    for c, w in weights.items()]}}}


DUPLICATED = {"clusterAffinity": {"clusterNames": ["member1", "member2"]},
              "replicaScheduling": {"replicaSchedulingType": "Duplicated"}}


async def reported(cp: kube.ApiClient, members: list[str],
                   check: Callable[[dict[str, Any]], bool] = lambda status: True) -> None:
    """Wait until the cluster-status controller reported every member Ready with its APIs."""
    async def done() -> bool:
        for member in members:
            status = (await cp.get(resources.CLUSTERS, member)).get("status") or {}
            ready = [c for c in status.get("conditions") or [] if c["type"] == "Ready"]
            if not (ready and ready[0]["status"] == "True" and status.get("apiEnablements")
                    and status.get("resourceSummary") and check(status)):
                return False
        return True
    await testkit.eventually(done, what="members reported Ready with APIs and resources")


async def member_replicas(env: environment.LocalEnvironment, namespace: str,
                          name: str) -> dict[str, int | None]:
    """Available replicas per member (None: no Deployment there, or not settled)."""
    found: dict[str, int | None] = {}
    for member in env.members:
        async with env.client(member) as api:
            obj = await cpkit.get_or_none(api, resources.DEPLOYMENTS, name, namespace)
        if obj is None:
            found[member] = None
            continue
        status = obj.get("status") or {}
        settled = (status.get("observedGeneration") == obj["metadata"]["generation"]
                   and status.get("availableReplicas", 0) == obj["spec"]["replicas"]
                   and status.get("replicas", 0) == obj["spec"]["replicas"])
        found[member] = obj["spec"]["replicas"] if settled else -1
    return found


async def wait_members(env: environment.LocalEnvironment, namespace: str, name: str,
                       expected: dict[str, int | None]) -> None:
    async def check() -> bool:
        return await member_replicas(env, namespace, name) == expected
    await testkit.eventually(check, what=f"members running {expected}")


async def test_seed_demo_divided_then_rebalanced_duplicated_and_removed(
        workload_env: environment.LocalEnvironment,
        scheduler: subprocess.Popen[bytes]) -> None:
    env = workload_env
    name = f"nginx-{uuid.uuid4().hex[:6]}"
    async with env.client() as cp, cpkit.running(cp, CONTROLLERS):
        await reported(cp, env.members)
        namespace = f"demo-{uuid.uuid4().hex[:6]}"
        await cp.create(resources.NAMESPACES, {"metadata": {"name": namespace}})
        await cp.create(resources.DEPLOYMENTS, cpkit.deployment(name, namespace),
                        namespace=namespace)
        policy = {"apiVersion": resources.PROPAGATION_POLICIES.api_version,
                  "kind": "PropagationPolicy",
                  "metadata": {"name": "nginx-propagation", "namespace": namespace},
                  "spec": {"resourceSelectors": [{"apiVersion": "apps/v1",
                                                  "kind": "Deployment", "name": name}],
                           "placement": divided({"member1": 1, "member2": 2})}}
        await cp.create(resources.PROPAGATION_POLICIES, policy, namespace=namespace)

        await wait_members(env, namespace, name, {"member1": 1, "member2": 2})

        async def template_available() -> bool:
            obj = await cp.get(resources.DEPLOYMENTS, name, namespace=namespace)
            status = obj.get("status") or {}
            return status.get("availableReplicas") == 3 and status.get("readyReplicas") == 3
        await testkit.eventually(template_available, what="template status: 3 available")
        rb = await cp.get(resources.RESOURCE_BINDINGS, f"{name}-deployment",
                          namespace=namespace)
        scheduled = [c for c in rb["status"]["conditions"] if c["type"] == "Scheduled"]
        assert scheduled and scheduled[0]["status"] == "True"

        await set_placement(cp, namespace, divided({"member1": 2, "member2": 1}))
        await wait_members(env, namespace, name, {"member1": 2, "member2": 1})

        await set_placement(cp, namespace, DUPLICATED)
        await wait_members(env, namespace, name, {"member1": 3, "member2": 3})

        await cp.delete(resources.DEPLOYMENTS, name, namespace=namespace)
        await wait_members(env, namespace, name, {"member1": None, "member2": None})


async def set_placement(cp: kube.ApiClient, namespace: str, placement: dict[str, Any]) -> None:
    await cp.patch(resources.PROPAGATION_POLICIES, "nginx-propagation",
                   {"spec": {"placement": placement}}, namespace=namespace)


FILLER = "capacity-filler"


def filler(namespace: str) -> dict[str, Any]:
    """Four Pods of 2 CPUs each, run in member1 directly (not propagated)."""
    return sized(cpkit.deployment(FILLER, namespace), replicas=4, cpu="2")


def sized(obj: dict[str, Any], replicas: int, cpu: str) -> dict[str, Any]:
    """The Deployment with ``replicas`` Pods requesting ``cpu`` each."""
    obj["spec"]["replicas"] = replicas
    obj["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu}}
    return obj


async def test_dynamic_weights_divide_by_available_replicas_from_the_resource_summary(
        workload_env: environment.LocalEnvironment,
        scheduler: subprocess.Popen[bytes]) -> None:
    """Members of 16 CPUs each (2 kwok Nodes of 8); member1 already runs 8 CPUs of Pods.

    A 2-CPU replica fits 4 more times on member1 and 8 times on member2, as the
    cluster-status controller's ``resourceSummary`` tells the scheduler: 6
    replicas weighted by available replicas -> 2 and 4 (equal weights would be 3/3).
    (2 CPUs divide a Node's 8: Karmada's estimate sums a member's Nodes, so a size
    that leaves fragments would be placed where the member's scheduler cannot fit it.)
    """
    env = workload_env
    name = f"big-{uuid.uuid4().hex[:6]}"
    namespace = f"dyn-{uuid.uuid4().hex[:6]}"
    async with env.client() as cp, env.client("member1") as m1, \
            cpkit.running(cp, CONTROLLERS):
        await m1.create(resources.NAMESPACES, {"metadata": {"name": namespace}})
        await m1.create(resources.DEPLOYMENTS, filler(namespace), namespace=namespace)
        try:
            def member1_busy(status: dict[str, Any]) -> bool:
                allocated = status["resourceSummary"].get("allocated") or {}
                return bool(status.get("nodeSummary", {}).get("readyNum") == 2
                            and str(allocated.get("cpu", "0")).rstrip("m").isdigit()
                            and _cpu(allocated.get("cpu", "0")) >= 8000)
            await reported(cp, ["member1"], member1_busy)
            await reported(cp, ["member2"])
            for member in env.members:
                status = (await cp.get(resources.CLUSTERS, member))["status"]
                assert status["nodeSummary"] == {"totalNum": 2, "readyNum": 2}
                assert status["resourceSummary"]["allocatable"] == {
                    "cpu": "16", "memory": "64Gi", "pods": "220"}
            await cp.create(resources.NAMESPACES, {"metadata": {"name": namespace}})
            template = sized(cpkit.deployment(name, namespace), replicas=6, cpu="2")
            await cp.create(resources.PROPAGATION_POLICIES, {
                "apiVersion": resources.PROPAGATION_POLICIES.api_version,
                "kind": "PropagationPolicy",
                "metadata": {"name": "dynamic", "namespace": namespace},
                "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                                "name": name}],
                         "placement": {
                             "clusterAffinity": {"clusterNames": ["member1", "member2"]},
                             "replicaScheduling": {
                                 "replicaSchedulingType": "Divided",
                                 "replicaDivisionPreference": "Weighted",
                                 "weightPreference": {"dynamicWeight": "AvailableReplicas"}}}}},
                namespace=namespace)
            await cp.create(resources.DEPLOYMENTS, template, namespace=namespace)
            await wait_members(env, namespace, name, {"member1": 2, "member2": 4})
            await cp.delete(resources.DEPLOYMENTS, name, namespace=namespace)
            await wait_members(env, namespace, name, {"member1": None, "member2": None})
        finally:
            await m1.delete(resources.DEPLOYMENTS, FILLER, namespace=namespace, missing_ok=True)


def _cpu(text: str) -> int:
    return int(text[:-1]) if text.endswith("m") else int(text) * 1000
