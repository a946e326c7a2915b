"""Models survive the wire: from_dict(to_dict(x)) == x, and the wire shape is Go's."""

import datetime
import json
from typing import Any

import pytest

from clusterhealth_core.api import cluster, groups, mci, meta, remedy, wire

MODELS: dict[str, type[wire.Model]] = {
    groups.CLUSTER_KIND: cluster.Cluster,
    groups.REMEDY_KIND: remedy.Remedy,
    groups.MCI_KIND: mci.MultiClusterIngress,
}

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
