"""Table tests: the seed's examples are accepted, bad input is rejected clearly.

Each case runs through the Python model and through the CRD schema (the
API-server stand-in from conftest); both must reach the expected verdict.
"""

import copy
import pathlib
from typing import Any

import pytest
import yaml

from clusterhealth_core.api import cluster, groups, mci, meta, policy, remedy, work

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "data" / "karmada_examples"


def _example(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text(encoding="utf-8"))
    return loaded

SEED_REMEDY_ON_CONDITION: dict[str, Any] = {
    "apiVersion": "remedy.karmada.io/v1alpha1",
    "kind": "Remedy",
    "metadata": {"name": "foo"},
    "spec": {
        "decisionMatches": [
            {
                "clusterConditionMatch": {
                    "conditionType": "ServiceDomainNameResolutionReady",
                    "operator": "Equal",
                    "conditionStatus": "False",
                }
            }
        ],
        "clusterAffinity": {"clusterNames": ["member1", "member2"]},
        "actions": ["TrafficControl"],
    },
}

# The seed's second (immediate) example says apiVersion
# "rededition.karmada.io/v1alpha1", a typo in the proposal: the Remedy group is
# remedy.karmada.io (as in its first example and its API definition), so the
# correct group is used here; the typo'd form is checked to be rejected below.
SEED_REMEDY_IMMEDIATE: dict[str, Any] = {
    "apiVersion": "remedy.karmada.io/v1alpha1",
    "kind": "Remedy",
    "metadata": {"name": "foo"},
    "spec": {
        "clusterAffinity": {"clusterNames": ["member1"]},
        "actions": ["TrafficControl"],
    },
}

# The seed's Cluster example. Its conditions omit `reason`, which
# metav1.Condition requires (Go always serializes it); `reason` is added here,
# and the verbatim form is checked to be rejected below.
SEED_CLUSTER: dict[str, Any] = {
    "apiVersion": "cluster.karmada.io/v1alpha1",
    "kind": "Cluster",
    "metadata": {"name": "member1"},
    "spec": {"apiEndpoint": "https://192.10.0.1:6443", "syncMode": "Push"},
    "status": {
        "conditions": [
            {
                "lastTransitionTime": "2024-01-25T04:05:57Z",
                "message": "cluster is healthy and ready to accept workloads",
                "reason": "ClusterReady",
                "status": "True",
                "type": "Ready",
            },
            {
                "lastTransitionTime": "2024-01-25T04:05:57Z",
                "message": "coredns function is not normal ",
                "reason": "ServiceDomainNameResolutionFailed",
                "status": "False",
                "type": "ServiceDomainNameResolutionReady",
            },
        ]
    },
}

MINIMAL_MCI: dict[str, Any] = {
    "apiVersion": "networking.karmada.io/v1alpha1",
    "kind": "MultiClusterIngress",
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {
        "rules": [
            {
                "http": {
                    "paths": [
                        {
                            "path": "/",
                            "pathType": "Prefix",
                            "backend": {"service": {"name": "web", "port": {"number": 80}}},
                        }
                    ]
                }
            }
        ]
    },
}

# Seed 000: Divided, Weighted 1:2 over member1/member2 (3 replicas of nginx).
SEED_PP_DIVIDED = _example("seed000_propagationpolicy_divided_weighted.yaml")
# Seed 001: Duplicated on exactly two clusters.
SEED_PP_DUPLICATED = _example("seed001_propagationpolicy_duplicated.yaml")
CPP_SPREAD = _example("clusterpropagationpolicy_spread_tolerations.yaml")
SEED_RB = _example("seed000_resourcebinding.yaml")
SEED_WORK = _example("seed000_work.yaml")

REMEDY_MATCH = ("spec", "decisionMatches", 0, "clusterConditionMatch")
REPLICAS = ("spec", "placement", "replicaScheduling")
WEIGHTS = (*REPLICAS, "weightPreference", "staticWeightList")
EVICTION = {"fromCluster": "member1", "reason": "TaintUntolerated", "producer": "TaintManager"}
MCI_PATH = ("spec", "rules", 0, "http", "paths", 0)


