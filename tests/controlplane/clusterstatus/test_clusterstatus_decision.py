"""The cluster-status controller's pure rules, on fake time (seconds as plain numbers).

Thresholds, grace period and summaries as Karmada's cluster-status controller
has them (see the module docstring of ``clusterstatus.decision``).
"""

from __future__ import annotations

import dataclasses
import datetime
import fractions
from collections.abc import Sequence
from typing import Any

import pytest

from clusterhealth_controlplane import options, quantities
from clusterhealth_controlplane.clusterstatus import decision
from clusterhealth_controlplane.scheduler import adapt
from clusterhealth_core.api import cluster

HEALTH = options.ClusterHealth()  # 10 s probes, 30 s thresholds, 40 s grace
OK, NOT_OK, GONE = decision.Outcome.OK, decision.Outcome.NOT_OK, decision.Outcome.UNREACHABLE
NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def run(start: str | None, probes: Sequence[decision.Outcome | None],
        health: options.ClusterHealth = HEALTH) -> list[str]:
    """Probe every ``update_frequency`` seconds; the Ready written after each (status/reason).

    ``None`` in ``probes``: no result that time (the client could not be built).
    """
    memory = decision.Memory(first_seen=0.0)
    current = None if start is None else decision.observed(
        {"True": OK, "NotReady": NOT_OK, "NotReachable": GONE}[start])
    written: list[str] = []
    for index, outcome in enumerate(probes):
        now = index * health.update_frequency
        if outcome is None:
            ready = decision.unknown(memory, current, now, health, "no Secret")
            if ready is None:
                written.append("-" if current is None else _label(current))
                continue
        else:
            memory, ready = decision.adjust(memory, decision.observed(outcome), current, now,
                                            health)
        current = ready
        written.append(_label(ready))
    return written


def _label(observation: decision.Observation) -> str:
    return f"{observation.status}/{observation.reason}"


T = "True/ClusterReady"
NR = "False/ClusterNotReady"
NX = "False/ClusterNotReachable"
U = "Unknown/ClusterStatusUnknown"


@pytest.mark.parametrize(("start", "probes", "expected"), [
    # just joined: the first result is written at once, whatever it is
    (None, [OK], [T]),
    (None, [GONE], [NX]),
    # a failure flips Ready only once it lasted the failure threshold (30 s: the 4th probe)
    ("True", [OK, GONE, GONE, GONE, GONE], [T, T, T, T, NX]),
    # a flap shorter than the threshold changes nothing
    ("True", [OK, GONE, GONE, OK, GONE, GONE, OK], [T] * 7),
    # recovery waits for the success threshold too
    ("NotReachable", [GONE, OK, OK, OK, OK], [NX, NX, NX, NX, T]),
    ("NotReachable", [OK, OK, GONE, OK, OK, OK, OK], [NX, NX, NX, NX, NX, NX, T]),
    # False to False with another reason: at once
    ("NotReachable", [NOT_OK], [NR]),
    ("True", [NOT_OK, NOT_OK, GONE, GONE], [T, T, T, NX]),
    # a new term finding Ready written counts the threshold from its first probe
    ("True", [GONE, GONE, GONE, GONE], [T, T, T, NX]),
    # no result at all: Ready kept for the grace period (40 s), then Unknown
    ("True", [None, None, None, None, None], [T, T, T, T, U]),
    ("True", [None, OK, None, None, None, None], [T, T, T, T, T, U]),
    # Unknown -> False at once; Unknown -> True after the success threshold
    ("True", [None, None, None, None, None, GONE], [T, T, T, T, U, NX]),
    ("True", [None, None, None, None, None, OK, OK, OK, OK], [T, T, T, T, U, U, U, U, T]),
])
def test_ready_over_time(start: str | None, probes: list[decision.Outcome | None],
                         expected: list[str]) -> None:
    assert run(start, probes) == expected


def test_thresholds_follow_the_options() -> None:
    quick = dataclasses.replace(HEALTH, update_frequency=1.0, failure_threshold=2.0,
                                success_threshold=5.0)
    assert run("True", [OK, GONE, GONE, GONE]) == [T, T, T, T]
    assert run("True", [OK, GONE, GONE, GONE], quick) == [T, T, T, NX]
    assert run("NotReachable", [OK] * 7, quick) == [NX] * 5 + [T, T]


