"""Seed 000's failover demo, end to end, with member API servers really stopped.

Divided 1:2, 3 replicas over member1/member2, on members that run Pods
(kube-controller-manager, kube-scheduler and kwok each).  member1's API
server is stopped: its Cluster turns Ready False only after the failure
threshold, gets the NoSchedule taint, the NoExecute taint after the eviction
timeout, and the binding is evicted after the policy's toleration; the
scheduler places the 3 replicas on member2, whose Pods become Ready.  member1
is started again: its stale Work and Deployment are removed, and the split
stays as it is unless the policy asks for failback, in which case 1:2
returns after the stabilisation window.

Every controller of the controller manager runs in-process with the timers
shortened (the values below); the scheduler runs as its own process, as
shipped.  The tests check the order of what happens and that nothing happens
before its timer, never how fast (the failover benchmark measures that).
"""

from __future__ import annotations

import asyncio
import datetime
import pathlib
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import cpkit
import pytest

from clusterhealth_controlplane import controllers, options
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import environment, workloads

NOT_READY = "cluster.karmada.io/not-ready"
UNREACHABLE = "cluster.karmada.io/unreachable"
TOLERATION_SECONDS = 2
TIMERS = options.Options(
    health=options.ClusterHealth(update_frequency=0.5, success_threshold=1.0,
                                 failure_threshold=2.0, monitor_grace_period=20.0,
                                 probe_timeout=1.0),
    taints=options.Taints(failover_eviction_timeout=2.0),
    eviction=options.Eviction(rate=0.0, graceful_eviction_timeout=60.0),
    failback=options.Failback(window=3.0),
)
EVERY_CONTROLLER = tuple(controllers.NAMES)


@pytest.fixture
def scheduler(workload_env: environment.LocalEnvironment, python_env: dict[str, str],
              tmp_path: pathlib.Path) -> Iterator[subprocess.Popen[bytes]]:
    with cpkit.scheduler_process(workload_env, python_env, tmp_path / "scheduler.log") as proc:
        yield proc


def policy(name: str, namespace: str, *, failback: bool) -> dict[str, Any]:
    """Seed 000's policy: Divided 1:2 over member1/member2, tolerating failures briefly."""
    annotations = {FAILBACK_ANNOTATION: "true"} if failback else {}
    return {
        "apiVersion": resources.PROPAGATION_POLICIES.api_version, "kind": "PropagationPolicy",
        "metadata": {"name": f"{name}-propagation", "namespace": namespace,
                     "annotations": annotations},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name}],
            "placement": {
                "clusterAffinity": {"clusterNames": ["member1", "member2"]},
                "clusterTolerations": [
                    {"key": key, "operator": "Exists", "effect": "NoExecute",
                     "tolerationSeconds": TOLERATION_SECONDS}
                    for key in (NOT_READY, UNREACHABLE)],
                "replicaScheduling": {
                    "replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
                    "weightPreference": {"staticWeightList": [
                        {"targetCluster": {"clusterNames": ["member1"]}, "weight": 1},
                        {"targetCluster": {"clusterNames": ["member2"]}, "weight": 2}]}}}}}


FAILBACK_ANNOTATION = "clusterhealth.io/failback"


async def member_state(env: environment.LocalEnvironment, namespace: str, name: str,
                       member: str) -> int | None:
    """Available replicas of the member's settled Deployment; None when there is none.

    -1 while the Deployment exists but has not settled at its desired replicas.
    """
    async with env.client(member) as api:
        obj = await cpkit.get_or_none(api, resources.DEPLOYMENTS, name, namespace)
    if obj is None:
        return None
    status = obj.get("status") or {}
    settled = (status.get("observedGeneration") == obj["metadata"]["generation"]
               and status.get("availableReplicas", 0) == obj["spec"]["replicas"]
               and status.get("replicas", 0) == obj["spec"]["replicas"])
    return int(obj["spec"]["replicas"]) if settled else -1


async def wait_split(env: environment.LocalEnvironment, namespace: str, name: str,
                     expected: dict[str, int | None], members: tuple[str, ...],
                     timeout: float = 90.0) -> None:
    async def check() -> bool:
        found = {m: await member_state(env, namespace, name, m) for m in members}
        return found == expected
    await cpkit.eventually(check, timeout=timeout, what=f"members running {expected}")


def taint_effects(cluster: dict[str, Any], key: str) -> set[str]:
    return {str(t.get("effect")) for t in (cluster.get("spec") or {}).get("taints") or []
            if t.get("key") == key}


