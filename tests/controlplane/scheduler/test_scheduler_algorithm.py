"""Whole scheduling decisions: the seeds' failover examples, unschedulable reasons, re-runs."""

from __future__ import annotations

import re

import pytest

from clusterhealth_controlplane.scheduler import (
    algorithm,
    assignment,
    errors,
    framework,
    plugins,
    spread,
)

NOT_READY = "cluster.karmada.io/not-ready"
APPS = {"apps/v1": frozenset({"Deployment"})}
DEFAULT_TOLERATIONS = (
    framework.Toleration(NOT_READY, "Exists", effect="NoExecute", toleration_seconds=300),
    framework.Toleration("cluster.karmada.io/unreachable", "Exists", effect="NoExecute",
                         toleration_seconds=300),
)
T = assignment.TargetCluster


def member(name: str, available: int = 10, **fields: object) -> framework.ClusterView:
    return framework.ClusterView(  # type: ignore[arg-type]
        name, api_enablements=APPS, available_replicas=available, **fields
    )


def deployment(
    replicas: int, targets: dict[str, int] | None = None, evicting: tuple[str, ...] = ()
) -> framework.BindingView:
    return framework.BindingView(
        "apps/v1", "Deployment", replicas,
        clusters=tuple(T(n, r) for n, r in (targets or {}).items()),
        evicting_from=frozenset(evicting),
    )


def names(*names: str) -> framework.ClusterAffinity:
    return framework.ClusterAffinity(cluster_names=names)


def weighted(**weights: int) -> framework.ReplicaScheduling:
    return framework.ReplicaScheduling(
        framework.DIVIDED, framework.WEIGHTED,
        framework.WeightPreference(tuple(
            framework.StaticWeight(names(name), weight) for name, weight in weights.items()
        )),
    )


DYNAMIC = framework.ReplicaScheduling(
    framework.DIVIDED, framework.WEIGHTED,
    framework.WeightPreference(dynamic_weight=framework.AVAILABLE_REPLICAS),
)
AGGREGATED = framework.ReplicaScheduling(framework.DIVIDED, framework.AGGREGATED)
DUPLICATED = framework.ReplicaScheduling(framework.DUPLICATED)


def run(
    placement: framework.PlacementView,
    binding: framework.BindingView,
    clusters: list[framework.ClusterView],
    registry: framework.Registry | None = None,
    mode: assignment.Mode = assignment.Mode.STEADY,
) -> algorithm.ScheduleResult:
    return algorithm.schedule(
        placement, binding, clusters, registry or plugins.default_registry(), mode=mode
    )


def scheduled(result: algorithm.ScheduleResult) -> dict[str, int]:
    assert isinstance(result, algorithm.Scheduled), result
    return {t.name: t.replicas for t in result.targets}


# --- Seed 001: Duplicated failover --------------------------------------------------------

SEED_001_DUPLICATED = framework.PlacementView(
    affinity=names("member1", "member2", "member3", "member5"),
    tolerations=DEFAULT_TOLERATIONS,
    # spreadConstraints: [{maxGroups: 2, minGroups: 2}] (spreadByField defaults to cluster)
    spread_constraints=(spread.SpreadConstraint("", 2, 2),),
    replica_scheduling=DUPLICATED,
)
FIVE = ["member1", "member2", "member3", "member4", "member5"]


def test_seed_001_duplicated_first_schedule() -> None:
    clusters = [member(n) for n in FIVE]
    assert scheduled(run(SEED_001_DUPLICATED, deployment(2), clusters)) == {
        "member1": 2, "member2": 2,
    }


def test_seed_001_duplicated_keeps_its_current_cluster_on_failover() -> None:
    # member2 failed: the taint manager moved it from the targets into an eviction task.
    failed = framework.Taint(NOT_READY, "NoExecute")
    clusters = [member(n, taints=(failed,) if n == "member2" else ()) for n in FIVE]
    binding = deployment(2, {"member1": 2}, evicting=("member2",))
    result = run(SEED_001_DUPLICATED, binding, clusters)
    # member1 stays; the replacement is member3 or member5 (member4 is not selected).
    assert scheduled(result) == {"member1": 2, "member3": 2}
    assert isinstance(result, algorithm.Scheduled)
    assert result.filtered["member2"] == "is in the process of eviction"
    assert result.scores["member1"] == 100


def test_seed_001_duplicated_keeps_current_even_when_others_rank_first_by_name() -> None:
    # Without its locality score, member1 (room for 5 more, 7 with its own) ranks after
    # the clusters with room for 10.
    clusters = [member("a-member"), member("b-member"), member("member1", 5)]
    placement = framework.PlacementView(
        spread_constraints=(spread.SpreadConstraint("cluster", 2, 2),),
        replica_scheduling=DUPLICATED,
    )
    binding = deployment(2, {"member1": 2})
    assert scheduled(run(placement, binding, clusters)) == {"a-member": 2, "member1": 2}
    without_locality = framework.select_plugins(plugins.default_registry(), "*,-ClusterLocality")
    assert scheduled(run(placement, binding, clusters, without_locality)) == {
        "a-member": 2, "b-member": 2,
    }