def test_unknown_without_any_ready_says_never_updated() -> None:
    memory = decision.Memory(first_seen=0.0)
    assert decision.unknown(memory, None, 39.0, HEALTH, "x") is None
    found = decision.unknown(memory, None, 40.0, HEALTH, "Secret karmada-cluster/m1 missing")
    assert found is not None and found.reason == decision.NEVER_UPDATED
    assert "Secret karmada-cluster/m1 missing" in found.message


def test_probe_details_go_into_the_message() -> None:
    seen = decision.observed(NOT_OK, "/readyz answered 500")
    assert (seen.status, seen.reason) == ("False", "ClusterNotReady")
    assert seen.message.endswith("/readyz answered 500")
    assert decision.observed(OK, "ignored").message == decision.CLUSTER_READY_MESSAGE


@pytest.mark.parametrize(("beats", "start", "expected"), [
    # (lease renewTime per 10 s check) -> Ready the monitor writes (None: nothing)
    (["a", "b", "c", "d", "e", "f"], "True", [None] * 6),
    (["a", "a", "a", "a", "a", "a"], "True", [None, None, None, None, U, None]),
    ([None, None, None, None, None], None, [None, None, None, None,
                                            "Unknown/ClusterStatusNeverUpdated"]),
    (["a", "a", "a", "b", "b", "b", "b", "b"], "True", [None] * 7 + [U]),
])
def test_pull_clusters_go_unknown_when_the_heartbeat_stops(
        beats: list[str | None], start: str | None, expected: list[str | None]) -> None:
    memory = decision.Memory(first_seen=0.0)
    current = None if start is None else decision.observed(OK)
    written: list[str | None] = []
    for index, renewed in enumerate(beats):
        now = index * 10.0
        memory = decision.heartbeat(memory, renewed, current, now)
        ready = decision.pull_unknown(memory, current, now, HEALTH)
        written.append(None if ready is None else _label(ready))
        if ready is not None:
            current = ready
    assert written == expected
    assert 0.5 <= decision.pull_recheck(memory, 75.0, HEALTH) <= HEALTH.update_frequency


def test_condition_keeps_the_transition_time_while_the_status_holds() -> None:
    before = {"type": "Ready", "status": "True", "reason": "ClusterReady", "message": "m",
              "lastTransitionTime": "2025-01-01T00:00:00Z"}
    same = decision.condition("Ready", decision.observed(OK), before, NOW)
    assert same["lastTransitionTime"] == "2025-01-01T00:00:00Z"
    flipped = decision.condition("Ready", decision.observed(GONE), before, NOW)
    assert flipped["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert flipped["reason"] == "ClusterNotReachable"


# --- served APIs ----------------------------------------------------------------------------

AGGREGATED_CORE = {"kind": "APIGroupDiscoveryList", "items": [{"metadata": {}, "versions": [
    {"version": "v1", "resources": [
        {"resource": "pods", "responseKind": {"kind": "Pod"},
         "subresources": [{"subresource": "status"}]},
        {"resource": "configmaps", "responseKind": {"kind": "ConfigMap"}}]}]}]}
AGGREGATED_GROUPS = {"kind": "APIGroupDiscoveryList", "items": [
    {"metadata": {"name": "apps"}, "versions": [
        {"version": "v1", "resources": [{"resource": "deployments",
                                         "responseKind": {"kind": "Deployment"}}]}]},
    {"metadata": {"name": "metrics.k8s.io"}, "versions": [
        {"version": "v1beta1", "freshness": "Stale", "resources": []}]}]}


def test_aggregated_discovery_becomes_sorted_enablements() -> None:
    found, partial = decision.aggregated_enablements([AGGREGATED_CORE, AGGREGATED_GROUPS])
    assert found == [
        {"groupVersion": "apps/v1", "resources": [{"name": "deployments", "kind": "Deployment"}]},
        {"groupVersion": "metrics.k8s.io/v1beta1", "resources": []},
        {"groupVersion": "v1", "resources": [{"name": "configmaps", "kind": "ConfigMap"},
                                             {"name": "pods", "kind": "Pod"}]}]
    assert partial  # a stale aggregated API
    assert decision.api_condition(found, partial).reason == decision.APIS_PARTIAL
    assert decision.api_condition(found, False).status == "True"
    assert decision.api_condition([], True).reason == decision.APIS_EMPTY
    # the shape parses as the API type the scheduler reads
    for entry in found:
        cluster.APIEnablement.from_dict(entry)


def test_merged_per_document_enablements_are_those_of_all_documents_at_once() -> None:
    parts = [decision.aggregated_enablements([d]) for d in (AGGREGATED_CORE, AGGREGATED_GROUPS)]
    assert decision.merged_enablements(parts) == decision.aggregated_enablements(
        [AGGREGATED_CORE, AGGREGATED_GROUPS])
    assert decision.merged_enablements([parts[0]]) == (parts[0][0], False)
    assert decision.merged_enablements([]) == ([], False)


def test_legacy_discovery_documents() -> None:
    assert decision.is_aggregated(AGGREGATED_CORE)
    assert not decision.is_aggregated({"kind": "APIVersions", "versions": ["v1"]})
    versions = decision.legacy_group_versions(
        {"kind": "APIVersions", "versions": ["v1"]},
        {"groups": [{"name": "apps", "versions": [{"groupVersion": "apps/v1"}]}]})
    assert versions == ["v1", "apps/v1"]
    listing = {"groupVersion": "apps/v1", "resources": [
        {"name": "deployments/scale", "kind": "Scale"},
        {"name": "deployments", "kind": "Deployment"}]}
    assert decision.legacy_enablement(listing) == {
        "groupVersion": "apps/v1", "resources": [{"name": "deployments", "kind": "Deployment"}]}


# --- nodes, pods and the summaries ---------------------------------------------------------

def node(name: str, ready: bool = True, cpu: str = "8", memory: str = "32Gi",
         pods: str = "110") -> dict[str, Any]:
    return decision.node_fields({
        "metadata": {"name": name, "resourceVersion": "1", "labels": {"a": "b"}},
        "spec": {"taints": []},
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
                   "capacity": {"cpu": cpu}, "images": [{"names": ["x"]}],
                   "conditions": [{"type": "MemoryPressure", "status": "False"},
                                  {"type": "Ready", "status": "True" if ready else "False"}]}})


