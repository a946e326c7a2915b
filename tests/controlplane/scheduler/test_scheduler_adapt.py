"""Tables for the adapters (API models to the scheduler's views), the flags and the timing hook."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from clusterhealth_controlplane.scheduler import __main__ as scheduler_main
from clusterhealth_controlplane.scheduler import adapt, algorithm, framework, plugins, spread
from clusterhealth_controlplane.scheduler import controller as scheduler_controller
from clusterhealth_controlplane.scheduler import settings as scheduler_settings
from clusterhealth_core import builder, settings
from clusterhealth_core.api import cluster, policy, work


def cluster_obj(name: str = "c1", **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"env": "prod"}},
            "spec": {"syncMode": "Push", "provider": "aws", "region": "eu", "zone": "eu-1",
                     "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
            "status": status}


def binding_spec(**extra: Any) -> work.ResourceBindingSpec:
    raw = {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                        "uid": "template-uid"}, **extra}
    return work.ResourceBindingSpec.from_dict(raw)


@pytest.mark.parametrize(("text", "value"), [
    ("1", 1), ("250m", 0.25), ("1.5Gi", 1.5 * 2**30), ("2k", 2000), ("1e3", 1000),
    (7, 7), ("100Mi", 100 * 2**20), (".5", 0.5),
])
def test_quantities(text: cluster.Quantity, value: float) -> None:
    assert float(adapt.quantity(text)) == value


def test_a_bad_quantity_is_refused() -> None:
    with pytest.raises(ValueError, match="not a quantity"):
        adapt.quantity("12 apples")


@pytest.mark.parametrize(("summary", "request_", "expected"), [
    (None, {"cpu": "1"}, 0),  # no summary: nothing, as Karmada's estimator
    ({"allocatable": {"pods": 110}}, {}, 110),
    ({"allocatable": {"pods": 110, "cpu": "8"}, "allocated": {"cpu": "2"},
      "allocating": {"cpu": "1"}}, {"cpu": "500m"}, 10),
    ({"allocatable": {"pods": 4, "cpu": "8"}}, {"cpu": "1"}, 4),  # pods bound
    ({"allocatable": {"pods": 110, "memory": "4Gi"}}, {"memory": "1Gi", "cpu": "1"}, 0),
    ({"allocatable": {"pods": 110, "allocated": 1}, "allocated": {"pods": 120}}, {}, 0),
    ({"allocatable": {"pods": 110, "memory": "4Gi"}}, {"memory": "1.5Gi"}, 2),
])
def test_available_replicas(summary: dict[str, Any] | None, request_: dict[str, str],
                            expected: int) -> None:
    free = None if summary is None else adapt.free_resources(
        cluster.ResourceSummary.from_dict(summary))
    assert adapt.available_replicas(free, request_) == expected


def test_cluster_view() -> None:
    entry = adapt.cluster_entry(cluster_obj(
        apiEnablements=[{"groupVersion": "apps/v1",
                         "resources": [{"name": "deployments", "kind": "Deployment"}]}],
        conditions=[{"type": "CompleteAPIEnablements", "status": "True", "reason": "R",
                     "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}]))
    view = entry.view
    assert view == framework.ClusterView(
        name="c1", labels={"env": "prod"}, provider="aws", region="eu", zones=("eu-1",),
        taints=(framework.Taint("k", "NoSchedule", "v"),),
        api_enablements={"apps/v1": frozenset({"Deployment"})},
        api_enablements_complete=True, available_replicas=0)
    assert entry.for_request({"cpu": "1"}) is view  # no summary: 0, the same view


def test_a_cluster_without_apis_has_not_reported_them() -> None:
    view = adapt.cluster_entry(cluster_obj()).view
    assert view.api_enablements is None
    assert view.api_enablements_complete is False


def test_a_cluster_with_a_summary_gets_available_replicas_per_request() -> None:
    entry = adapt.cluster_entry(cluster_obj(
        resourceSummary={"allocatable": {"pods": 110, "cpu": "4"}}))
    assert entry.for_request({"cpu": "1"}).available_replicas == 4
    assert entry.for_request({}).available_replicas == 110


def test_binding_view_keeps_order_and_uses_the_template_uid() -> None:
    spec = binding_spec(replicas=5, clusters=[{"name": "b", "replicas": 3},
                                              {"name": "a", "replicas": 2}],
                        gracefulEvictionTasks=[{"fromCluster": "c", "reason": "TaintUntolerated",
                                                "producer": "TaintManager"}],
                        replicaRequirements={"resourceRequest": {"cpu": "1"}})
    view = adapt.binding_view(spec)
    assert [t.name for t in view.clusters] == ["b", "a"]
    assert view.uid == "template-uid"
    assert view.evicting_from == frozenset({"c"})
    assert view.has_replica_requirements and view.replicas == 5
    assert adapt.resource_request(spec) == {"cpu": "1"}


PLACEMENT = {
    "clusterAffinity": {"clusterNames": ["a", "b"], "exclude": ["c"],
                        "labelSelector": {"matchLabels": {"env": "prod"},
                                          "matchExpressions": [{"key": "tier", "operator": "In",
                                                                "values": ["1"]}]},
                        "fieldSelector": {"matchExpressions": [
                            {"key": "region", "operator": "In", "values": ["eu"]}]}},
    "clusterTolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
    "spreadConstraints": [{"spreadByField": "region", "minGroups": 1, "maxGroups": 2},
                          {"spreadByLabel": "team", "maxGroups": 1}],
    "replicaScheduling": {"replicaSchedulingType": "Divided",
                          "replicaDivisionPreference": "Weighted",
                          "weightPreference": {"staticWeightList": [
                              {"targetCluster": {"clusterNames": ["a"]}, "weight": 2}]}},
}


def test_placement_view() -> None:
    view = adapt.placement_view(policy.Placement.from_dict(PLACEMENT))
    assert view.affinity == framework.ClusterAffinity(
        cluster_names=("a", "b"), exclude=("c",),
        label_selector=framework.LabelSelector(
            {"env": "prod"}, (framework.Requirement("tier", "In", ("1",)),)),
        field_selector=(framework.Requirement("region", "In", ("eu",)),))
    assert view.tolerations == (framework.Toleration("k", "Exists", "", "NoSchedule"),)
    # spreadByLabel is not scheduled by (Karmada's scheduler ignores it too)
    assert view.spread_constraints == (spread.SpreadConstraint("region", 1, 2),)
    assert view.replica_scheduling == framework.ReplicaScheduling(
        "Divided", "Weighted", framework.WeightPreference(
            (framework.StaticWeight(framework.ClusterAffinity(cluster_names=("a",)), 2),)))


def test_affinity_terms_start_from_the_observed_one() -> None:
    raw = policy.Placement.from_dict({"clusterAffinities": [
        {"affinityName": "primary", "clusterNames": ["a"]},
        {"affinityName": "backup", "clusterNames": ["b"]}]})
    assert adapt.affinity_terms(raw, None) == [("primary", 0), ("backup", 1)]
    assert adapt.affinity_terms(raw, "backup") == [("backup", 1)]
    assert adapt.affinity_terms(raw, "gone") == [("primary", 0), ("backup", 1)]
    assert adapt.placement_view(raw, 1).affinity == framework.ClusterAffinity(
        cluster_names=("b",))
    assert adapt.affinity_terms(policy.Placement.from_dict({}), None) == [(None, None)]


def test_applied_placement_round_trip_ignores_formatting() -> None:
    raw = policy.Placement.from_dict(PLACEMENT)
    annotations = adapt.placement_annotation(raw)
    assert not adapt.placement_changed(raw, annotations)
    # Karmada's scheduler writes Go's json.Marshal (other key order, spacing): same placement
    go_style = {adapt.APPLIED_PLACEMENT: json.dumps(PLACEMENT, indent=1)}
    assert not adapt.placement_changed(raw, go_style)
    other = policy.Placement.from_dict({**PLACEMENT, "clusterTolerations": []})
    assert adapt.placement_changed(other, annotations)
    assert adapt.placement_changed(raw, {})
    assert adapt.placement_changed(raw, {adapt.APPLIED_PLACEMENT: "{not json"})


@pytest.mark.parametrize(("triggered", "last", "expected"), [
    (None, None, False),
    ("2024-01-01T00:00:00Z", None, True),
    ("2024-01-01T00:00:01Z", "2024-01-01T00:00:00Z", True),
    ("2024-01-01T00:00:00Z", "2024-01-01T00:00:00Z", False),
])
def test_reschedule_requested(triggered: str | None, last: str | None, expected: bool) -> None:
    spec = binding_spec(**({"rescheduleTriggeredAt": triggered} if triggered else {}))
    st = work.ResourceBindingStatus.from_dict({"lastScheduledTime": last} if last else {})
    assert adapt.reschedule_requested(spec, st) is expected


def test_the_timing_hook_reports_every_plugin_once_per_call() -> None:
    ticks = iter(range(1000))
    seen: list[tuple[str, str, float]] = []
    views = [adapt.cluster_entry(cluster_obj(name)).view for name in ("a", "b")]
    placement = adapt.placement_view(policy.Placement.from_dict(
        {"clusterTolerations": [{"operator": "Exists"}]}))
    binding = adapt.binding_view(binding_spec(replicas=1))
    algorithm.schedule(placement, binding, views, plugins.default_registry(),
                       observe=lambda *a: seen.append(a), timer=lambda: float(next(ticks)))
    names = [(plugin, point) for plugin, point, _ in seen]
    assert len(names) == len(set(names))
    assert ("ClusterAffinity", algorithm.FILTER) in names
    assert ("ClusterLocality", algorithm.SCORE) not in names  # nothing fit: no scores
    assert all(seconds > 0 for _, _, seconds in seen)


def _kubeconfig(tmp_path: pathlib.Path) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return str(path)


def test_flags_select_plugins_and_refuse_unknown_ones(tmp_path: pathlib.Path) -> None:
    kubeconfig = ["--kubeconfig", _kubeconfig(tmp_path)]
    loaded = scheduler_settings.load([*kubeconfig, "--plugins", "*,-ClusterLocality"], {})
    assert "ClusterLocality" not in loaded.plugins
    assert next(iter(loaded.plugins)) == "ClusterAffinity"
    assert loaded.workers == 8 and loaded.scheduler_name == "default-scheduler"
    with pytest.raises(settings.SettingsError, match="--plugins"):
        scheduler_settings.load([*kubeconfig, "--plugins", "*,-NoSuchPlugin"], {})
    env = {"CLUSTERHEALTH_SCHEDULER_WORKERS": "3"}
    assert scheduler_settings.load(kubeconfig, env).workers == 3


def test_an_unknown_plugin_exits_2(tmp_path: pathlib.Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    code = scheduler_main.main(["--kubeconfig", _kubeconfig(tmp_path), "--plugins", "Nope"])
    assert code == 2
    assert "--plugins" in capsys.readouterr().err


def test_what_a_cluster_event_changed_for_the_scheduler() -> None:
    """Capacity alone is told apart from the rest: it reschedules no scheduled binding."""
    views = scheduler_controller.ClusterViews()

    def event(kind: str, obj: dict[str, Any]) -> builder.Event:
        return builder.Event(kind, obj, None)
    small = cluster_obj(resourceSummary={"allocatable": {"pods": 110, "cpu": "4"}})
    big = cluster_obj(resourceSummary={"allocatable": {"pods": 110, "cpu": "8"}})
    relabelled = cluster_obj(resourceSummary={"allocatable": {"pods": 110, "cpu": "8"}})
    relabelled["metadata"]["labels"] = {"env": "test"}
    change = scheduler_controller.ClusterChange
    assert views.observe(event(builder.ADDED, small)) is change.VIEW
    assert views.observe(event(builder.MODIFIED, small)) is change.NONE
    assert views.for_request({"cpu": "1"})[0].available_replicas == 4
    assert views.observe(event(builder.MODIFIED, big)) is change.CAPACITY
    assert views.for_request({"cpu": "1"})[0].available_replicas == 8  # not the cached 4
    assert views.observe(event(builder.MODIFIED, relabelled)) is change.VIEW
    assert views.observe(event(builder.DELETED, relabelled)) is change.VIEW
    assert views.gone("c1")
