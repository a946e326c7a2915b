"""Seed 000's failover scenario, shared by the tests that run it on either control plane.

Divided 1:2 over member1/member2 on members that run Pods; member1's API
server is killed and the chain is followed until member2 runs the 3 replicas
(:func:`fail_over`), with the time each step was first seen (:class:`Timeline`)
so the tests can check the order and the timers, never the speed.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Sequence
from typing import Any

import cpkit

import testkit
from clusterhealth_controlplane import options
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import environment

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
FAILBACK_ANNOTATION = "clusterhealth.io/failback"
MEMBERS = ("member1", "member2")
STEPS = ("ready-false", "noschedule", "noexecute", "evicted", "member2-runs-3")
"""The chain's steps in the order they must happen."""


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
                     expected: dict[str, int | None], members: tuple[str, ...] = MEMBERS,
                     timeout: float = 90.0) -> None:
    async def check() -> bool:
        found = {m: await member_state(env, namespace, name, m) for m in members}
        return found == expected
    await testkit.eventually(check, timeout=timeout, what=f"{name}: members running {expected}")


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

    def check_order(self, timers: options.Options = TIMERS) -> None:
        """Every step seen, in the chain's order, none before its timer."""
        assert all(s in self.seen for s in STEPS), self.seen
        assert [self.seen[s] for s in STEPS] == sorted(self.seen[s] for s in STEPS), self.seen
        assert self.seen["ready-false"] >= timers.health.failure_threshold, self.seen
        # the timers, read from the taints themselves (seeing a step late cannot hide one that
        # came early): NoExecute once NoSchedule is eviction-timeout old, the eviction once
        # NoExecute is toleration old
        added = self.time_added
        assert added["NoExecute"] - added["NoSchedule"] >= \
            timers.taints.failover_eviction_timeout, (added, self.seen)
        assert self.wall["evicted"] >= added["NoExecute"] + TOLERATION_SECONDS, \
            (added, self.wall)


async def fail_over(env: environment.LocalEnvironment, cp: kube.ApiClient, namespace: str,
                    names: Sequence[str]) -> Timeline:
    """Kill member1's API server; follow the chain until member2 runs 3 Ready Pods of each.

    ``evicted`` is seen once every binding is off member1, ``member2-runs-3`` once
    member2 runs all 3 replicas of every Deployment.
    """
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
        evicted = True
        for name in names:
            rb = await cp.get(resources.RESOURCE_BINDINGS, f"{name}-deployment",
                              namespace=namespace)
            # its graceful-eviction task may be gone already
            evicted &= "member1" not in {c["name"] for c in rb["spec"].get("clusters") or []}
        if evicted:
            line.mark("evicted")
        if all([await member_state(env, namespace, name, "member2") == 3 for name in names]):
            line.mark("member2-runs-3")
        return "member2-runs-3" in line.seen and "evicted" in line.seen
    try:
        await testkit.eventually(progressed, timeout=120, what="failover to member2")
    except AssertionError as exc:
        found = []
        for name in names:
            rb = await cp.get(resources.RESOURCE_BINDINGS, f"{name}-deployment",
                              namespace=namespace)
            found.append(f"{name}: spec.clusters {rb['spec'].get('clusters')}, tasks "
                         f"{rb['spec'].get('gracefulEvictionTasks')}, status {rb.get('status')}")
        raise AssertionError(f"{exc}; seen {line.seen}; " + "; ".join(found)) from None
    return line


async def member1_clean(cp: kube.ApiClient) -> bool:
    """member1 Ready again, with none of the not-ready/unreachable taints."""
    return await clean(cp, "member1")


async def members_clean(cp: kube.ApiClient) -> bool:
    """member1 and member2 Ready and untainted: what a test that places on both starts from
    (an earlier test in the session's environment may have left a Cluster unready)."""
    return await clean(cp, "member1") and await clean(cp, "member2")


async def clean(cp: kube.ApiClient, name: str) -> bool:
    """Cluster ``name`` Ready, with none of the not-ready/unreachable taints."""
    cluster = await cp.get(resources.CLUSTERS, name)
    return (ready(cluster) == ("True", "ClusterReady")
            and not taint_effects(cluster, NOT_READY)
            and not taint_effects(cluster, UNREACHABLE))