def pod(name: str, node_name: str | None, phase: str = "Running",
        containers: Sequence[dict[str, str]] = ({"cpu": "500m", "memory": "1Gi"},),
        init: Sequence[dict[str, str]] = (), overhead: dict[str, str] | None = None
        ) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": f"c{i}", "image": "i", "env": [{"name": "E", "value": "v"}],
                        "resources": {"requests": r, "limits": r}}
                       for i, r in enumerate(containers)],
        "initContainers": [{"name": f"i{i}", "resources": {"requests": r}}
                           for i, r in enumerate(init)]}
    if node_name:
        spec["nodeName"] = node_name
    if overhead:
        spec["overhead"] = overhead
    return decision.pod_fields({"metadata": {"name": name, "namespace": "d", "uid": name,
                                             "annotations": {"big": "x" * 100}},
                                "spec": spec, "status": {"phase": phase}})


def test_transforms_keep_only_what_the_summaries_need() -> None:
    kept = pod("p", "n1", containers=[{"cpu": "250m"}, {"cpu": "250m", "memory": "64Mi"}],
               init=[{"cpu": "2"}], overhead={"memory": "64Mi"})
    assert set(kept) == {"metadata", "nodeName", "phase", "request"}
    assert "annotations" not in kept["metadata"]
    assert kept["request"] == {"cpu": 2000, "memory": 128 * 2**20}  # milli-CPU, bytes
    assert set(node("n1")) == {"metadata", "allocatable", "ready"}
    assert not node("n2", ready=False)["ready"]


def test_node_and_resource_summaries() -> None:
    nodes = [node("n1"), node("n2", ready=False, cpu="3500m", memory="16Gi")]
    pods = [pod("running", "n1"), pod("pending", None, phase="Pending"),
            pod("bound-pending", "n2", phase="Pending"),
            pod("done", "n1", phase="Succeeded"), pod("failed", None, phase="Failed")]
    assert decision.node_summary(nodes) == {"totalNum": 2, "readyNum": 1}
    summary = decision.resource_summary(nodes, pods)
    assert summary == {
        "allocatable": {"cpu": "11500m", "memory": "48Gi", "pods": "220"},
        "allocated": {"cpu": "1", "memory": "2Gi", "pods": "2"},
        "allocating": {"cpu": "500m", "memory": "1Gi", "pods": "1"}}
    assert decision.resource_summary([], []) == {
        "allocatable": {}, "allocated": {"cpu": "0", "memory": "0", "pods": "0"},
        "allocating": {"cpu": "0", "memory": "0", "pods": "0"}}


