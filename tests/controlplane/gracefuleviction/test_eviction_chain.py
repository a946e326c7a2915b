"""Graceful eviction end to end, with member1's API server really stopped.

The propagation controllers and ``gracefulEviction`` run in-process against
the real control plane and members.  The test plays the parts built
elsewhere: the scheduler (``spec.clusters``, ``schedulerObservedGeneration``),
the cluster-status controller (member1's ``Ready``) and the taint manager
(the task and member1 removed from ``spec.clusters``).  The chain under test:
the task keeps member1's Work; the task ends (timeout: member2 has no Pods
here, so never Healthy); the Work is deleted but kept by its finalizer while
member1 cannot be reached; member1 comes back; its Deployment and the Work
go, and member2 runs all 3 replicas.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import AsyncIterator
from typing import Any

import cpkit
import pytest

import testkit
from clusterhealth_controlplane import options, vocabulary
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import environment, waiting

CHAIN = ("binding", "execution", "workStatus", "bindingStatus", "gracefulEviction")
STATUS_MANAGER = "test-eviction-chain"


@pytest.fixture(scope="module")
async def env() -> AsyncIterator[environment.LocalEnvironment]:
    """Members of its own: this test writes the members' Cluster conditions and taints,
    which must neither come from nor reach other tests of the shared environment."""
    config = environment.EnvironmentConfig(members=("member1", "member2"))
    async with environment.LocalEnvironment(config) as local:
        yield local


def now(seconds: float = 0.0) -> str:
    moment = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


async def set_ready(api: kube.ApiClient, cluster: str, ready: str | None) -> None:
    """member's Ready as the cluster-status controller writes it (None: ours removed)."""
    status: dict[str, Any] = {}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": ready, "message": "test",
                                 "reason": "ClusterReady" if ready == "True"
                                 else "ClusterNotReachable", "lastTransitionTime": now()}]
    await api.apply(resources.CLUSTERS, {"apiVersion": resources.CLUSTERS.api_version,
                                         "kind": "Cluster", "metadata": {"name": cluster},
                                         "status": status},
                    field_manager=STATUS_MANAGER, subresource="status")


async def scheduled(api: kube.ApiClient, ns: str, name: str) -> None:
    """The scheduler has observed the binding's current generation."""
    obj = await api.get(resources.RESOURCE_BINDINGS, name, namespace=ns)
    await api.apply(resources.RESOURCE_BINDINGS, {
        "apiVersion": resources.RESOURCE_BINDINGS.api_version, "kind": "ResourceBinding",
        "metadata": {"name": name, "namespace": ns},
        "status": {"schedulerObservedGeneration": obj["metadata"]["generation"],
                   "conditions": [{"type": "Scheduled", "status": "True", "reason": "Success",
                                   "message": "test", "lastTransitionTime": now()}]}},
        field_manager=STATUS_MANAGER, subresource="status")


async def member_deployment(env: environment.LocalEnvironment, member: str, ns: str,
                            name: str) -> dict[str, Any] | None:
    async with env.client(member) as api:
        try:
            return await api.get(resources.DEPLOYMENTS, name, namespace=ns)
        except errors.NotFound:
            return None


async def work(api: kube.ApiClient, member: str, name: str) -> dict[str, Any] | None:
    try:
        return await api.get(resources.WORKS, name,
                             namespace=vocabulary.execution_namespace(member))
    except errors.NotFound:
        return None


async def test_an_ended_task_removes_the_copy_once_the_member_answers_again(
        env: environment.LocalEnvironment) -> None:
    failover = options.Options(eviction=options.Eviction(graceful_eviction_timeout=4.0))
    async with env.client() as api, cpkit.running_manager(api, CHAIN, failover=failover):
        ns = await cpkit.make_namespace(api, "chain")
        name = testkit.unique("web")
        template = await api.create(resources.DEPLOYMENTS, cpkit.deployment(name, ns, 3),
                                    namespace=ns)
        rb = f"{name}-deployment"
        await api.create(resources.RESOURCE_BINDINGS, {
            "apiVersion": resources.RESOURCE_BINDINGS.api_version, "kind": "ResourceBinding",
            "metadata": {"name": rb, "namespace": ns},
            "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment",
                                  "namespace": ns, "name": name,
                                  "uid": template["metadata"]["uid"]},
                     "replicas": 3,
                     "clusters": [{"name": "member1", "replicas": 1},
                                  {"name": "member2", "replicas": 2}]}}, namespace=ns)
        for member in ("member1", "member2"):
            await set_ready(api, member, "True")
        work_name = vocabulary.work_name("Deployment", name, ns)

        async def placed() -> bool:
            one = await member_deployment(env, "member1", ns, name)
            two = await member_deployment(env, "member2", ns, name)
            return bool(one and two and one["spec"]["replicas"] == 1
                        and two["spec"]["replicas"] == 2)
        await waiting.eventually(placed, timeout=30)

        await env.stop_server("member1")
        try:
            await set_ready(api, "member1", "False")
            # the taint manager evicts: a task from member1, member1 out of the targets
            await api.patch(resources.RESOURCE_BINDINGS, rb, {"spec": {
                "clusters": [{"name": "member2", "replicas": 3}],
                "gracefulEvictionTasks": [{"fromCluster": "member1", "replicas": 1,
                                           "reason": "TaintUntolerated",
                                           "producer": "TaintManager",
                                           "creationTimestamp": now()}]}}, namespace=ns)
            await scheduled(api, ns, rb)

            async def three_on_member2() -> bool:
                two = await member_deployment(env, "member2", ns, name)
                return bool(two and two["spec"]["replicas"] == 3)
            await waiting.eventually(three_on_member2, timeout=30)
            kept = await work(api, "member1", work_name)
            assert kept is not None and not kept["metadata"].get("deletionTimestamp")

            # the task ends at its deadline; the Work goes into deletion and stays there
            async def deleting() -> dict[str, Any] | None:
                found = await work(api, "member1", work_name)
                return found if found and found["metadata"].get("deletionTimestamp") else None
            held = await waiting.eventually(deleting, timeout=30)
            obj = await api.get(resources.RESOURCE_BINDINGS, rb, namespace=ns)
            assert not obj["spec"].get("gracefulEvictionTasks")
            assert vocabulary.EXECUTION_FINALIZER in held["metadata"]["finalizers"]
            await asyncio.sleep(3.0)  # unreachable: nothing can be cleaned, nothing is lost
            still = await work(api, "member1", work_name)
            assert still is not None and vocabulary.EXECUTION_FINALIZER in \
                still["metadata"]["finalizers"]
        finally:
            await env.start_server("member1")
        await set_ready(api, "member1", "True")

        async def cleaned() -> bool:
            return (await member_deployment(env, "member1", ns, name) is None
                    and await work(api, "member1", work_name) is None)
        await waiting.eventually(cleaned, timeout=60)
        two = await member_deployment(env, "member2", ns, name)
        assert two is not None and two["spec"]["replicas"] == 3

        # clean up: the binding and its Works go, then the template
        await api.delete(resources.RESOURCE_BINDINGS, rb, namespace=ns)

        async def all_gone() -> bool:
            return (await work(api, "member2", work_name) is None
                    and await member_deployment(env, "member2", ns, name) is None)
        await waiting.eventually(all_gone, timeout=60)
        await api.delete(resources.DEPLOYMENTS, name, namespace=ns)
        for member in ("member1", "member2"):
            await set_ready(api, member, None)