def test_seed_001_duplicated_no_rescheduling_without_enough_candidates() -> None:
    # Only member1 is left among the selected names: fewer candidates than minGroups,
    # so no new result (the binding keeps its current one).
    failed = framework.Taint(NOT_READY, "NoExecute")
    clusters = [member("member1"), member("member2", taints=(failed,)), member("member4")]
    binding = deployment(2, {"member1": 2}, evicting=("member2",))
    result = run(SEED_001_DUPLICATED, binding, clusters)
    assert isinstance(result, algorithm.Unschedulable)
    assert result.reason == errors.UNSCHEDULABLE
    assert isinstance(result.error, errors.SpreadUnsatisfiable)
    assert result.message == (
        "1 feasible cluster, fewer than the spread constraint's minGroups 2 (not fitting: "
        "member2 is in the process of eviction, member4 did not match the placement's "
        "cluster affinity)"
    )


# --- Seeds 000/001: Divided 1:2 -----------------------------------------------------------

SEED_DIVIDED = framework.PlacementView(
    affinity=names("member1", "member2"),
    tolerations=DEFAULT_TOLERATIONS,
    replica_scheduling=weighted(member1=1, member2=2),
)


def test_seed_divided_one_to_two() -> None:
    clusters = [member("member1"), member("member2")]
    assert scheduled(run(SEED_DIVIDED, deployment(3), clusters)) == {"member1": 1, "member2": 2}


def test_seed_divided_failover_moves_replicas_to_the_healthy_cluster() -> None:
    failed = framework.Taint(NOT_READY, "NoExecute")
    clusters = [member("member1", taints=(failed,)), member("member2")]
    binding = deployment(3, {"member2": 2}, evicting=("member1",))
    assert scheduled(run(SEED_DIVIDED, binding, clusters)) == {"member2": 3}


def test_seed_divided_no_failback_while_member1_is_only_recovering() -> None:
    # member1 recovered but is still tainted NoSchedule (not in the result): it is
    # filtered, so member2 keeps all three.
    clusters = [member("member1", taints=(framework.Taint(NOT_READY, "NoSchedule"),)),
                member("member2")]
    assert scheduled(run(SEED_DIVIDED, deployment(3, {"member2": 3}), clusters)) == {
        "member2": 3,
    }


# --- Other strategies through the whole pipeline --------------------------------------------


def test_classic_static_weights() -> None:
    placement = framework.PlacementView(
        replica_scheduling=weighted(a=100000, b=80000, c=30000, d=20000)
    )
    clusters = [member(n) for n in "abcd"]
    assert scheduled(run(placement, deployment(8), clusters)) == {"a": 3, "b": 3, "c": 1, "d": 1}


def test_static_weights_take_the_largest_matching_rule() -> None:
    rules = (
        framework.StaticWeight(framework.ClusterAffinity(
            label_selector=framework.LabelSelector({"env": "prod"})), 1),
        framework.StaticWeight(names("big"), 3),
    )
    placement = framework.PlacementView(replica_scheduling=framework.ReplicaScheduling(
        framework.DIVIDED, framework.WEIGHTED, framework.WeightPreference(rules)))
    clusters = [member("big", labels={"env": "prod"}), member("small", labels={"env": "prod"}),
                member("other")]
    assert scheduled(run(placement, deployment(4), clusters)) == {"big": 3, "small": 1}


def test_dynamic_weight_by_available_replicas() -> None:
    placement = framework.PlacementView(replica_scheduling=DYNAMIC)
    clusters = [member("m1", 6), member("m2", 12), member("m3", 18)]
    assert scheduled(run(placement, deployment(12), clusters)) == {"m1": 2, "m2": 4, "m3": 6}


def test_dynamic_weight_not_enough_says_how_many_are_missing() -> None:
    placement = framework.PlacementView(replica_scheduling=DYNAMIC)
    clusters = [member("m1", 3), member("m2", 4)]
    result = run(placement, deployment(12), clusters)
    assert isinstance(result, algorithm.Unschedulable)
    assert result.reason == errors.UNSCHEDULABLE
    assert isinstance(result.error, errors.NotEnoughReplicas)
    assert result.error.missing == 5
    assert "5 missing" in result.message