def test_the_scheduler_reads_the_summary_as_written() -> None:
    """What the scheduler's dynamic weights compute from the summary we write."""
    summary = decision.resource_summary([node("n1", cpu="4", pods="10")],
                                        [pod(f"p{i}", "n1") for i in range(3)]
                                        + [pod("q", None, phase="Pending")])
    parsed = cluster.ResourceSummary.from_dict(summary)
    free = adapt.free_resources(parsed)
    assert free == {"cpu": 2000, "memory": 28 * 2**30, "pods": 6}
    assert adapt.available_replicas(free, {"cpu": "500m"}) == 4
    assert adapt.available_replicas(free, None) == 6


@pytest.mark.parametrize(("resource", "amount", "written"), [
    ("cpu", fractions.Fraction(3, 2), "1500m"), ("cpu", fractions.Fraction(16), "16"),
    ("cpu", fractions.Fraction(1, 3000), "1m"), ("memory", fractions.Fraction(64 * 2**30), "64Gi"),
    ("memory", fractions.Fraction(1536 * 2**20), "1536Mi"), ("memory", fractions.Fraction(1000),
                                                             "1000"),
    ("pods", fractions.Fraction(220), "220"), ("hugepages-2Mi", fractions.Fraction(2**21), "2Mi"),
    ("nvidia.com/gpu", fractions.Fraction(0), "0"),
])
def test_quantities_round_trip(resource: str, amount: fractions.Fraction, written: str) -> None:
    text = quantities.format_for(resource, amount)
    assert text == written
    assert quantities.parse(text) >= amount


# --- what is written ----------------------------------------------------------------------

def test_desired_status_keeps_the_fields_not_refreshed_and_others_out() -> None:
    current = {"kubernetesVersion": "v1.33.0", "apiEnablements": [{"groupVersion": "v1"}],
               "remedyActions": ["TrafficControl"],
               "conditions": [{"type": "ServiceDomainNameResolutionReady", "status": "False"},
                              {"type": "Ready", "status": "True", "reason": "ClusterReady"}]}
    ready = decision.condition("Ready", decision.observed(GONE), current["conditions"][1], NOW)
    wanted = decision.desired_status(current, ready, {})
    assert wanted == {"kubernetesVersion": "v1.33.0", "apiEnablements": [{"groupVersion": "v1"}],
                      "conditions": [ready]}
    assert decision.differs(current, wanted)
    refreshed = decision.desired_status(current, ready, {"kubernetesVersion": "v1.34.4"})
    assert refreshed["kubernetesVersion"] == "v1.34.4"
    # written as it stands: nothing to write
    assert not decision.differs({**current, **wanted}, wanted)


FAST = options.ClusterHealth(update_frequency=0.5, failure_threshold=2.0,
                             success_threshold=1.0)


@pytest.mark.parametrize(("observed", "since", "written", "now", "expected"), [
    (None, 0.0, "True", 0.0, 0.5),          # nothing probed yet: the period
    ("True", 0.0, "True", 3.0, 0.5),        # results agree with Ready: the period
    ("False", 10.0, "False", 11.0, 0.5),
    ("False", 10.0, "True", 10.0, 0.5),     # a failure: its threshold is 2 s away
    ("False", 10.0, "True", 11.7, 0.3),     # ... 0.3 s away: probe then, not 0.5 s later
    ("False", 10.0, "True", 12.0, 0.01),    # due now (the write lagged): at once
    ("True", 10.0, "False", 10.8, 0.2),     # recovery: the success threshold (1 s)
    ("Unknown", 10.0, "True", 11.9, 0.1),   # Unknown waits as False does
])
def test_a_flip_is_probed_again_when_its_threshold_falls_due(
        observed: str | None, since: float, written: str, now: float,
        expected: float) -> None:
    memory = decision.Memory(first_seen=0.0, observed_status=observed, since=since)
    ready = decision.Observation(written, "r", "m")
    assert decision.recheck_after(memory, ready, now, FAST) == pytest.approx(expected)
