"""The scheduler process end to end against the real API server (``env``).

The scheduler runs as ``python -m clusterhealth_controlplane.scheduler`` (its own
Lease); the tests write ResourceBindings as the detector would and read back
``spec.clusters``, the ``Scheduled`` condition and Events.  Clusters are given the
``apiEnablements`` the cluster-status controller would report (Deployments served).
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from prometheus_client import parser

import testkit
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import environment, waiting

NAMESPACE = "default"
APIS = [{"groupVersion": "apps/v1", "resources": [{"name": "deployments", "kind": "Deployment"}]}]
FAST_ELECTION = ["--leader-elect-lease-duration", "3s", "--leader-elect-renew-deadline", "2s",
                 "--leader-elect-retry-period", "0.5s"]


async def serve_apis(cp: kube.ApiClient, cluster: str) -> None:
    """Report that ``cluster`` serves Deployments (as the cluster-status controller would)."""
    await cp.apply(resources.CLUSTERS, {"metadata": {"name": cluster},
                                        "status": {"apiEnablements": APIS}},
                   field_manager="test-cluster-status", subresource="status")


async def serving_cluster(cp: kube.ApiClient, name: str,
                          taints: list[dict[str, Any]] | None = None) -> None:
    """A Cluster that serves Deployments."""
    await testkit.make_cluster(cp, name, taints)
    await serve_apis(cp, name)


def divided(weights: dict[str, int]) -> dict[str, Any]:
    return {"clusterAffinity": {"clusterNames": sorted(weights)},
            "replicaScheduling": {
                "replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
                "weightPreference": {"staticWeightList": [
                    {"targetCluster": {"clusterNames": [name]}, "weight": weight}
                    for name, weight in sorted(weights.items())]}}}


def duplicated(clusters: list[str]) -> dict[str, Any]:
    return {"clusterAffinity": {"clusterNames": clusters},
            "replicaScheduling": {"replicaSchedulingType": "Duplicated"}}


async def make_binding(cp: kube.ApiClient, name: str, placement: dict[str, Any],
                       replicas: int = 3) -> None:
    await cp.create(resources.RESOURCE_BINDINGS, {
        "apiVersion": resources.RESOURCE_BINDINGS.api_version, "kind": "ResourceBinding",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment",
                              "namespace": NAMESPACE, "name": name, "uid": str(uuid.uuid4())},
                 "replicas": replicas, "placement": placement}})


async def set_placement(cp: kube.ApiClient, name: str, placement: dict[str, Any]) -> None:
    await cp.patch(resources.RESOURCE_BINDINGS, name, {"spec": {"placement": placement}},
                   namespace=NAMESPACE, patch_type="merge")


async def binding(cp: kube.ApiClient, name: str) -> dict[str, Any]:
    return await cp.get(resources.RESOURCE_BINDINGS, name, namespace=NAMESPACE)


def targets(obj: dict[str, Any]) -> dict[str, int]:
    return {t["name"]: t.get("replicas", 0) for t in (obj.get("spec") or {}).get("clusters") or []}


def scheduled(obj: dict[str, Any]) -> dict[str, Any] | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Scheduled":
            return dict(condition)
    return None


async def wait_targets(cp: kube.ApiClient, name: str, expected: dict[str, int]
                       ) -> dict[str, Any]:
    """Wait until the binding targets ``expected`` and says so (Scheduled, generation seen)."""
    async def check() -> dict[str, Any] | None:
        obj = await binding(cp, name)
        condition = scheduled(obj)
        done = (targets(obj) == expected and condition is not None
                and condition["status"] == "True"
                and obj["status"].get("schedulerObservedGeneration")
                == obj["metadata"]["generation"])
        return obj if done else None
    found: dict[str, Any] = await waiting.eventually(check, timeout=20)
    return found


async def wait_unschedulable(cp: kube.ApiClient, name: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        condition = scheduled(await binding(cp, name))
        return condition if condition is not None and condition["status"] == "False" else None
    found: dict[str, Any] = await waiting.eventually(check, timeout=20)
    return found


class Scheduler:
    def __init__(self, proc: subprocess.Popen[bytes], port: int, log: pathlib.Path) -> None:
        self.proc, self.port, self.log = proc, port, log

    def samples(self, name: str) -> dict[frozenset[tuple[str, str]], float]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=2) as r:
            text = r.read().decode()
        return {frozenset(s.labels.items()): s.value
                for family in parser.text_string_to_metric_families(text)
                for s in family.samples if s.name == name}


@pytest.fixture
def scheduler(env: environment.LocalEnvironment, python_env: dict[str, str],
              tmp_path: pathlib.Path) -> Iterator[Scheduler]:
    port = environment.free_port("127.0.0.1")
    log = tmp_path / "scheduler.log"
    argv = [sys.executable, "-m", "clusterhealth_controlplane.scheduler", "--kubeconfig",
            str(env.kubeconfig()), "--bind-address", "127.0.0.1", "--healthz-port", str(port),
            "--leader-elect-resource-namespace", "default",
            "--leader-elect-resource-name", testkit.unique("scheduler"), *FAST_ELECTION]
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=python_env)
    yield Scheduler(proc, port, log)
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture
async def cleanup(cp: kube.ApiClient) -> AsyncIterator[dict[str, list[str]]]:
    names: dict[str, list[str]] = {"bindings": [], "clusters": []}
    yield names
    for name in names["bindings"]:
        await cp.delete(resources.RESOURCE_BINDINGS, name, namespace=NAMESPACE, missing_ok=True)
    for name in names["clusters"]:
        await cp.delete(resources.CLUSTERS, name, missing_ok=True)


@pytest.fixture
async def members_serve(cp: kube.ApiClient, env: environment.LocalEnvironment) -> None:
    for name in env.members:
        await serve_apis(cp, name)


async def test_divided_rebalanced_then_duplicated(
        cp: kube.ApiClient, scheduler: Scheduler, members_serve: None,
        cleanup: dict[str, list[str]]) -> None:
    name = testkit.unique("web")
    cleanup["bindings"].append(name)
    await make_binding(cp, name, divided({"member1": 1, "member2": 2}))
    first = await wait_targets(cp, name, {"member1": 1, "member2": 2})
    condition = scheduled(first)
    assert condition is not None and condition["reason"] == "Success"
    assert "policy.karmada.io/applied-placement" in first["metadata"]["annotations"]
    assert first["status"].get("lastScheduledTime")

    await set_placement(cp, name, divided({"member1": 2, "member2": 1}))
    await wait_targets(cp, name, {"member1": 2, "member2": 1})

    await set_placement(cp, name, duplicated(["member1", "member2"]))
    last = await wait_targets(cp, name, {"member1": 3, "member2": 3})
    managers = {e["manager"] for e in last["metadata"].get("managedFields") or []
                if "f:clusters" in (e.get("fieldsV1") or {}).get("f:spec", {})}
    assert managers == {"clusterhealth-scheduler"}
    attempts = scheduler.samples("clusterhealth_scheduler_schedule_attempts_total")
    assert attempts[frozenset({("result", "scheduled")})] >= 3


async def test_missing_cluster_is_unschedulable_until_it_exists(
        cp: kube.ApiClient, scheduler: Scheduler, cleanup: dict[str, list[str]]) -> None:
    name, cluster = testkit.unique("web"), testkit.unique("later")
    cleanup["bindings"].append(name)
    cleanup["clusters"].append(cluster)
    await make_binding(cp, name, duplicated([cluster]))
    condition = await wait_unschedulable(cp, name)
    assert condition["reason"] == "NoClusterFit"
    assert condition["message"].startswith("0/")
    assert "clusters are available" in condition["message"]
    assert targets(await binding(cp, name)) == {}

    async def event() -> list[dict[str, Any]]:
        listed = await cp.list(resources.EVENTS, namespace=NAMESPACE,
                               field_selector=f"involvedObject.name={name}")
        return [e for e in listed["items"] if e.get("reason") == "ScheduleBindingFailed"]
    events = await waiting.eventually(event, timeout=20)
    assert events[0]["type"] == "Warning"
    assert "clusters are available" in events[0]["message"]

    await serving_cluster(cp, cluster)
    await wait_targets(cp, name, {cluster: 3})


async def test_a_tainted_cluster_is_avoided(
        cp: kube.ApiClient, scheduler: Scheduler, cleanup: dict[str, list[str]]) -> None:
    clean, tainted, name = testkit.unique("clean"), testkit.unique("tainted"), testkit.unique("web")
    cleanup["clusters"] += [clean, tainted]
    cleanup["bindings"].append(name)
    await serving_cluster(cp, clean)
    await serving_cluster(cp, tainted, [{"key": "maintenance", "effect": "NoSchedule"}])
    await make_binding(cp, name, duplicated([clean, tainted]))
    await wait_targets(cp, name, {clean: 3})


async def test_contradictory_spread_leaves_the_result_alone(
        cp: kube.ApiClient, scheduler: Scheduler, members_serve: None,
        cleanup: dict[str, list[str]]) -> None:
    name = testkit.unique("web")
    cleanup["bindings"].append(name)
    await make_binding(cp, name, divided({"member1": 1, "member2": 2}))
    await wait_targets(cp, name, {"member1": 1, "member2": 2})
    bad = duplicated(["member1", "member2"])
    bad["spreadConstraints"] = [{"spreadByField": "cluster", "minGroups": 3, "maxGroups": 2}]
    await set_placement(cp, name, bad)
    condition = await wait_unschedulable(cp, name)
    assert condition["reason"] == "Unschedulable"
    assert "minGroups 3 is greater than maxGroups 2" in condition["message"]
    obj = await binding(cp, name)
    assert targets(obj) == {"member1": 1, "member2": 2}


async def test_dynamic_weights_without_capacity_say_so(
        cp: kube.ApiClient, scheduler: Scheduler, members_serve: None,
        cleanup: dict[str, list[str]]) -> None:
    """No resourceSummary yet: no cluster can take a replica by available replicas."""
    name = testkit.unique("web")
    cleanup["bindings"].append(name)
    await make_binding(cp, name, {
        "clusterAffinity": {"clusterNames": ["member1", "member2"]},
        "replicaScheduling": {"replicaSchedulingType": "Divided",
                              "replicaDivisionPreference": "Weighted",
                              "weightPreference": {"dynamicWeight": "AvailableReplicas"}}})
    condition = await wait_unschedulable(cp, name)
    assert condition["reason"] == "Unschedulable"
    assert "3 replicas must be placed" in condition["message"]
    assert targets(await binding(cp, name)) == {}


async def test_a_backlog_gets_every_status(
        cp: kube.ApiClient, scheduler: Scheduler, members_serve: None,
        cleanup: dict[str, list[str]]) -> None:
    """Bindings created at once (a backlog: statuses deferred behind placements) all end
    Scheduled for their generation; a placement whose status is lost is claimed again."""
    names = [testkit.unique("many") for _ in range(40)]
    cleanup["bindings"].extend(names)
    for name in names:
        await make_binding(cp, name, divided({"member1": 1, "member2": 2}))
    for name in names:
        await wait_targets(cp, name, {"member1": 1, "member2": 2})

    lost = names[0]
    await cp.patch(resources.RESOURCE_BINDINGS, lost,
                   {"status": {"conditions": None, "schedulerObservedGeneration": None,
                               "lastScheduledTime": None}},
                   namespace=NAMESPACE, subresource="status")
    assert scheduled(await binding(cp, lost)) is None
    # a spec change that is no reason to schedule again: only the status is brought up to date
    await cp.patch(resources.RESOURCE_BINDINGS, lost,
                   {"spec": {"resource": {"resourceVersion": "2"}}}, namespace=NAMESPACE)
    claimed = await wait_targets(cp, lost, {"member1": 1, "member2": 2})
    condition = scheduled(claimed)
    assert condition is not None and condition["reason"] == "Success"
    assert claimed["status"].get("lastScheduledTime")
