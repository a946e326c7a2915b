"""Failback's rules at fixed times: the opt-in, the record, the window, the trigger, in flight."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest

from clusterhealth_controlplane.failback import controller, decision
from clusterhealth_controlplane.scheduler import adapt

T0 = datetime.datetime(2026, 1, 1, 12, 0, 0, tzinfo=datetime.UTC)
WINDOW = 300.0


def stamp(seconds: float) -> str:
    return (T0 + datetime.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def at(seconds: float) -> datetime.datetime:
    return T0 + datetime.timedelta(seconds=seconds)


def static(weights: dict[str, int], names: list[str] | None = None) -> dict[str, Any]:
    return {"clusterAffinity": {"clusterNames": names if names is not None else list(weights)},
            "replicaScheduling": {
                "replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
                "weightPreference": {"staticWeightList": [
                    {"targetCluster": {"clusterNames": [c]}, "weight": w}
                    for c, w in weights.items()]}}}


STATIC = static({"member1": 1, "member2": 2})
DYNAMIC = {"clusterAffinity": {"clusterNames": ["member1", "member2"]},
           "replicaScheduling": {"replicaSchedulingType": "Divided",
                                 "replicaDivisionPreference": "Weighted",
                                 "weightPreference": {"dynamicWeight": "AvailableReplicas"}}}
DUPLICATED = {"clusterAffinity": {"clusterNames": ["member1", "member2"]},
              "replicaScheduling": {"replicaSchedulingType": "Duplicated"}}
AGGREGATED = {"clusterAffinity": {"clusterNames": ["member1", "member2"]},
              "replicaScheduling": {"replicaSchedulingType": "Divided",
                                    "replicaDivisionPreference": "Aggregated"}}


def eviction_task(cluster: str = "member1", created: float = 0.0,
                  producer: str = "TaintManager") -> dict[str, Any]:
    return {"fromCluster": cluster, "reason": "TaintUntolerated", "producer": producer,
            "replicas": 1, "creationTimestamp": stamp(created)}


def binding(placement: dict[str, Any] | None = None, targets: dict[str, int] | None = None,
            tasks: list[dict[str, Any]] | None = None,
            recorded: dict[str, str] | None = None,
            annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    marks = {"propagationpolicy.karmada.io/name": "pp",
             "propagationpolicy.karmada.io/namespace": "default", **(annotations or {})}
    if recorded is not None:
        marks[decision.EVICTED_FROM] = json.dumps(recorded)
    return {"metadata": {"name": "web-deployment", "namespace": "default",
                         "resourceVersion": "9", "annotations": marks},
            "spec": {"placement": placement or STATIC,
                     "clusters": [{"name": c, "replicas": r}
                                  for c, r in (targets or {"member2": 3}).items()],
                     "gracefulEvictionTasks": tasks or [], **spec},
            "status": {}}


def cluster(name: str, ready: str = "True", since: float = -1000.0,
            taints: list[dict[str, Any]] | None = None,
            labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {"syncMode": "Push", "taints": taints or []},
            "status": {"conditions": [{"type": "Ready", "status": ready,
                                       "reason": "ClusterReady", "message": "cluster is ready",
                                       "lastTransitionTime": stamp(since)}]}}


def states(*objs: dict[str, Any], seen: float = -1000.0) -> dict[str, decision.ClusterState]:
    return {o["metadata"]["name"]: decision.ClusterState(
        adapt.cluster_entry(o).view, decision.stable_since(o, at(seen))) for o in objs}


def plan(obj: dict[str, Any], clusters: dict[str, decision.ClusterState], now: float,
         wanted: bool = True) -> decision.Plan:
    return decision.plan(obj, wanted, controller.placement_of(obj), clusters, at(now), WINDOW)


# --- opt-in and scope -------------------------------------------------------------

@pytest.mark.parametrize(("value", "expected"), [
    ("true", True), ("True", True), (" true ", True), ("false", False), ("yes", False),
    ("", False), (None, False)])
def test_the_opt_in_is_the_policy_annotation_set_to_true(value: str | None,
                                                        expected: bool) -> None:
    annotations = {} if value is None else {decision.OPT_IN: value}
    assert decision.opted_in({"metadata": {"annotations": annotations}}) is expected
    assert decision.opted_in(None) is False


def test_the_binding_names_its_policy_by_the_detectors_claim() -> None:
    assert decision.policy_key(binding()) == "default/pp"
    crb = {"metadata": {"name": "x", "annotations": {
        "clusterpropagationpolicy.karmada.io/name": "cpp"}}}
    assert decision.policy_key(crb) == "cpp"
    assert decision.policy_key({"metadata": {"name": "x"}}) is None


@pytest.mark.parametrize(("placement", "expected"), [
    (STATIC, True), (DYNAMIC, False), (DUPLICATED, False), (AGGREGATED, False),
    ({"clusterAffinity": {"clusterNames": ["member1"]}}, False)])
def test_only_static_weight_divisions_are_failed_back(placement: dict[str, Any],
                                                      expected: bool) -> None:
    assert decision.static_weighted(controller.placement_of(binding(placement))) is expected


@pytest.mark.parametrize("placement", [DYNAMIC, DUPLICATED, AGGREGATED])
def test_other_bindings_record_nothing(placement: dict[str, Any]) -> None:
    found = plan(binding(placement, tasks=[eviction_task()]), states(cluster("member1")), 10)
    assert found.record == {} and found.due == ()


def test_without_the_opt_in_nothing_is_recorded_and_an_old_record_is_dropped() -> None:
    found = plan(binding(tasks=[eviction_task()], recorded={"member3": stamp(0)}),
                 states(cluster("member1")), 10, wanted=False)
    assert found.record == {} and found.due == ()
    assert found.dropped == (("member3", decision.DROP_NOT_WANTED),)


# --- the record -------------------------------------------------------------------

def test_a_taint_manager_eviction_is_recorded_with_the_tasks_time() -> None:
    obj = binding(tasks=[eviction_task(created=5), eviction_task("member3", producer="Other")])
    found = plan(obj, states(cluster("member1")), 10)
    assert found.record == {"member1": stamp(5)} and found.changed(obj)
    assert found.due == ()  # the task is still there: the scheduler would skip member1


def test_a_recorded_eviction_is_not_recorded_again() -> None:
    obj = binding(tasks=[eviction_task(created=5)], recorded={"member1": stamp(1)})
    found = plan(obj, states(cluster("member1")), 10)
    assert found.record == {"member1": stamp(1)} and not found.changed(obj)


def test_a_malformed_record_counts_as_none() -> None:
    obj = binding(annotations={decision.EVICTED_FROM: "not json"})
    assert decision.record(obj) == {}
    obj = binding(annotations={decision.EVICTED_FROM: '{"member1": "yesterday"}'})
    assert decision.record(obj) == {}


@pytest.mark.parametrize(("case", "obj", "clusters", "why"), [
    ("back in spec.clusters", binding(targets={"member1": 1, "member2": 2},
                                      recorded={"member1": stamp(0)}),
     states(cluster("member1")), decision.DROP_BACK),
    ("cluster deleted", binding(recorded={"member1": stamp(0)}), {}, decision.DROP_GONE),
    ("no longer in the affinity", binding(static({"member1": 1, "member2": 2}, ["member2"]),
                                          recorded={"member1": stamp(0)}),
     states(cluster("member1")), decision.DROP_UNSELECTED),
    ("no weight entry", binding(static({"member2": 2}, ["member1", "member2"]),
                                recorded={"member1": stamp(0)}),
     states(cluster("member1")), decision.DROP_UNSELECTED),
])
def test_a_record_that_cannot_fail_back_is_dropped(case: str, obj: dict[str, Any],
                                                   clusters: dict[str, decision.ClusterState],
                                                   why: str) -> None:
    found = plan(obj, clusters, 10_000)
    assert found.record == {} and found.due == (), case
    assert found.dropped == (("member1", why),), case


# --- the window -------------------------------------------------------------------

def test_stable_since_is_readys_transition_or_when_first_seen_healthy() -> None:
    assert decision.stable_since(cluster("m", since=50), at(10)) == at(50)
    assert decision.stable_since(cluster("m", since=10), at(50)) == at(50)
    assert decision.stable_since(cluster("m", since=10), None) is None
    assert decision.stable_since(cluster("m", ready="False"), at(0)) is None
    assert decision.stable_since(cluster("m", ready="Unknown"), at(0)) is None
    for effect in ("NoSchedule", "NoExecute"):
        tainted = cluster("m", taints=[{"key": "cluster.karmada.io/not-ready",
                                        "effect": effect}])
        assert decision.stable_since(tainted, at(0)) is None
    prefer = cluster("m", since=0, taints=[{"key": "x", "effect": "PreferNoSchedule"}])
    assert decision.stable_since(prefer, at(0)) == at(0)


def test_waits_for_the_window_then_is_due() -> None:
    obj = binding(recorded={"member1": stamp(0)})
    member1 = cluster("member1", since=100)
    early = plan(obj, states(member1, seen=100), 250)
    assert early.due == () and early.wait == pytest.approx(150.0)
    assert early.record == {"member1": stamp(0)}
    due = plan(obj, states(member1, seen=100), 400)
    assert due.due == ("member1",) and due.wait is None


def test_an_unhealthy_recorded_cluster_waits_without_a_timer() -> None:
    obj = binding(recorded={"member1": stamp(0)})
    found = plan(obj, states(cluster("member1", ready="False")), 10_000)
    assert found.due == () and found.wait is None and found.record == {"member1": stamp(0)}


def test_tainted_again_during_the_window_starts_it_over() -> None:
    obj = binding(recorded={"member1": stamp(0)})
    # untainted at 100, tainted at 200 (not healthy: no timer), untainted again at 250
    assert plan(obj, states(cluster("member1", since=0), seen=100), 150).wait == 250
    tainted = cluster("member1", since=0, taints=[{"key": "k", "effect": "NoSchedule"}])
    assert plan(obj, states(tainted, seen=100), 200).wait is None
    again = plan(obj, states(cluster("member1", since=0), seen=250), 420)
    assert again.due == () and again.wait == pytest.approx(130.0)
    assert plan(obj, states(cluster("member1", since=0), seen=250), 550).due == ("member1",)


def test_not_due_while_a_task_from_the_cluster_is_left() -> None:
    obj = binding(tasks=[eviction_task()], recorded={"member1": stamp(0)})
    found = plan(obj, states(cluster("member1")), 10_000)
    assert found.due == () and found.record == {"member1": stamp(0)}


def test_several_clusters_each_on_its_own_window() -> None:
    obj = binding(static({"member1": 1, "member2": 2, "member3": 1}),
                  recorded={"member1": stamp(0), "member3": stamp(0)})
    found = plan(obj, {**states(cluster("member1"), seen=0),
                       **states(cluster("member3"), seen=200)}, 300)
    assert found.due == ("member1",) and found.wait == pytest.approx(200.0)


# --- trigger and in flight --------------------------------------------------------

def test_the_trigger_comes_after_the_last_schedule() -> None:
    obj = binding()
    assert decision.trigger_time(obj, at(10.7)) == at(10)
    obj["status"]["lastScheduledTime"] = stamp(10)
    assert decision.trigger_time(obj, at(10.2)) == at(11)


def test_the_patch_guards_a_trigger_by_resource_version_not_the_record_alone() -> None:
    obj = binding(recorded={"member1": stamp(0)})
    assert decision.failback_patch(obj, {}, at(400)) == {
        "metadata": {"resourceVersion": "9", "annotations": {
            decision.EVICTED_FROM: None, decision.TRIGGERED: stamp(400)}},
        "spec": {"rescheduleTriggeredAt": stamp(400)}}
    assert decision.failback_patch(obj, {"member3": stamp(1)}, None) == {
        "metadata": {"annotations": {
            decision.EVICTED_FROM: json.dumps({"member3": stamp(1)}, separators=(",", ":"))}}}


@pytest.mark.parametrize(("case", "last", "spec_trigger", "now", "expected"), [
    ("scheduler has not run since", None, stamp(400), 410, True),
    ("scheduled before the trigger", stamp(390), stamp(400), 410, True),
    ("scheduler observed it", stamp(400), stamp(400), 410, False),
    ("scheduler observed it later", stamp(405), stamp(400), 410, False),
    ("someone else triggered since", None, stamp(500), 510, False),
    ("never observed: the slot is freed after the limit", None, stamp(400),
     400 + decision.IN_FLIGHT_LIMIT, False),
])
def test_in_flight_until_the_scheduler_observes_the_trigger(
        case: str, last: str | None, spec_trigger: str, now: float, expected: bool) -> None:
    obj = binding(annotations={decision.TRIGGERED: stamp(400)},
                  rescheduleTriggeredAt=spec_trigger)
    if last is not None:
        obj["status"]["lastScheduledTime"] = last
    assert decision.in_flight(obj, at(now)) is expected, case
    assert decision.count_in_flight([obj, binding()], at(now)) == int(expected)
