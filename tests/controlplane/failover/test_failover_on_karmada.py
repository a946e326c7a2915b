"""Our failover on Karmada's own control plane: seed 000 end to end (issue 22).

What a Karmada user adopts: Karmada v1.18.2 keeps carrying the workloads (its
resource detector, ``karmada-controller-manager --controllers=cluster,
namespace,binding,bindingStatus``, ``karmada-scheduler`` and
``karmada-webhook``, all built from the Go module proxy, on Karmada's
aggregated Cluster API and its CRDs), and our ``clusterStatus``,
``clusterTaint``, ``taintManager``, ``gracefulEviction`` and ``failback``
replace Karmada's ``clusterStatus``, ``clustertaintpolicy``,
``gracefulEviction`` and its taint manager (off: Karmada's ``Failover`` gate
stays off).  Karmada's ``execution`` and ``workStatus`` read the members
through informers only its ``clusterStatus`` starts, so ours replace them too.
Karmada's ``cluster`` controller stays on for the execution spaces and its
finalizer; it writes the same NoSchedule taints as ours from ``Ready``, and
both keep a taint as they find it.

Two Deployments Divided 1:2 over member1/member2, one opted in to failback;
member1's API server is killed: Ready False after the threshold, NoSchedule,
NoExecute after the eviction timeout, both bindings evicted after the
toleration, Karmada's scheduler places their replicas on member2, whose Pods
become Ready; member1 back: the stale copy of the first goes, the second
returns to 1:2 after the stabilisation window.  The test checks order and
timers, never speed (``bench.failover_peer`` measures that).
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator

import cpkit
import pytest
import seedkit

import testkit
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import environment, karmada, workloads

OURS = ("execution", "workStatus", "clusterStatus", "clusterTaint", "taintManager",
        "gracefulEviction", "failback")
"""Our controllers on a Karmada, in place of Karmada's failover (and its execution)."""
TIMERS = dataclasses.replace(seedkit.TIMERS, health=dataclasses.replace(
    seedkit.TIMERS.health, probe_timeout=5.0))
"""Seed 000's timers; a probe (and the discovery after it) may take 5 s on a busy machine:
a killed API server refuses at once."""


@pytest.fixture(scope="module")
async def karmada_members() -> AsyncIterator[environment.LocalEnvironment]:
    """Karmada's control plane carrying workloads to members that run them, no failover."""
    settings = karmada.KarmadaSettings.chain(controllers=karmada.BESIDE_OUR_FAILOVER,
                                             failover=None, wait_members_ready=False)
    config = environment.EnvironmentConfig(members=seedkit.MEMBERS, control_plane="karmada",
                                           workloads=workloads.WorkloadSettings(),
                                           karmada=settings)
    async with environment.LocalEnvironment(config) as local:
        yield local


async def both_healthy(cp: kube.ApiClient) -> bool:
    for member in seedkit.MEMBERS:
        cluster = await cp.get(resources.CLUSTERS, member)
        if seedkit.ready(cluster) != ("True", "ClusterReady") or (
                cluster.get("spec") or {}).get("taints"):
            return False
    return True


async def test_our_failover_and_failback_on_karmada(
        karmada_members: environment.LocalEnvironment) -> None:
    env = karmada_members
    stays = f"nginx-{uuid.uuid4().hex[:6]}"
    returns = f"nginx-{uuid.uuid4().hex[:6]}"
    namespace = f"failover-{uuid.uuid4().hex[:6]}"
    async with env.client() as cp, cpkit.running_manager(cp, OURS, failover=TIMERS) as running:
        await testkit.eventually(lambda: both_healthy(cp), timeout=60,
                               what="both members Ready (our clusterStatus) and untainted")
        await cp.create(resources.NAMESPACES, {"metadata": {"name": namespace}})
        for name, failback in ((stays, False), (returns, True)):
            await cp.create(resources.DEPLOYMENTS, cpkit.deployment(name, namespace),
                            namespace=namespace)
            await cp.create(resources.PROPAGATION_POLICIES,
                            seedkit.policy(name, namespace, failback=failback),
                            namespace=namespace)
        for name in (stays, returns):
            await seedkit.wait_split(env, namespace, name, {"member1": 1, "member2": 2})
        rb = await cp.get(resources.RESOURCE_BINDINGS, f"{stays}-deployment",
                          namespace=namespace)
        assert rb["metadata"]["labels"].get(
            "propagationpolicy.karmada.io/permanent-id"), "not Karmada's detector's binding"
        try:
            line = await seedkit.fail_over(env, cp, namespace, [stays, returns])
        finally:
            await env.start_server("member1")
            async with env.client("member1") as member1:  # leave it as found: running Pods
                await workloads.wait_runs_pods(member1)
        line.check_order(TIMERS)
        evictions = running.registry.get_sample_value(
            "clusterhealth_evictions_total", {"result": "success", "reason": "TaintUntolerated"})
        assert evictions is not None and evictions >= 2, "not evicted by our taint manager"
        # Every field our failover writes is in Karmada's schemas: none was left out.
        lost = [sample.labels for metric in running.registry.collect()
                if metric.name == "clusterhealth_schema_unsupported_field"
                for sample in metric.samples if sample.value]
        assert lost == [], lost

        # member1 back: Ready, untainted; the stale copy of the first goes (Karmada's
        # binding and execution controllers, once our graceful eviction ended the task)
        async def member1_clean() -> bool:
            stale = await seedkit.member_state(env, namespace, stays, "member1")
            return await seedkit.member1_clean(cp) and stale is None
        await testkit.eventually(member1_clean, timeout=120, what="member1 Ready and clean")
        works = await cp.list(resources.WORKS, namespace="karmada-es-member1")
        assert not [w for w in works["items"]
                    if w["metadata"]["name"].startswith(stays)], "member1's Work stayed"
        # the opted-in one returns to 1:2 through Karmada's scheduler; the other stays
        await seedkit.wait_split(env, namespace, returns, {"member1": 1, "member2": 2})
        await asyncio.sleep(TIMERS.failback.window + 3.0)
        await seedkit.wait_split(env, namespace, stays, {"member1": None, "member2": 3},
                                 timeout=5)
        failbacks = running.registry.get_sample_value("clusterhealth_failbacks_total")
        assert failbacks == 1, failbacks
        for name in (stays, returns):
            await cp.delete(resources.DEPLOYMENTS, name, namespace=namespace)
        for name in (stays, returns):
            await seedkit.wait_split(env, namespace, name, {"member1": None, "member2": None})