_DELETE = object()


def _edit(base: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """Copy ``base`` with ``path`` set to ``value`` (deleted when value is _DELETE)."""
    out = copy.deepcopy(base)
    node = out
    for key in path[:-1]:
        node = node[key]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return out


ACCEPTED = [
    ("seed remedy on condition", groups.REMEDY.kind, SEED_REMEDY_ON_CONDITION),
    ("seed immediate remedy", groups.REMEDY.kind, SEED_REMEDY_IMMEDIATE),
    ("remedy for every cluster", groups.REMEDY.kind, {"spec": {"actions": ["TrafficControl"]}}),
    (
        "remedy NotEqual",
        groups.REMEDY.kind,
        _edit(SEED_REMEDY_ON_CONDITION, (*REMEDY_MATCH, "operator"), "NotEqual"),
    ),
    (
        "empty decisionMatches (never matches, as in Karmada; absent: immediately)",
        groups.REMEDY.kind,
        _edit(SEED_REMEDY_ON_CONDITION, ("spec", "decisionMatches"), []),
    ),
    (
        "affinity without names (selects no cluster, as in Karmada)",
        groups.REMEDY.kind,
        _edit(SEED_REMEDY_ON_CONDITION, ("spec", "clusterAffinity"), {}),
    ),
    (
        "activeClusters at its bound, with the total beyond it",
        groups.REMEDY.kind,
        _edit(SEED_REMEDY_ON_CONDITION, ("status",), {
            "activeClusters": [{"cluster": f"c{i:04d}", "since": "2024-01-25T04:06:00Z"}
                               for i in range(remedy.MAX_ACTIVE_CLUSTERS)],
            "activeClusterCount": 3000,
        }),
    ),
    ("seed cluster (with reasons)", groups.CLUSTER.kind, SEED_CLUSTER),
    ("pull cluster", groups.CLUSTER.kind, {"spec": {"syncMode": "Pull"}}),
    ("minimal mci", groups.MCI.kind, MINIMAL_MCI),
    (
        "mci implementation-specific path without path",
        groups.MCI.kind,
        _edit(
            _edit(MINIMAL_MCI, (*MCI_PATH, "pathType"), "ImplementationSpecific"),
            (*MCI_PATH, "path"),
            _DELETE,
        ),
    ),
]

ACCEPTED += [
    ("seed pp divided weighted 1:2", groups.PROPAGATION_POLICY.kind, SEED_PP_DIVIDED),
    ("seed pp duplicated", groups.PROPAGATION_POLICY.kind, SEED_PP_DUPLICATED),
    ("cpp spread and tolerations", groups.CLUSTER_PROPAGATION_POLICY.kind, CPP_SPREAD),
    (
        # Karmada's schema takes it and so does ours: the scheduler reports it.
        "minGroups above maxGroups (left to the scheduler)",
        groups.PROPAGATION_POLICY.kind,
        _edit(SEED_PP_DUPLICATED, ("spec", "placement", "spreadConstraints", 0, "minGroups"), 3),
    ),
    (
        "dynamic weight without static weights",
        groups.PROPAGATION_POLICY.kind,
        _edit(SEED_PP_DIVIDED, (*REPLICAS, "weightPreference"),
              {"dynamicWeight": "AvailableReplicas"}),
    ),
    ("seed rb", groups.RESOURCE_BINDING.kind, SEED_RB),
    (
        "rb with an eviction task",
        groups.RESOURCE_BINDING.kind,
        _edit(SEED_RB, ("spec", "gracefulEvictionTasks"), [EVICTION]),
    ),
    ("seed work", groups.WORK.kind, SEED_WORK),
    ("work without manifests", groups.WORK.kind, _edit(SEED_WORK, ("spec",), {})),
]

# (name, kind, object, expected model message, checked by the CRD schema)
REJECTED = [
    (
        "operator Bigger",
        groups.REMEDY.kind,
        _edit(SEED_REMEDY_ON_CONDITION, (*REMEDY_MATCH, "operator"), "Bigger"),
        "spec.decisionMatches[0].clusterConditionMatch.operator: must be one of Equal, NotEqual",
    ),
    (
        "missing conditionType",
        groups.REMEDY.kind,
        _edit(SEED_REMEDY_ON_CONDITION, (*REMEDY_MATCH, "conditionType"), _DELETE),
        "spec.decisionMatches[0].clusterConditionMatch.conditionType: required",
    ),
    (
        "empty conditionType",
        groups.REMEDY.kind,
        _edit(SEED_REMEDY_ON_CONDITION, (*REMEDY_MATCH, "conditionType"), ""),
        "spec.decisionMatches[0].clusterConditionMatch.conditionType: must not be empty",
    ),
    (
        "missing conditionStatus",
        groups.REMEDY.kind,
        _edit(SEED_REMEDY_ON_CONDITION, (*REMEDY_MATCH, "conditionStatus"), _DELETE),
        "spec.decisionMatches[0].clusterConditionMatch.conditionStatus: required",
    ),
    (
        "activeClusters beyond its bound",
        groups.REMEDY.kind,
        _edit(SEED_REMEDY_ON_CONDITION, ("status",), {
            "activeClusters": [{"cluster": f"c{i:04d}", "since": "2024-01-25T04:06:00Z"}
                               for i in range(remedy.MAX_ACTIVE_CLUSTERS + 1)]}),
        "status.activeClusters: must have at most 1000 item(s)",
    ),
    (
        "negative activeClusterCount",
        groups.REMEDY.kind,
        _edit(SEED_REMEDY_ON_CONDITION, ("status",), {"activeClusterCount": -1}),
        "status.activeClusterCount: must be >= 0",
    ),
    (
        "decision match without a match",
        groups.REMEDY.kind,
        _edit(SEED_REMEDY_ON_CONDITION, ("spec", "decisionMatches"), [{}]),
        "spec.decisionMatches[0]: must set clusterConditionMatch",
    ),
    (
        "unknown action",
        groups.REMEDY.kind,
        _edit(SEED_REMEDY_ON_CONDITION, ("spec", "actions"), ["Reboot"]),
        "spec.actions[0]: must be one of TrafficControl",
    ),
    (
        "remedy without spec",
        groups.REMEDY.kind,
        {"metadata": {"name": "x"}},
        "spec: required",
    ),
    (
        "misspelled field",
        groups.REMEDY.kind,
        _edit(SEED_REMEDY_ON_CONDITION, ("spec", "decisionMatch"), []),
        "spec.decisionMatch: unknown field",
    ),
    (
        "cluster without syncMode",
        groups.CLUSTER.kind,
        _edit(SEED_CLUSTER, ("spec", "syncMode"), _DELETE),
        "spec.syncMode: required",
    ),
    (
        "cluster syncMode Both",
        groups.CLUSTER.kind,
        _edit(SEED_CLUSTER, ("spec", "syncMode"), "Both"),
        "spec.syncMode: must be one of Push, Pull",
    ),
    (
        "secretRef without name",
        groups.CLUSTER.kind,
        _edit(SEED_CLUSTER, ("spec", "secretRef"), {"namespace": "karmada-cluster"}),
        "spec.secretRef.name: required",
    ),
    (
        "taint effect",
        groups.CLUSTER.kind,
        _edit(SEED_CLUSTER, ("spec", "taints"), [{"key": "k", "effect": "Evict"}]),
        "spec.taints[0].effect: must be one of NoSchedule, PreferNoSchedule, NoExecute",
    ),
    (
        "seed cluster verbatim (conditions without reason)",
        groups.CLUSTER.kind,
        _edit(SEED_CLUSTER, ("status", "conditions", 0, "reason"), _DELETE),
        "status.conditions[0].reason: required",
    ),
    (
        "condition status Maybe",
        groups.CLUSTER.kind,
        _edit(SEED_CLUSTER, ("status", "conditions", 0, "status"), "Maybe"),
        "status.conditions[0].status: must be one of True, False, Unknown",
    ),
    (
        "duplicate condition type",
        groups.CLUSTER.kind,
        _edit(SEED_CLUSTER, ("status", "conditions", 1, "type"), "Ready"),
        "status.conditions[1]: duplicate entry for type=Ready",
    ),
    (
        "bad lastTransitionTime",
        groups.CLUSTER.kind,
        _edit(SEED_CLUSTER, ("status", "conditions", 0, "lastTransitionTime"), "yesterday"),
        "status.conditions[0].lastTransitionTime: must be an RFC 3339 date-time",
    ),
    (
        "negative node count",
        groups.CLUSTER.kind,
        _edit(SEED_CLUSTER, ("status", "nodeSummary"), {"totalNum": -1}),
        "status.nodeSummary.totalNum: must be >= 0",
    ),
    (
        "bad quantity",
        groups.CLUSTER.kind,
        _edit(SEED_CLUSTER, ("status", "resourceSummary"), {"allocatable": {"cpu": "lots"}}),
        "status.resourceSummary.allocatable[cpu]: must match",
    ),
    (
        "duplicate remedy action source",
        groups.CLUSTER.kind,
        _edit(
            SEED_CLUSTER,
            ("status", "remedyActionSources"),
            [
                {"action": "TrafficControl", "remedies": ["a"]},
                {"action": "TrafficControl", "remedies": ["b"]},
            ],
        ),
        "status.remedyActionSources[1]: duplicate entry for action=TrafficControl",
    ),
    (
        "mci without rules or default backend",
        groups.MCI.kind,
        _edit(MINIMAL_MCI, ("spec",), {"ingressClassName": "x"}),
        "spec: either defaultBackend or rules must be specified",
    ),
    (
        "mci port with name and number",
        groups.MCI.kind,
        _edit(MINIMAL_MCI, (*MCI_PATH, "backend", "service", "port"), {"name": "h", "number": 80}),
        "spec.rules[0].http.paths[0].backend.service.port: exactly one of name or number",
    ),
    (
        "mci service without port",
        groups.MCI.kind,
        _edit(MINIMAL_MCI, (*MCI_PATH, "backend", "service", "port"), _DELETE),
        "spec.rules[0].http.paths[0].backend.service.port: required",
    ),
    (
        "mci backend with service and resource",
        groups.MCI.kind,
        _edit(
            MINIMAL_MCI,
            (*MCI_PATH, "backend", "resource"),
            {"kind": "StorageBucket", "name": "static"},
        ),
        "spec.rules[0].http.paths[0].backend: exactly one of service or resource",
    ),
    (
        "mci relative path",
        groups.MCI.kind,
        _edit(MINIMAL_MCI, (*MCI_PATH, "path"), "api"),
        "spec.rules[0].http.paths[0].path: must be an absolute path",
    ),
    (
        "mci prefix without path",
        groups.MCI.kind,
        _edit(MINIMAL_MCI, (*MCI_PATH, "path"), _DELETE),
        "spec.rules[0].http.paths[0].path: required when pathType is Prefix",
    ),
    (
        "mci pathType Regex",
        groups.MCI.kind,
        _edit(MINIMAL_MCI, (*MCI_PATH, "pathType"), "Regex"),
        "spec.rules[0].http.paths[0].pathType: must be one of Exact, Prefix, Implementation",
    ),
    (
        "mci port out of range",
        groups.MCI.kind,
        _edit(MINIMAL_MCI, (*MCI_PATH, "backend", "service", "port"), {"number": 70000}),
        "spec.rules[0].http.paths[0].backend.service.port.number: must be <= 65535",
    ),
    (
        "mci duplicate service location",
        groups.MCI.kind,
        _edit(MINIMAL_MCI, ("status",), {"serviceLocations": [{"name": "web"}, {"name": "web"}]}),
        "status.serviceLocations[1]: duplicate entry for name=web",
    ),
    (
        "mci load balancer protocol HTTP",
        groups.MCI.kind,
        _edit(
            MINIMAL_MCI,
            ("status",),
            {
                "loadBalancer": {
                    "ingress": [{"ip": "192.0.2.1", "ports": [{"port": 80, "protocol": "HTTP"}]}]
                }
            },
        ),
        "status.loadBalancer.ingress[0].ports[0].protocol: must be one of TCP, UDP, SCTP",
    ),
]


REJECTED += [
    (
        "replicaSchedulingType outside the enum",
        groups.PROPAGATION_POLICY.kind,
        _edit(SEED_PP_DIVIDED, (*REPLICAS, "replicaSchedulingType"), "Spread"),
        "spec.placement.replicaScheduling.replicaSchedulingType: must be one of Duplicated, "
        "Divided",
    ),
    (
        "replicaDivisionPreference outside the enum",
        groups.PROPAGATION_POLICY.kind,
        _edit(SEED_PP_DIVIDED, (*REPLICAS, "replicaDivisionPreference"), "Balanced"),
        "spec.placement.replicaScheduling.replicaDivisionPreference: must be one of Aggregated",
    ),
    (
        "negative weight",
        groups.PROPAGATION_POLICY.kind,
        _edit(SEED_PP_DIVIDED, (*WEIGHTS, 0, "weight"), -1),
        f"{'.'.join(WEIGHTS[:-1])}.staticWeightList[0].weight: must be >= 1",
    ),
    (
        "zero weight",
        groups.PROPAGATION_POLICY.kind,
        _edit(SEED_PP_DIVIDED, (*WEIGHTS, 1, "weight"), 0),
        f"{'.'.join(WEIGHTS[:-1])}.staticWeightList[1].weight: must be >= 1",
    ),
    (
        "weight without a target",
        groups.PROPAGATION_POLICY.kind,
        _edit(SEED_PP_DIVIDED, (*WEIGHTS, 0, "targetCluster"), _DELETE),
        "spec.placement.replicaScheduling.weightPreference.staticWeightList[0].targetCluster: "
        "required",
    ),
    (
        "dynamicWeight outside the enum",
        groups.PROPAGATION_POLICY.kind,
        _edit(SEED_PP_DIVIDED, (*REPLICAS, "weightPreference", "dynamicWeight"), "CPU"),
        "spec.placement.replicaScheduling.weightPreference.dynamicWeight: must be one of",
    ),
    (
        "spread by country",
        groups.CLUSTER_PROPAGATION_POLICY.kind,
        _edit(CPP_SPREAD, ("spec", "placement", "spreadConstraints", 0, "spreadByField"),
              "country"),
        "spec.placement.spreadConstraints[0].spreadByField: must be one of cluster, region, zone",
    ),
    (
        "negative minGroups",
        groups.PROPAGATION_POLICY.kind,
        _edit(SEED_PP_DUPLICATED, ("spec", "placement", "spreadConstraints", 0, "minGroups"), -1),
        "spec.placement.spreadConstraints[0].minGroups: must be >= 0",
    ),
    (
        "field selector on a field Karmada cannot select by",
        groups.PROPAGATION_POLICY.kind,
        _edit(SEED_PP_DIVIDED, ("spec", "placement", "clusterAffinity", "fieldSelector"),
              {"matchExpressions": [{"key": "name", "operator": "In", "values": ["m1"]}]}),
        "spec.placement.clusterAffinity.fieldSelector.matchExpressions[0].key: must be one of "
        "provider, region, zone",
    ),
    (
        "toleration effect",
        groups.CLUSTER_PROPAGATION_POLICY.kind,
        _edit(CPP_SPREAD, ("spec", "placement", "clusterTolerations", 0, "effect"), "Evict"),
        "spec.placement.clusterTolerations[0].effect: must be one of NoSchedule",
    ),
    (
        "no resource selectors",
        groups.PROPAGATION_POLICY.kind,
        _edit(SEED_PP_DIVIDED, ("spec", "resourceSelectors"), []),
        "spec.resourceSelectors: must have at least 1 item(s)",
    ),
    (
        "resource selector without kind",
        groups.PROPAGATION_POLICY.kind,
        _edit(SEED_PP_DIVIDED, ("spec", "resourceSelectors", 0, "kind"), _DELETE),
        "spec.resourceSelectors[0].kind: required",
    ),
    (
        "conflictResolution outside the enum",
        groups.PROPAGATION_POLICY.kind,
        _edit(SEED_PP_DIVIDED, ("spec", "conflictResolution"), "Merge"),
        "spec.conflictResolution: must be one of Abort, Overwrite",
    ),
    (
        "failover without decisionConditions",
        groups.PROPAGATION_POLICY.kind,
        _edit(SEED_PP_DIVIDED, ("spec", "failover"), {"application": {"purgeMode": "Directly"}}),
        "spec.failover.application.decisionConditions: required",
    ),
    (
        "affinity name too long",
        groups.PROPAGATION_POLICY.kind,
        _edit(SEED_PP_DIVIDED, ("spec", "placement", "clusterAffinities"),
              [{"affinityName": "a" * 33}]),
        "spec.placement.clusterAffinities[0].affinityName: must be at most 32 characters",
    ),
    (
        "a field Karmada has but we do not implement",
        groups.PROPAGATION_POLICY.kind,
        _edit(SEED_PP_DIVIDED, ("spec", "dependentOverrides"), ["web-override"]),
        "spec.dependentOverrides: unknown field",
    ),
    (
        "rb without resource",
        groups.RESOURCE_BINDING.kind,
        _edit(SEED_RB, ("spec", "resource"), _DELETE),
        "spec.resource: required",
    ),
    (
        "rb negative replicas on a cluster",
        groups.RESOURCE_BINDING.kind,
        _edit(SEED_RB, ("spec", "clusters", 0, "replicas"), -2),
        "spec.clusters[0].replicas: must be >= 0",
    ),
    (
        "eviction reason not CamelCase",
        groups.RESOURCE_BINDING.kind,
        _edit(SEED_RB, ("spec", "gracefulEvictionTasks"), [{**EVICTION, "reason": "taint gone"}]),
        "spec.gracefulEvictionTasks[0].reason: must match",
    ),
    (
        "eviction without producer",
        groups.RESOURCE_BINDING.kind,
        _edit(SEED_RB, ("spec", "gracefulEvictionTasks"),
              [{k: v for k, v in EVICTION.items() if k != "producer"}]),
        "spec.gracefulEvictionTasks[0].producer: required",
    ),
    (
        "aggregated status twice for a cluster",
        groups.RESOURCE_BINDING.kind,
        _edit(SEED_RB, ("status",), {"aggregatedStatus": [{"clusterName": "member1"},
                                                          {"clusterName": "member1"}]}),
        "status.aggregatedStatus[1]: duplicate entry for clusterName=member1",
    ),
    (
        "health outside the enum",
        groups.RESOURCE_BINDING.kind,
        _edit(SEED_RB, ("status",), {"aggregatedStatus": [{"clusterName": "member1",
                                                          "health": "Fine"}]}),
        "status.aggregatedStatus[0].health: must be one of Healthy, Unhealthy, Unknown",
    ),
    (
        "work manifest that is not an object",
        groups.WORK.kind,
        _edit(SEED_WORK, ("spec", "workload", "manifests"), ["kind: Deployment"]),
        "spec.workload.manifests[0]: must be an object",
    ),
    (
        "manifest status without ordinal",
        groups.WORK.kind,
        _edit(SEED_WORK, ("status",), {"manifestStatuses": [{"identifier": {
            "version": "v1", "kind": "ConfigMap", "resource": "configmaps", "name": "c"}}]}),
        "status.manifestStatuses[0].identifier.ordinal: required",
    ),
]


@pytest.mark.parametrize(("name", "kind", "obj"), ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_accepted(name: str, kind: str, obj: dict[str, Any], check_both: Any) -> None:
    assert check_both(kind, obj) == ([], [])


@pytest.mark.parametrize(("name", "kind", "obj", "message"), REJECTED, ids=[c[0] for c in REJECTED])
def test_rejected(name: str, kind: str, obj: dict[str, Any], message: str, check_both: Any) -> None:
    model, crd = check_both(kind, obj)
    assert len(model) == 1
    assert model[0].startswith(message), model[0]
    assert crd, "the CRD schema accepts what the model rejects"


def test_seed_remedy_typo_group_is_rejected_by_the_model() -> None:
    # The proposal's "rededition.karmada.io" typo (see SEED_REMEDY_IMMEDIATE).
    # The API server rejects it by routing (no such group), not by schema.
    typo = _edit(SEED_REMEDY_IMMEDIATE, ("apiVersion",), "rededition.karmada.io/v1alpha1")
    with pytest.raises(meta.ValidationError, match=r"^apiVersion: must be remedy\.karmada\.io/"):
        remedy.Remedy.from_dict(typo)


def test_wrong_kind_is_rejected() -> None:
    with pytest.raises(meta.ValidationError, match=r"^kind: must be Cluster"):
        cluster.Cluster.from_dict({"kind": "Remedy", "spec": {"syncMode": "Push"}})


def test_seed_remedies_decode_to_the_expected_models() -> None:
    on_condition = remedy.Remedy.from_dict(SEED_REMEDY_ON_CONDITION)
    assert on_condition.spec == remedy.RemedySpec(
        cluster_affinity=remedy.ClusterAffinity(cluster_names=("member1", "member2")),
        decision_matches=(
            remedy.DecisionMatch(
                cluster_condition_match=remedy.ClusterConditionRequirement(
                    condition_type=groups.CONDITION_SERVICE_DOMAIN_NAME_RESOLUTION_READY,
                    operator=remedy.ClusterConditionOperator.EQUAL,
                    condition_status="False",
                )
            ),
        ),
        actions=(remedy.RemedyAction.TRAFFIC_CONTROL,),
    )
    immediate = remedy.Remedy.from_dict(SEED_REMEDY_IMMEDIATE)
    assert immediate.spec.decision_matches is None  # absent: acts immediately
    never = remedy.Remedy.from_dict(
        _edit(SEED_REMEDY_ON_CONDITION, ("spec", "decisionMatches"), []))
    assert never.spec.decision_matches == ()  # empty: never matches
    assert immediate.metadata.name == "foo"


def test_error_carries_path_and_reason() -> None:
    bad = _edit(SEED_REMEDY_ON_CONDITION, (*REMEDY_MATCH, "operator"), "Bigger")
    with pytest.raises(meta.ValidationError) as caught:
        remedy.Remedy.from_dict(bad)
    assert caught.value.path == "spec.decisionMatches[0].clusterConditionMatch.operator"
    assert caught.value.reason.startswith("must be one of Equal, NotEqual")
    assert isinstance(caught.value, ValueError)


def test_unknown_fields_are_ignored_unless_strict() -> None:
    newer = _edit(SEED_CLUSTER, ("spec", "resourceModels"), [{"grade": 0}])
    parsed = cluster.Cluster.from_dict(newer)
    assert "resourceModels" not in parsed.to_dict()["spec"]
    with pytest.raises(meta.ValidationError, match=r"^spec\.resourceModels: unknown field"):
        cluster.Cluster.from_dict(newer, strict=True)
    # metadata always tolerates server-managed fields
    managed = _edit(SEED_CLUSTER, ("metadata", "managedFields"), [{"manager": "kubectl"}])
    cluster.Cluster.from_dict(managed, strict=True)


def test_null_means_absent() -> None:
    parsed = cluster.Cluster.from_dict(_edit(SEED_CLUSTER, ("spec", "zone"), None))
    assert parsed.spec.zone is None
    with pytest.raises(meta.ValidationError, match=r"^spec\.syncMode: required"):
        cluster.Cluster.from_dict(_edit(SEED_CLUSTER, ("spec", "syncMode"), None))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("Push", None),
        (["Push"], "must be one of Push, Pull"),
        (True, "must be one of Push, Pull"),
    ],
)
def test_type_errors_name_the_field(value: Any, message: str | None) -> None:
    obj = _edit(SEED_CLUSTER, ("spec", "syncMode"), value)
    if message is None:
        cluster.Cluster.from_dict(obj)
        return
    with pytest.raises(meta.ValidationError, match=rf"^spec\.syncMode: {message}"):
        cluster.Cluster.from_dict(obj)