def test_aggregated_prefers_few_clusters() -> None:
    placement = framework.PlacementView(replica_scheduling=AGGREGATED)
    clusters = [member("m1", 6), member("m2", 8), member("m3", 10)]
    assert scheduled(run(placement, deployment(12), clusters)) == {"m2": 5, "m3": 7}


def test_non_workload_goes_to_every_cluster_with_zero_replicas() -> None:
    placement = framework.PlacementView(replica_scheduling=weighted(m1=1))
    config_map = framework.BindingView("v1", "ConfigMap", 0)
    clusters = [framework.ClusterView(n, api_enablements={"v1": frozenset({"ConfigMap"})})
                for n in ("m1", "m2")]
    assert scheduled(run(placement, config_map, clusters)) == {"m1": 0, "m2": 0}


def test_spread_by_region_through_the_pipeline() -> None:
    placement = framework.PlacementView(
        spread_constraints=(spread.SpreadConstraint("region", 2, 2),
                            spread.SpreadConstraint("cluster", 2, 2)),
        replica_scheduling=DUPLICATED,
    )
    clusters = [member("eu-1", region="eu"), member("us-1", region="us"),
                member("ap-1", region="ap"), member("none")]
    binding = deployment(1, {"us-1": 1, "ap-1": 1})
    result = run(placement, binding, clusters)
    # The current targets score 100 (locality), so their regions are kept.
    assert scheduled(result) == {"ap-1": 1, "us-1": 1}
    assert isinstance(result, algorithm.Scheduled)
    assert result.filtered == {"none": "did not have the region property"}


# --- Unschedulable ----------------------------------------------------------------------------


def test_no_cluster_fits_lists_every_cluster_and_its_reason() -> None:
    placement = framework.PlacementView(affinity=framework.ClusterAffinity(exclude=("m3",)))
    clusters = [
        member("m1", taints=(framework.Taint(NOT_READY, "NoSchedule"),)),
        member("m2", deleting=True),
        member("m3"),
        framework.ClusterView("m4", api_enablements={"v1": frozenset({"ConfigMap"})}),
        member("m5"),
    ]
    result = run(placement, deployment(1, evicting=("m5",)), clusters)
    assert isinstance(result, algorithm.Unschedulable)
    assert result.reason == errors.NO_CLUSTER_FIT
    assert result.error is None
    assert result.message == (
        "0/5 clusters are available: "
        "m1 had untolerated taint {cluster.karmada.io/not-ready:NoSchedule}, "
        "m2 is being deleted, "
        "m3 is excluded by the placement's cluster affinity, "
        "m4 does not serve Deployment (apps/v1), "
        "m5 is in the process of eviction."
    )
    assert set(result.filtered) == {"m1", "m2", "m3", "m4", "m5"}


def test_no_clusters_at_all() -> None:
    result = run(framework.PlacementView(), deployment(1), [])
    assert isinstance(result, algorithm.Unschedulable)
    assert result.message == "0/0 clusters are available: no cluster exists."


@pytest.mark.parametrize(
    ("placement", "binding", "error", "message"),
    [
        (framework.PlacementView(replica_scheduling=weighted(m1=0, m2=0)), deployment(3),
         errors.InvalidWeights, "static weights sum to zero over the candidate clusters m1, m2"),
        (framework.PlacementView(replica_scheduling=weighted(m1=-1, m2=2)), deployment(3),
         errors.InvalidWeights, r"staticWeightList\[0\] has a negative weight \(-1\)"),
        (framework.PlacementView(replica_scheduling=DUPLICATED), deployment(-1),
         errors.InvalidReplicas, "replicas must not be negative, got -1"),
        (framework.PlacementView(
            spread_constraints=(spread.SpreadConstraint("cluster", 3, 2),)), deployment(3),
         errors.ContradictorySpread,
         "spread by cluster: minGroups 3 is greater than maxGroups 2: no number of clusters"),
        # Contradictions are reported even where static weights override spreading.
        (framework.PlacementView(
            spread_constraints=(spread.SpreadConstraint("region", 2, 1),
                                spread.SpreadConstraint("cluster", 1, 3)),
            replica_scheduling=weighted(m1=1)), deployment(3),
         errors.ContradictorySpread, "spread by region: minGroups 2 is greater than maxGroups 1"),
    ],
)
def test_bad_input_is_a_typed_unschedulable(
    placement: framework.PlacementView,
    binding: framework.BindingView,
    error: type[errors.ScheduleError],
    message: str,
) -> None:
    clusters = [member("m1", region="eu"), member("m2", region="us")]
    result = run(placement, binding, clusters)
    assert isinstance(result, algorithm.Unschedulable)
    assert isinstance(result.error, error)
    assert isinstance(result.error, errors.InvalidPlacement)
    assert result.reason == errors.UNSCHEDULABLE
    assert re.search(message, result.message), result.message