def ready(cluster: dict[str, Any]) -> tuple[str, str] | None:
    for c in (cluster.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return str(c.get("status")), str(c.get("reason"))
    return None


class Timeline:
    """When each step of the failover was first seen (monotonic seconds since the fault)."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.seen: dict[str, float] = {}
        self.wall: dict[str, float] = {}
        """Wall-clock time (epoch seconds) each step was first seen, to compare with taints."""
        self.time_added: dict[str, float] = {}
        """The not-ready taints' ``timeAdded`` by effect (epoch seconds, whole)."""

    def mark(self, what: str) -> None:
        self.seen.setdefault(what, time.monotonic() - self.start)
        self.wall.setdefault(what, time.time())

    def taints(self, cluster: dict[str, Any]) -> None:
        for taint in (cluster.get("spec") or {}).get("taints") or []:
            if taint.get("key") == NOT_READY and taint.get("timeAdded"):
                added = datetime.datetime.strptime(taint["timeAdded"], "%Y-%m-%dT%H:%M:%SZ")
                self.time_added.setdefault(
                    str(taint["effect"]), added.replace(tzinfo=datetime.UTC).timestamp())


async def fail_over(env: environment.LocalEnvironment, cp: kube.ApiClient, namespace: str,
                    name: str) -> Timeline:
    """Stop member1's API server and follow the chain until member2 runs 3 Ready Pods."""
    binding = f"{name}-deployment"
    line = Timeline()
    await env.stop_server("member1", kill=True)  # gone at once, as a crashed API server

    async def progressed() -> bool:
        cluster = await cp.get(resources.CLUSTERS, "member1")
        if ready(cluster) == ("False", "ClusterNotReachable"):
            line.mark("ready-false")
        effects = taint_effects(cluster, NOT_READY)
        line.taints(cluster)
        if "NoSchedule" in effects:
            line.mark("noschedule")
        if "NoExecute" in effects:
            line.mark("noexecute")
        rb = await cp.get(resources.RESOURCE_BINDINGS, binding, namespace=namespace)
        targets = {c["name"] for c in rb["spec"].get("clusters") or []}
        if "member1" not in targets:  # its graceful-eviction task may be gone already
            line.mark("evicted")
        if await member_state(env, namespace, name, "member2") == 3:
            line.mark("member2-runs-3")
        return "member2-runs-3" in line.seen and "evicted" in line.seen
    try:
        await cpkit.eventually(progressed, timeout=120, what="failover to member2")
    except AssertionError as exc:
        rb = await cp.get(resources.RESOURCE_BINDINGS, binding, namespace=namespace)
        raise AssertionError(f"{exc}; seen {line.seen}; binding spec.clusters "
                             f"{rb['spec'].get('clusters')}, tasks "
                             f"{rb['spec'].get('gracefulEvictionTasks')}, status "
                             f"{rb.get('status')}") from None
    return line


async def run_demo(env: environment.LocalEnvironment, *, failback: bool) -> None:
    name = f"nginx-{uuid.uuid4().hex[:6]}"
    namespace = f"failover-{uuid.uuid4().hex[:6]}"
    members = ("member1", "member2")
    async with env.client() as cp, cpkit.running_manager(cp, EVERY_CONTROLLER,
                                                         failover=TIMERS) as running:
        await cp.create(resources.NAMESPACES, {"metadata": {"name": namespace}})
        await cp.create(resources.DEPLOYMENTS, cpkit.deployment(name, namespace),
                        namespace=namespace)
        await cp.create(resources.PROPAGATION_POLICIES, policy(name, namespace,
                                                               failback=failback),
                        namespace=namespace)
        await wait_split(env, namespace, name, {"member1": 1, "member2": 2}, members)
        try:
            line = await fail_over(env, cp, namespace, name)
        finally:
            await env.start_server("member1")
            async with env.client("member1") as member1:  # leave it as found: running Pods
                await workloads.wait_runs_pods(member1)
        # the order of the chain, and nothing before its timer
        steps = ["ready-false", "noschedule", "noexecute", "evicted", "member2-runs-3"]
        assert all(s in line.seen for s in steps), line.seen
        assert [line.seen[s] for s in steps] == sorted(line.seen[s] for s in steps), line.seen
        assert line.seen["ready-false"] >= TIMERS.health.failure_threshold, line.seen
        # the timers, read from the taints themselves (seeing a step late cannot hide one that
        # came early): NoExecute once NoSchedule is eviction-timeout old, the eviction once
        # NoExecute is toleration old
        added = line.time_added
        assert added["NoExecute"] - added["NoSchedule"] >= \
            TIMERS.taints.failover_eviction_timeout, (added, line.seen)
        assert line.wall["evicted"] >= added["NoExecute"] + TOLERATION_SECONDS, \
            (added, line.wall)

        evictions = running.registry.get_sample_value(
            "clusterhealth_evictions_total", {"result": "success", "reason": "TaintUntolerated"})
        assert evictions is not None and evictions >= 1, "no eviction by the taint manager"

        # member1 back: its stale Work and Deployment go; Ready again, taints removed
        async def member1_clean() -> bool:
            cluster = await cp.get(resources.CLUSTERS, "member1")
            stale = await member_state(env, namespace, name, "member1")
            return (ready(cluster) == ("True", "ClusterReady")
                    and not taint_effects(cluster, NOT_READY)
                    and not taint_effects(cluster, UNREACHABLE)
                    and (stale is None or failback))
        await cpkit.eventually(member1_clean, timeout=90, what="member1 Ready and clean")
        if failback:
            await wait_split(env, namespace, name, {"member1": 1, "member2": 2}, members)
        else:
            works = await cp.list(resources.WORKS, namespace="karmada-es-member1")
            assert not [w for w in works["items"]
                        if w["metadata"]["name"].startswith(name)], "member1's Work stayed"
            # after the window (and a margin) nothing moved back
            await asyncio.sleep(TIMERS.failback.window + 3.0)
            await wait_split(env, namespace, name, {"member1": None, "member2": 3}, members,
                             timeout=5)
        await cp.delete(resources.DEPLOYMENTS, name, namespace=namespace)
        await wait_split(env, namespace, name, {"member1": None, "member2": None}, members)


async def test_member_stopped_fails_over_to_member2_and_stale_objects_go(
        workload_env: environment.LocalEnvironment,
        scheduler: subprocess.Popen[bytes]) -> None:
    await run_demo(workload_env, failback=False)


async def test_failback_returns_the_split_after_the_window(
        workload_env: environment.LocalEnvironment,
        scheduler: subprocess.Popen[bytes]) -> None:
    await run_demo(workload_env, failback=True)
