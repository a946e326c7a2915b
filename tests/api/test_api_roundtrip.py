"""Models survive the wire: from_dict(to_dict(x)) == x, and the wire shape is Go's."""

import datetime
import json
from typing import Any

import apikit
import pytest

from clusterhealth_core.api import cluster, groups, mci, meta, policy, remedy, wire, work

MODELS = apikit.MODELS

T0 = datetime.datetime(2024, 1, 25, 4, 5, 57, tzinfo=datetime.UTC)


def test_wire_round_trip(sample: tuple[str, dict[str, Any]]) -> None:
    kind, obj = sample
    model = MODELS[kind].from_dict(obj)
    assert model.to_dict() == obj
    assert MODELS[kind].from_dict(model.to_dict()) == model
    json.dumps(model.to_dict())  # plain JSON types only


def _built_models() -> list[wire.Model]:
    condition = meta.Condition(
        type=groups.CONDITION_SERVICE_DOMAIN_NAME_RESOLUTION_READY,
        status=meta.ConditionStatus.FALSE,
        observed_generation=2,
        last_transition_time=T0,
        reason="ResolutionFailed",
        message="nslookup kubernetes.default failed for 30s",
    )
    requirement = remedy.ClusterConditionRequirement(
        condition_type=groups.CONDITION_SERVICE_DOMAIN_NAME_RESOLUTION_READY,
        operator=remedy.ClusterConditionOperator.EQUAL,
        condition_status="False",
    )
    return [
        cluster.Cluster(
            metadata=meta.ObjectMeta(name="member1", resource_version="7"),
            spec=cluster.ClusterSpec(
                api_endpoint="https://10.0.0.1:6443",
                secret_ref=cluster.SecretReference(namespace="karmada-cluster", name="member1"),
                sync_mode=cluster.SyncMode.PULL,
                taints=(
                    cluster.Taint(
                        key=groups.TAINT_CLUSTER_UNREACHABLE,
                        effect=cluster.TaintEffect.NO_EXECUTE,
                        time_added=T0,
                    ),
                ),
            ),
            status=cluster.ClusterStatus(
                conditions=(condition,),
                node_summary=cluster.NodeSummary(total_num=0, ready_num=0),
                resource_summary=cluster.ResourceSummary(allocatable={"cpu": "4", "pods": 110}),
                remedy_actions=(groups.ACTION_TRAFFIC_CONTROL,),
                remedy_action_sources=(
                    cluster.RemedyActionSource(
                        action=groups.ACTION_TRAFFIC_CONTROL, remedies=("dns", "upgrade")
                    ),
                ),
            ),
        ),
        remedy.Remedy(
            metadata=meta.ObjectMeta(name="dns"),
            spec=remedy.RemedySpec(
                decision_matches=(remedy.DecisionMatch(cluster_condition_match=requirement),),
                actions=(remedy.RemedyAction.TRAFFIC_CONTROL,),
            ),
            status=remedy.RemedyStatus(
                active_clusters=(
                    remedy.ActiveCluster(
                        cluster="member1", matched_condition=requirement, since=T0
                    ),
                )
            ),
        ),
        remedy.Remedy(
            metadata=meta.ObjectMeta(name="upgrade"),
            spec=remedy.RemedySpec(
                cluster_affinity=remedy.ClusterAffinity(cluster_names=()),
                actions=(remedy.RemedyAction.TRAFFIC_CONTROL,),
            ),
        ),
        mci.MultiClusterIngress(
            metadata=meta.ObjectMeta(name="web", namespace="shop"),
            spec=mci.IngressSpec(
                default_backend=mci.IngressBackend(
                    service=mci.IngressServiceBackend(
                        name="web", port=mci.ServiceBackendPort(name="http")
                    )
                )
            ),
            status=mci.MultiClusterIngressStatus(
                traffic_block_clusters=("member2",),
                service_locations=(mci.ServiceLocation(name="web", clusters=("member1",)),),
            ),
        ),
        *_built_propagation_models(condition),
    ]