def test_mci_model_reads_backends() -> None:
    ingress = mci.MultiClusterIngress.from_dict(MINIMAL_MCI)
    path = ingress.spec.rules[0].http.paths[0] if ingress.spec.rules[0].http else None
    assert path is not None
    assert path.path_type is mci.PathType.PREFIX
    assert path.backend.service == mci.IngressServiceBackend(
        name="web", port=mci.ServiceBackendPort(number=80)
    )
    assert ingress.metadata.namespace == "shop"


def test_seed_policy_decodes_to_the_expected_model() -> None:
    pp = policy.PropagationPolicy.from_dict(SEED_PP_DIVIDED)
    strategy = pp.spec.placement.replica_scheduling
    assert strategy == policy.ReplicaSchedulingStrategy(
        replica_scheduling_type=policy.ReplicaSchedulingType.DIVIDED,
        replica_division_preference=policy.ReplicaDivisionPreference.WEIGHTED,
        weight_preference=policy.ClusterPreferences(static_weight_list=(
            policy.StaticClusterWeight(
                target_cluster=policy.ClusterAffinity(cluster_names=("member1",)), weight=1),
            policy.StaticClusterWeight(
                target_cluster=policy.ClusterAffinity(cluster_names=("member2",)), weight=2),
        )),
    )
    assert pp.spec.resource_selectors == (
        policy.ResourceSelector(api_version="apps/v1", kind="Deployment", name="nginx"),)
    # Karmada's CRD defaults, as the API server would store them.
    assert pp.spec.conflict_resolution is policy.ConflictResolution.ABORT
    assert pp.spec.scheduler_name == policy.DEFAULT_SCHEDULER_NAME
    duplicated = policy.PropagationPolicy.from_dict(SEED_PP_DUPLICATED).spec.placement
    assert duplicated.spread_constraints == (policy.SpreadConstraint(max_groups=2, min_groups=2),)
    assert duplicated.replica_scheduling is not None
    assert duplicated.replica_scheduling.replica_scheduling_type is (
        policy.ReplicaSchedulingType.DUPLICATED)


def test_seed_binding_and_work_decode() -> None:
    binding = work.ResourceBinding.from_dict(SEED_RB)
    assert binding.spec.replicas == 3
    assert [(c.name, c.replicas) for c in binding.spec.clusters] == [("member2", 2), ("member1", 1)]
    assert binding.spec.resource.uid == "530aa301-760a-48a7-ada0-fc3a2112564b"
    carried = work.Work.from_dict(SEED_WORK)
    assert carried.metadata.namespace == groups.EXECUTION_NAMESPACE_PREFIX + "member1"
    (manifest,) = carried.spec.workload.manifests
    assert manifest["kind"] == "Deployment" and manifest["spec"]["replicas"] == 1
