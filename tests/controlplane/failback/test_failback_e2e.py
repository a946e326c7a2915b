"""Seed 000's split goes 1:2 -> 0:3 on eviction and comes back 1:2 with failback.

Everything runs in-process against the real control plane and members: the
controller manager's propagation controllers, ``taintManager``,
``gracefulEviction`` and ``failback``, and the scheduler (its own term, as its
process runs it).  The taint manager evicts.  The test plays the cluster-status
controller (``Ready``, the APIs the members serve) and the taint controller
(member1's NoExecute taint, added then removed).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
from collections.abc import AsyncIterator
from typing import Any

import cpkit
import prometheus_client
import pytest

import testkit
from clusterhealth_controlplane import options
from clusterhealth_controlplane.failback import decision
from clusterhealth_controlplane.scheduler import controller as scheduler
from clusterhealth_controlplane.scheduler import metrics, plugins
from clusterhealth_core import clock as clocks
from clusterhealth_core import election, runner
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import environment, waiting

CONTROLLERS = ("detector", "binding", "execution", "workStatus", "bindingStatus",
               "taintManager", "gracefulEviction", "failback")
APIS = [{"groupVersion": "apps/v1", "resources": [{"name": "deployments", "kind": "Deployment"}]}]
STATUS_MANAGER = "test-failback-e2e"
TAINT = {"key": "example.com/failed", "effect": "NoExecute"}
"""A failure as a ClusterTaintPolicy would mark it (Ready stays True, so the member's copy
can be removed; Karmada's not-ready taint on a Ready Cluster is on its way out and evicts
nothing)."""


@pytest.fixture(scope="module")
async def env() -> AsyncIterator[environment.LocalEnvironment]:
    """Members of its own: this test writes the members' Cluster conditions and taints,
    which must neither come from nor reach other tests of the shared environment."""
    config = environment.EnvironmentConfig(members=("member1", "member2"))
    async with environment.LocalEnvironment(config) as local:
        yield local


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@contextlib.asynccontextmanager
async def running_scheduler(api: kube.ApiClient) -> AsyncIterator[None]:
    registry = prometheus_client.CollectorRegistry()
    scheduler_metrics = metrics.SchedulerMetrics(registry)
    settings = scheduler.ControllerSettings(plugins=plugins.default_registry())
    replica = runner.ElectedController(
        api, False, election.ElectionConfig("failback-e2e-scheduler", "default"),
        clocks.Clock(), make=lambda term: scheduler.Scheduler(term, settings, scheduler_metrics),
        leader_gauge=scheduler_metrics.is_leader, metrics=runner.ProcessMetrics(registry),
        term=runner.TermSettings(scheduler.COMPONENT))
    task = asyncio.create_task(replica.run())
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def cluster_status(api: kube.ApiClient, member: str, ready: str | None) -> None:
    status: dict[str, Any] = {}
    if ready is not None:
        status = {"apiEnablements": APIS, "conditions": [{
            "type": "Ready", "status": ready, "reason": "ClusterReady", "message": "test",
            "lastTransitionTime": now()}]}
    await api.apply(resources.CLUSTERS, {"apiVersion": resources.CLUSTERS.api_version,
                                         "kind": "Cluster", "metadata": {"name": member},
                                         "status": status},
                    field_manager=STATUS_MANAGER, subresource="status")


async def taint(api: kube.ApiClient, member: str, on: bool) -> None:
    await api.apply(resources.CLUSTERS, {
        "apiVersion": resources.CLUSTERS.api_version, "kind": "Cluster",
        "metadata": {"name": member},
        "spec": {"taints": [{**TAINT, "timeAdded": now()}] if on else []}},
        field_manager=STATUS_MANAGER)


async def member_replicas(env: environment.LocalEnvironment, ns: str,
                          name: str) -> dict[str, int | None]:
    found: dict[str, int | None] = {}
    for member in ("member1", "member2"):
        async with env.client(member) as api:
            try:
                obj = await api.get(resources.DEPLOYMENTS, name, namespace=ns)
            except errors.NotFound:
                found[member] = None
                continue
        found[member] = obj["spec"]["replicas"]
    return found


def targets(obj: dict[str, Any]) -> dict[str, int]:
    return {t["name"]: t.get("replicas", 0) for t in obj["spec"].get("clusters") or []}


async def test_the_split_comes_back_after_the_window(env: environment.LocalEnvironment) -> None:
    failover = options.Options(eviction=options.Eviction(graceful_eviction_timeout=3.0),
                               failback=options.Failback(window=3.0))
    name = testkit.unique("nginx")
    rb = f"{name}-deployment"
    async with env.client() as api:
        for member in ("member1", "member2"):
            # healthy and untainted to begin with (whatever an earlier test of the shared
            # environment left: a clusterTaint run taints members that report no Ready)
            await api.patch(resources.CLUSTERS, member, {"spec": {"taints": None}})
            await cluster_status(api, member, "True")
        ns = await cpkit.make_namespace(api, "failback")
        await api.create(resources.DEPLOYMENTS, cpkit.deployment(name, ns, 3), namespace=ns)
        policy = cpkit.propagation_policy("nginx-propagation", ns, [
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}], cpkit.DIVIDED_1_2)
        policy["metadata"]["annotations"] = {decision.OPT_IN: "true"}
        await api.create(resources.PROPAGATION_POLICIES, policy, namespace=ns)
        try:
            async with cpkit.running_manager(api, CONTROLLERS, failover=failover) as running, \
                    running_scheduler(api):
                async def split(expected: dict[str, int | None]) -> bool:
                    obj = await api.get(resources.RESOURCE_BINDINGS, rb, namespace=ns)
                    want = {k: v for k, v in expected.items() if v is not None}
                    return (targets(obj) == want
                            and await member_replicas(env, ns, name) == expected)

                await waiting.eventually(lambda: split({"member1": 1, "member2": 2}), timeout=60)

                # member1 fails: tainted NoExecute (the policy tolerates nothing), so the
                # taint manager evicts the binding from it
                await taint(api, "member1", True)

                # 0:3, the task ended (member2 has no Pods here: at the timeout), member1's
                # copy removed; the eviction recorded for failback
                await waiting.eventually(lambda: split({"member1": None, "member2": 3}),
                                         timeout=60)
                evicted = await api.get(resources.RESOURCE_BINDINGS, rb, namespace=ns)
                assert not evicted["spec"].get("gracefulEvictionTasks")
                assert list(decision.record(evicted)) == ["member1"]
                assert not evicted["spec"].get("rescheduleTriggeredAt")

                # member1 recovers: untainted; after the window the 1:2 split returns
                await taint(api, "member1", False)
                await waiting.eventually(lambda: split({"member1": 1, "member2": 2}), timeout=60)
                back = await api.get(resources.RESOURCE_BINDINGS, rb, namespace=ns)
                assert back["spec"].get("rescheduleTriggeredAt")
                assert decision.record(back) == {}
                assert running.registry.get_sample_value("clusterhealth_failbacks_total") == 1

                # clean up while the controllers run: template -> binding -> Works -> members
                await api.delete(resources.DEPLOYMENTS, name, namespace=ns)
                async def removed() -> bool:
                    return await member_replicas(env, ns, name) == {"member1": None,
                                                                    "member2": None}
                await waiting.eventually(removed, timeout=60)
        finally:
            await api.delete(resources.PROPAGATION_POLICIES, "nginx-propagation", namespace=ns,
                             missing_ok=True)
            for member in ("member1", "member2"):  # our Cluster fields released
                await cluster_status(api, member, None)
                await api.apply(resources.CLUSTERS, {
                    "apiVersion": resources.CLUSTERS.api_version, "kind": "Cluster",
                    "metadata": {"name": member}}, field_manager=STATUS_MANAGER)