def _built_propagation_models(condition: meta.Condition) -> list[wire.Model]:
    placement = policy.Placement(
        cluster_affinity=policy.ClusterAffinity(cluster_names=("member1", "member2")),
        cluster_tolerations=(
            policy.Toleration(
                key=groups.TAINT_CLUSTER_UNREACHABLE,
                operator=policy.TolerationOperator.EXISTS,
                effect=cluster.TaintEffect.NO_EXECUTE,
                toleration_seconds=300,
            ),
        ),
        spread_constraints=(
            policy.SpreadConstraint(spread_by_field=policy.SpreadFieldValue.REGION, max_groups=2),
        ),
        replica_scheduling=policy.ReplicaSchedulingStrategy(
            replica_division_preference=policy.ReplicaDivisionPreference.WEIGHTED,
            weight_preference=policy.ClusterPreferences(
                static_weight_list=(
                    policy.StaticClusterWeight(
                        target_cluster=policy.ClusterAffinity(cluster_names=("member1",)),
                        weight=1,
                    ),
                    policy.StaticClusterWeight(
                        target_cluster=policy.ClusterAffinity(cluster_names=("member2",)),
                        weight=2,
                    ),
                )
            ),
        ),
    )
    spec = policy.PropagationSpec(
        resource_selectors=(policy.ResourceSelector(api_version="apps/v1", kind="Deployment",
                                                    name="nginx"),),
        placement=placement,
        conflict_resolution=policy.ConflictResolution.OVERWRITE,
    )
    binding_spec = work.ResourceBindingSpec(
        resource=work.ObjectReference(api_version="apps/v1", kind="Deployment",
                                      namespace="default", name="nginx"),
        replicas=3,
        clusters=(work.TargetCluster(name="member2", replicas=3),),
        placement=placement,
        graceful_eviction_tasks=(
            work.GracefulEvictionTask(from_cluster="member1", replicas=1,
                                      reason="TaintUntolerated", producer="TaintManager",
                                      creation_timestamp=T0),
        ),
    )
    binding_status = work.ResourceBindingStatus(
        conditions=(condition,),
        aggregated_status=(
            work.AggregatedStatusItem(cluster_name="member2", status={"availableReplicas": 3},
                                      applied=True, health=work.ResourceHealth.HEALTHY),
        ),
    )
    return [
        policy.PropagationPolicy(metadata=meta.ObjectMeta(name="nginx", namespace="default"),
                                 spec=spec),
        policy.ClusterPropagationPolicy(metadata=meta.ObjectMeta(name="nginx"), spec=spec),
        work.ResourceBinding(metadata=meta.ObjectMeta(name="nginx-deployment",
                                                      namespace="default"),
                             spec=binding_spec, status=binding_status),
        work.ClusterResourceBinding(metadata=meta.ObjectMeta(name="nginx-deployment"),
                                    spec=binding_spec),
        work.Work(
            metadata=meta.ObjectMeta(name="nginx-687f7fb96f", namespace="karmada-es-member2"),
            spec=work.WorkSpec(workload=work.WorkloadTemplate(manifests=(
                {"apiVersion": "apps/v1", "kind": "Deployment",
                 "metadata": {"name": "nginx"}, "spec": {"replicas": 3, "paused": False}},
            ))),
            status=work.WorkStatus(manifest_statuses=(
                work.ManifestStatus(
                    identifier=work.ResourceIdentifier(ordinal=0, group="apps", version="v1",
                                                       kind="Deployment",
                                                       resource="deployments", name="nginx"),
                    status={"readyReplicas": 3, "ratio": 0.5, "note": None},
                    health=work.ResourceHealth.HEALTHY,
                ),
            )),
        ),
    ]


@pytest.mark.parametrize("model", _built_models(), ids=lambda m: type(m).__name__)
def test_model_round_trip(model: wire.Model) -> None:
    wire_obj = model.to_dict()
    assert type(model).from_dict(wire_obj, strict=True) == model
    assert json.loads(json.dumps(wire_obj)) == wire_obj


def test_to_dict_omits_empty_optional_fields() -> None:
    obj = cluster.Cluster(
        metadata=meta.ObjectMeta(name="member1"),
        spec=cluster.ClusterSpec(sync_mode=cluster.SyncMode.PUSH),
    )
    assert obj.to_dict() == {
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": "member1"},
        "spec": {"syncMode": "Push"},
    }
    # Go's omitempty drops false and 0 too; decoding restores the defaults.
    summary = cluster.NodeSummary(total_num=0, ready_num=0)
    assert summary.to_dict() == {}
    assert cluster.NodeSummary.from_dict({}) == summary


def test_enums_are_plain_strings_on_the_wire() -> None:
    spec = cluster.ClusterSpec(sync_mode=cluster.SyncMode.PULL).to_dict()
    assert type(spec["syncMode"]) is str
    assert spec == {"syncMode": "Pull"}