def test_disabling_a_filter_lets_the_cluster_through() -> None:
    tainted = [member("m1", taints=(framework.Taint("dedicated", "NoSchedule"),))]
    placement = framework.PlacementView()
    assert isinstance(run(placement, deployment(1), tainted), algorithm.Unschedulable)
    registry = framework.select_plugins(plugins.default_registry(), "*,-TaintToleration")
    assert scheduled(run(placement, deployment(1), tainted, registry)) == {"m1": 1}


# --- Re-schedule rules ------------------------------------------------------------------------

DIVIDED_PLACEMENT = framework.PlacementView(replica_scheduling=weighted(m1=1, m2=2))


@pytest.mark.parametrize(
    ("placement", "binding", "changed", "requested", "gone", "trigger"),
    [
        (DIVIDED_PLACEMENT, deployment(3, {"m1": 1, "m2": 2}), True, False, (),
         algorithm.Trigger.PLACEMENT_CHANGED),
        (DIVIDED_PLACEMENT, deployment(4, {"m1": 1, "m2": 2}), False, False, (),
         algorithm.Trigger.REPLICAS_CHANGED),
        # The taint manager removed m1: the sum (2) differs from 3.
        (DIVIDED_PLACEMENT, deployment(3, {"m2": 2}), False, False, (),
         algorithm.Trigger.REPLICAS_CHANGED),
        (DIVIDED_PLACEMENT, deployment(3, {"m1": 1, "m2": 2}), False, True, (),
         algorithm.Trigger.RESCHEDULE_REQUESTED),
        (DIVIDED_PLACEMENT, deployment(3, {"m1": 1, "m2": 2}), False, False, ("m1",),
         algorithm.Trigger.TARGET_GONE),
        (DIVIDED_PLACEMENT, deployment(3, {"m1": 1, "m2": 2}), False, False, ("m9",), None),
        (DIVIDED_PLACEMENT, deployment(3, {"m1": 1, "m2": 2}), False, False, (), None),
        # Duplicated: a target with other replicas is a replica change; otherwise
        # Duplicated bindings are always scheduled again (a target may be gone).
        (framework.PlacementView(replica_scheduling=DUPLICATED), deployment(3, {"m1": 2}),
         False, False, (), algorithm.Trigger.REPLICAS_CHANGED),
        (framework.PlacementView(replica_scheduling=DUPLICATED), deployment(3, {"m1": 3}),
         False, False, (), algorithm.Trigger.DUPLICATED),
        (DIVIDED_PLACEMENT, framework.BindingView("v1", "ConfigMap", 0, (T("m1", 0),)),
         False, False, (), algorithm.Trigger.DUPLICATED),
    ],
)
def test_reschedule_trigger(
    placement: framework.PlacementView,
    binding: framework.BindingView,
    changed: bool,
    requested: bool,
    gone: tuple[str, ...],
    trigger: algorithm.Trigger | None,
) -> None:
    assert algorithm.reschedule_trigger(
        placement, binding, placement_changed=changed, reschedule_requested=requested,
        gone=frozenset(gone),
    ) is trigger


def test_placement_change_divides_afresh() -> None:
    assert algorithm.mode_for(algorithm.Trigger.PLACEMENT_CHANGED) is assignment.Mode.FRESH
    assert algorithm.mode_for(algorithm.Trigger.RESCHEDULE_REQUESTED) is assignment.Mode.FRESH
    assert algorithm.mode_for(algorithm.Trigger.REPLICAS_CHANGED) is assignment.Mode.STEADY
    # Switching from Duplicated (3 + 3) to dynamic weights with 4 replicas: Steady scales
    # the old result down proportionally (3:3); Fresh divides by what each can take plus
    # what it runs (0 + 3 : 12 + 3).
    placement = framework.PlacementView(replica_scheduling=DYNAMIC)
    clusters = [member("m1", 0), member("m2", 12)]
    binding = deployment(4, {"m1": 3, "m2": 3})
    steady = run(placement, binding, clusters)
    fresh = run(placement, binding, clusters, mode=assignment.Mode.FRESH)
    assert scheduled(steady) == {"m1": 2, "m2": 2}
    assert scheduled(fresh) == {"m1": 1, "m2": 3}


def test_scale_up_by_one_changes_one_cluster_through_the_pipeline() -> None:
    placement = framework.PlacementView(replica_scheduling=weighted(m1=3, m2=2, m3=1))
    clusters = [member("m1"), member("m2"), member("m3")]
    previous = scheduled(run(placement, deployment(12), clusters))
    bigger = scheduled(run(placement, deployment(13, previous), clusters))
    changed = {n: bigger[n] - previous.get(n, 0) for n in bigger if bigger[n] != previous.get(n)}
    assert changed == {"m1": 1}