def test_immediate_remedy_has_no_decision_matches_on_the_wire() -> None:
    immediate = remedy.RemedySpec(actions=(remedy.RemedyAction.TRAFFIC_CONTROL,))
    assert immediate.to_dict() == {"actions": ["TrafficControl"]}
    # An empty affinity (selects no cluster) is kept distinct from none (all).
    none_selected = remedy.RemedySpec(cluster_affinity=remedy.ClusterAffinity())
    assert none_selected.to_dict() == {"clusterAffinity": {}}
    assert remedy.RemedySpec.from_dict({"clusterAffinity": {}}) == none_selected
    assert remedy.RemedySpec.from_dict({}).cluster_affinity is None
    # Empty decision matches (never) are kept distinct from none (immediately).
    never = remedy.RemedySpec(decision_matches=())
    assert never.to_dict() == {"decisionMatches": []}
    assert remedy.RemedySpec.from_dict({"decisionMatches": []}) == never
    assert remedy.RemedySpec.from_dict({}).decision_matches is None


def test_times_are_utc_whole_seconds() -> None:
    plus_two = datetime.timezone(datetime.timedelta(hours=2))
    condition = meta.Condition(
        type="Ready",
        status=meta.ConditionStatus.TRUE,
        last_transition_time=datetime.datetime(2024, 1, 25, 6, 5, 57, 999999, tzinfo=plus_two),
        reason="ClusterReady",
        message="",
    )
    wire_obj = condition.to_dict()
    assert wire_obj["lastTransitionTime"] == "2024-01-25T04:05:57Z"
    assert wire_obj["message"] == ""  # required: kept even when empty
    assert meta.Condition.from_dict(wire_obj).last_transition_time == T0


def test_models_are_frozen() -> None:
    spec = cluster.ClusterSpec(sync_mode=cluster.SyncMode.PUSH)
    with pytest.raises(AttributeError):
        spec.zone = "a"  # type: ignore[misc]


def test_server_defaults_are_the_decoded_defaults() -> None:
    """Absent defaulted fields decode to Karmada's CRD defaults; encoding leaves them out."""
    spec = policy.PropagationSpec.from_dict(
        {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}],
         "placement": {"replicaScheduling": {}},
         "failover": {"application": {"decisionConditions": {}}}})
    assert spec.conflict_resolution is policy.ConflictResolution.ABORT
    assert spec.preemption is policy.PreemptionBehavior.NEVER
    assert spec.priority == 0
    assert spec.scheduler_name == "default-scheduler"
    strategy = spec.placement.replica_scheduling
    assert strategy is not None
    assert strategy.replica_scheduling_type is policy.ReplicaSchedulingType.DIVIDED
    assert spec.failover is not None and spec.failover.application is not None
    assert spec.failover.application.purge_mode is policy.PurgeMode.GRACEFULLY
    assert spec.failover.application.decision_conditions.toleration_seconds == 300
    assert spec.to_dict() == {
        "resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}],
        "placement": {"replicaScheduling": {}},
        "failover": {"application": {"decisionConditions": {}}},
    }


def test_raw_objects_are_kept_as_is_and_not_shared() -> None:
    manifest = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}, "x": [1, 2.5, None]}
    spec = work.WorkSpec.from_dict({"workload": {"manifests": [manifest]}}, strict=True)
    manifest["data"]["k"] = "changed"  # the caller's object is not the model's
    assert spec.workload.manifests[0]["data"] == {"k": "v"}
    assert spec.to_dict()["workload"]["manifests"][0]["x"] == [1, 2.5, None]
    with pytest.raises(meta.ValidationError, match=r"^workload\.manifests\[0\]: must be an object"):
        work.WorkSpec.from_dict({"workload": {"manifests": ["kind: ConfigMap"]}})


def test_size_bounds_are_the_servers_a_lenient_decode_takes_what_is_stored() -> None:
    """Karmada's CRDs set no maxItems on a Remedy's clusterNames: what such a server stored
    is read whole (the controllers decode leniently); strict decoding refuses as ours does."""
    names = [f"m{i}" for i in range(cluster.MAX_CLUSTER_NAMES + 1)]
    body = {"clusterAffinity": {"clusterNames": names}, "actions": ["TrafficControl"],
            "decisionMatches": []}
    spec = remedy.RemedySpec.from_dict(body)
    assert spec.cluster_affinity is not None
    assert len(spec.cluster_affinity.cluster_names) == cluster.MAX_CLUSTER_NAMES + 1
    with pytest.raises(wire.ValidationError,
                       match=r"spec\.clusterAffinity\.clusterNames: must have at most 1024"):
        remedy.Remedy.from_dict({"apiVersion": "remedy.karmada.io/v1alpha1", "kind": "Remedy",
                                 "metadata": {"name": "r"}, "spec": body}, strict=True)
    long_name = {"clusterAffinity": {"clusterNames": ["m" * 300]}}
    assert remedy.RemedySpec.from_dict(long_name).cluster_affinity is not None
    with pytest.raises(wire.ValidationError, match="must be at most 253 characters"):
        remedy.RemedySpec.from_dict(long_name, strict=True)
