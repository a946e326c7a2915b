"""Fixtures for the API model tests: the chart's CRDs and an API-server stand-in.

``crd_validators`` checks an object against a CRD's openAPIV3Schema the way the
API server does with strict field validation (``kubectl`` default): JSON schema
keywords via ``jsonschema``, unknown fields rejected, list-map/set uniqueness,
and the CRDs' CEL rules through a reviewed Python translation (``CEL_RULES``).
Every CEL rule found in a CRD must have a translation, so a new rule cannot slip
in untested.
"""

import copy
import dataclasses
import json
from collections.abc import Callable, Iterator
from typing import Any

import apikit
import jsonschema
import pytest
import yaml

from clusterhealth_core.api import crds, groups, meta
from clusterhealth_localenv import binaries

MODELS = apikit.MODELS

# CEL rule text in the CRDs -> the same predicate in Python (self is a dict).
CEL_RULES: dict[str, Callable[[dict[str, Any]], bool]] = {
    "has(self.defaultBackend) || (has(self.rules) && size(self.rules) > 0)": lambda o: (
        "defaultBackend" in o or len(o.get("rules", [])) > 0
    ),
    "has(self.service) != has(self.resource)": lambda o: ("service" in o) != ("resource" in o),
    "has(self.name) != has(self.number)": lambda o: ("name" in o) != ("number" in o),
    "(has(self.addOnConditions) && size(self.addOnConditions) > 0) || "
    "(has(self.removeOnConditions) && size(self.removeOnConditions) > 0)": lambda o: (
        len(o.get("addOnConditions", [])) > 0 or len(o.get("removeOnConditions", [])) > 0
    ),
    "has(self.path) ? self.path.startsWith('/') : self.pathType == 'ImplementationSpecific'": (
        lambda o: (
            str(o["path"]).startswith("/")
            if "path" in o
            else o.get("pathType") == "ImplementationSpecific"
        )
    ),
}

# Only date-time is checked: the API server ignores integer formats (int32 and
# int64 are documentation), so a model's int32 range check needs explicit
# minimum/maximum in the CRD, or the mutation test reports the disagreement.
_FORMATS = jsonschema.FormatChecker(formats=())


@_FORMATS.checks("date-time", raises=ValueError)
def _date_time(value: object) -> bool:
    if isinstance(value, str):
        meta.parse_time(value)
    return True


def openapi_schema(crd: dict[str, Any], version: str | None = None) -> dict[str, Any]:
    """The schema of the CRD's only version (ours), or of the named one (Karmada's)."""
    versions = crd["spec"]["versions"]
    if version is None:
        assert len(versions) == 1, "one served version per CRD"
        (chosen,) = versions
    else:
        (chosen,) = (v for v in versions if v["name"] == version)
    schema: dict[str, Any] = chosen["schema"]["openAPIV3Schema"]
    return schema


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    """Copy of ``schema`` rejecting unknown properties (strict field validation)."""
    out = dict(schema)
    if out.pop("nullable", False):
        out = {"anyOf": [{"type": "null"}, out]}
        out["anyOf"][1] = _strict(out["anyOf"][1])
        return out
    if "properties" in out:
        out.setdefault("additionalProperties", False)
        out["properties"] = {name: _strict(sub) for name, sub in out["properties"].items()}
    if isinstance(out.get("items"), dict):
        out["items"] = _strict(out["items"])
    if isinstance(out.get("additionalProperties"), dict):
        out["additionalProperties"] = _strict(out["additionalProperties"])
    return out


class CrdValidator:
    """Validates objects of one kind against its CRD schema."""

    def __init__(self, crd: dict[str, Any], version: str | None = None) -> None:
        self.crd = crd
        self.schema = openapi_schema(crd, version)
        self._jsonschema = jsonschema.Draft7Validator(_strict(self.schema), format_checker=_FORMATS)

    def errors(self, obj: Any) -> list[str]:
        found = [
            f"{'.'.join(str(p) for p in error.absolute_path)}: {error.message}"
            for error in self._jsonschema.iter_errors(obj)
        ]
        self._walk(self.schema, obj, "", found)
        return found

    def _walk(self, schema: dict[str, Any], obj: Any, path: str, found: list[str]) -> None:
        for rule in schema.get("x-kubernetes-validations", []):
            assert rule["rule"] in CEL_RULES, f"{path}: no Python translation for {rule['rule']}"
            if isinstance(obj, dict) and not CEL_RULES[rule["rule"]](obj):
                found.append(f"{path}: {rule['message']}")
        if isinstance(obj, int) and not -(2**63) <= obj < 2**63:
            # The API server decodes such a number as a float: not an integer.
            found.append(f"{path}: integer out of the int64 range")
        if isinstance(obj, dict):
            properties = schema.get("properties", {})
            extra = schema.get("additionalProperties")
            for key, value in obj.items():
                if key in properties:
                    self._walk(properties[key], value, f"{path}.{key}", found)
                elif isinstance(extra, dict):
                    self._walk(extra, value, f"{path}[{key}]", found)
        elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
            list_type = schema.get("x-kubernetes-list-type")
            seen: list[Any] = []
            for index, item in enumerate(obj):
                if list_type == "set":
                    identity: Any = item
                elif list_type == "map" and isinstance(item, dict):
                    identity = tuple(item.get(k) for k in schema["x-kubernetes-list-map-keys"])
                else:
                    identity = object()
                if identity in seen:
                    found.append(f"{path}[{index}]: Duplicate value")
                seen.append(identity)
                self._walk(schema["items"], item, f"{path}[{index}]", found)


def model_errors(kind: str, obj: Any) -> list[str]:
    """Strict model validation of ``obj`` (unknown fields rejected)."""
    try:
        MODELS[kind].from_dict(obj, strict=True)
    except meta.ValidationError as error:
        return [str(error)]
    return []


@pytest.fixture(scope="session")
def crd_docs() -> dict[str, dict[str, Any]]:
    """The chart's CRDs keyed by kind."""
    return {doc["spec"]["names"]["kind"]: doc for doc in crds.load_crds()}


@pytest.fixture(scope="session")
def crd_validators(crd_docs: dict[str, dict[str, Any]]) -> dict[str, CrdValidator]:
    return {kind: CrdValidator(doc) for kind, doc in crd_docs.items()}


KARMADA_CRD_FILES: dict[str, str] = {
    groups.PROPAGATION_POLICY.kind: "policy.karmada.io_propagationpolicies.yaml",
    groups.CLUSTER_PROPAGATION_POLICY.kind: "policy.karmada.io_clusterpropagationpolicies.yaml",
    groups.CLUSTER_TAINT_POLICY.kind: "policy.karmada.io_clustertaintpolicies.yaml",
    groups.RESOURCE_BINDING.kind: "work.karmada.io_resourcebindings.yaml",
    groups.CLUSTER_RESOURCE_BINDING.kind: "work.karmada.io_clusterresourcebindings.yaml",
    groups.WORK.kind: "work.karmada.io_works.yaml",
}
"""Our kinds that Karmada defines as CRDs too, and Karmada's CRD file for each."""


@pytest.fixture(scope="session")
def karmada_validators() -> dict[str, CrdValidator]:
    """Karmada v1.18.2's CRD schemas of our kinds, at the version we serve.

    From the CRDs its installer ships, cached beside its binaries.
    """
    built = binaries.ensure_karmada()
    versions = {doc["spec"]["names"]["kind"]: doc["spec"]["versions"][0]["name"]
                for doc in crds.load_crds()}
    validators = {}
    for kind, file_name in KARMADA_CRD_FILES.items():
        (crd,) = [doc for doc in yaml.safe_load_all(built.crd(file_name).read_text()) if doc]
        validators[kind] = CrdValidator(crd, version=versions[kind])
    return validators


@pytest.fixture
def schema_mutations() -> Callable[[dict[str, Any], Any], list[tuple[str, Any, bool]]]:
    """``(schema, obj) -> [(name, mutated object, must_reject)]``: edits derived from a schema."""

    def mutations_of(schema: dict[str, Any], obj: Any) -> list[tuple[str, Any, bool]]:
        return list(_mutations(schema, obj, ()))

    return mutations_of


@pytest.fixture
def check_both(
    crd_validators: dict[str, CrdValidator],
) -> Callable[[str, Any], tuple[list[str], list[str]]]:
    """``(kind, obj) -> (model errors, CRD errors)``."""

    def check(kind: str, obj: Any) -> tuple[list[str], list[str]]:
        return model_errors(kind, obj), crd_validators[kind].errors(obj)

    return check


def _condition(type_: str, status: str, *, generation: bool = False) -> dict[str, Any]:
    condition: dict[str, Any] = {
        "type": type_,
        "status": status,
        "lastTransitionTime": "2024-01-25T04:05:57Z",
        "reason": f"{type_}Is{status}",
        "message": "coredns function is normal ",
    }
    if generation:
        condition["observedGeneration"] = 3
    return condition


def maximal_samples() -> dict[str, list[dict[str, Any]]]:
    """Valid wire objects that together set every field of every kind.

    Each object holds no empty optional field, so ``to_dict`` reproduces it
    exactly; several objects are needed where fields exclude each other.
    """
    requirement = {
        "conditionType": groups.CONDITION_SERVICE_DOMAIN_NAME_RESOLUTION_READY,
        "operator": "Equal",
        "conditionStatus": "False",
    }
    port_service = {"name": "web", "port": {"name": "http"}}
    number_service = {"name": "web", "port": {"number": 8080}}
    resource_ref = {"apiGroup": "k8s.example.com", "kind": "StorageBucket", "name": "static"}
    samples: dict[str, list[dict[str, Any]]] = {
        groups.CLUSTER.kind: [
            {
                "apiVersion": groups.CLUSTER.api_version,
                "kind": groups.CLUSTER.kind,
                "metadata": {"name": "member1", "resourceVersion": "42"},
                "spec": {
                    "id": "6b2f2c1e-6f5c-4e51-9c1e-2f6d3a9b0c11",
                    "apiEndpoint": "https://192.10.0.1:6443",
                    "secretRef": {"namespace": "karmada-cluster", "name": "member1"},
                    "impersonatorSecretRef": {
                        "namespace": "karmada-cluster",
                        "name": "member1-impersonator",
                    },
                    "syncMode": "Push",
                    "provider": "kind",
                    "region": "eu-west-1",
                    "zone": "eu-west-1a",
                    "taints": [
                        {
                            "key": groups.TAINT_CLUSTER_NOT_READY,
                            "value": "true",
                            "effect": "NoSchedule",
                            "timeAdded": "2024-01-25T04:06:00Z",
                        }
                    ],
                    "insecureSkipTLSVerification": True,
                    "proxyURL": "http://proxy.example:3128",
                    "proxyHeader": {"Proxy-Authorization": "Basic dTpw"},
                },
                "status": {
                    "kubernetesVersion": "v1.34.4",
                    "apiEnablements": [
                        {
                            "groupVersion": "apps/v1",
                            "resources": [{"name": "deployments", "kind": "Deployment"}],
                        }
                    ],
                    "conditions": [
                        _condition(groups.CONDITION_READY, "True", generation=True),
                        _condition(groups.CONDITION_SERVICE_DOMAIN_NAME_RESOLUTION_READY, "False"),
                    ],
                    "nodeSummary": {"totalNum": 3, "readyNum": 2},
                    "resourceSummary": {
                        "allocatable": {"cpu": "8", "memory": "16Gi", "pods": 110},
                        "allocating": {"cpu": "500m"},
                        "allocated": {"cpu": "2", "nvidia.com/gpu": 1},
                    },
                    "remedyActions": [groups.ACTION_TRAFFIC_CONTROL],
                    "remedyActionSources": [
                        {
                            "action": groups.ACTION_TRAFFIC_CONTROL,
                            "remedies": ["dns-failure", "maintenance"],
                        }
                    ],
                },
            }
        ],
        groups.REMEDY.kind: [
            {
                "apiVersion": groups.REMEDY.api_version,
                "kind": groups.REMEDY.kind,
                "metadata": {"name": "dns-failure"},
                "spec": {
                    "clusterAffinity": {"clusterNames": ["member1", "member2"]},
                    "decisionMatches": [{"clusterConditionMatch": requirement}],
                    "actions": [groups.ACTION_TRAFFIC_CONTROL],
                },
                "status": {
                    "conditions": [_condition(groups.CONDITION_READY, "True", generation=True)],
                    "activeClusters": [
                        {
                            "cluster": "member1",
                            "matchedCondition": requirement,
                            "since": "2024-01-25T04:06:00Z",
                        },
                        {"cluster": "member2", "since": "2024-01-25T04:07:00Z"},
                    ],
                    "activeClusterCount": 2,
                },
            }
        ],
        groups.MCI.kind: [
            {
                "apiVersion": groups.MCI.api_version,
                "kind": groups.MCI.kind,
                "metadata": {"name": "web", "namespace": "shop"},
                "spec": {
                    "ingressClassName": "clusterhealth",
                    "defaultBackend": {"service": number_service},
                    "tls": [{"hosts": ["shop.example.com"], "secretName": "shop-tls"}],
                    "rules": [
                        {
                            "host": "shop.example.com",
                            "http": {
                                "paths": [
                                    {
                                        "path": "/",
                                        "pathType": "Prefix",
                                        "backend": {"service": port_service},
                                    },
                                    {
                                        "path": "/api",
                                        "pathType": "Exact",
                                        "backend": {"service": number_service},
                                    },
                                    {
                                        "pathType": "ImplementationSpecific",
                                        "backend": {"resource": resource_ref},
                                    },
                                ]
                            },
                        }
                    ],
                },
                "status": {
                    "loadBalancer": {
                        "ingress": [
                            {
                                "ip": "192.0.2.10",
                                "hostname": "lb.example.com",
                                "ports": [{"port": 443, "protocol": "TCP", "error": "NoCert"}],
                            }
                        ]
                    },
                    "trafficBlockClusters": ["member2"],
                    "serviceLocations": [{"name": "web", "clusters": ["member1", "member2"]}],
                    "conditions": [_condition("LoadBalancerReady", "True", generation=True)],
                },
            },
            {
                "apiVersion": groups.MCI.api_version,
                "kind": groups.MCI.kind,
                "metadata": {"name": "static", "namespace": "shop"},
                "spec": {"defaultBackend": {"resource": resource_ref}},
            },
            {
                "apiVersion": groups.MCI.api_version,
                "kind": groups.MCI.kind,
                "metadata": {"name": "named-port", "namespace": "shop"},
                "spec": {"defaultBackend": {"service": port_service}},
            },
        ],
    }
    samples.update(_propagation_samples())
    # Break aliasing (shared sub-dicts) so a mutation edits exactly one place.
    return json.loads(json.dumps(samples))


def _propagation_samples() -> dict[str, list[dict[str, Any]]]:
    """Maximal policies, bindings and Works (values differ from the CRD defaults)."""
    label_selector = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["frontend"]}],
    }
    field_selector = {
        "matchExpressions": [
            {"key": "region", "operator": "In", "values": ["eu-west-1"]},
            {"key": "provider", "operator": "NotIn", "values": ["kind"]},
        ]
    }
    affinity = {
        "labelSelector": label_selector,
        "fieldSelector": field_selector,
        "clusterNames": ["member1", "member2"],
        "exclude": ["member3"],
    }
    toleration = {
        "key": groups.TAINT_CLUSTER_NOT_READY,
        "operator": "Equal",
        "value": "true",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    }
    weighted = {
        "clusterAffinity": affinity,
        "clusterTolerations": [toleration, {"operator": "Exists", "effect": "NoSchedule"}],
        "spreadConstraints": [
            {"spreadByField": "cluster", "maxGroups": 2, "minGroups": 1},
            {"spreadByField": "region", "maxGroups": 1},
        ],
        "replicaScheduling": {  # replicaSchedulingType: Divided is the default
            "replicaDivisionPreference": "Weighted",
            "weightPreference": {
                "staticWeightList": [
                    {"targetCluster": {"clusterNames": ["member1"]}, "weight": 1},
                    {"targetCluster": affinity, "weight": 2},
                ],
                "dynamicWeight": "AvailableReplicas",
            },
        },
    }
    duplicated = {
        "clusterAffinities": [
            {"affinityName": "primary", "clusterNames": ["member1"]},
            {"affinityName": "backup", "labelSelector": label_selector,
             "fieldSelector": field_selector, "exclude": ["member1"]},
        ],
        "spreadConstraints": [{"spreadByLabel": "topology.example.com/zone", "minGroups": 2}],
        "replicaScheduling": {"replicaSchedulingType": "Duplicated"},
    }
    policy_specs = [
        {
            "resourceSelectors": [
                {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop",
                 "name": "web", "labelSelector": label_selector},
                {"apiVersion": "v1", "kind": "ConfigMap"},
            ],
            "association": True,
            "propagateDeps": True,
            "placement": weighted,
            "priority": 10,
            "preemption": "Always",
            "schedulerName": "clusterhealth-scheduler",
            "failover": {"application": {"decisionConditions": {"tolerationSeconds": 120},
                                         "gracePeriodSeconds": 600}},
            "conflictResolution": "Overwrite",
            "suspension": {"dispatching": False,
                           "dispatchingOnClusters": {"clusterNames": ["member2"]}},
            "preserveResourcesOnDeletion": True,
        },
        {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "db"}],
            "propagateDeps": True,
            "placement": duplicated,
            "priority": -1,
            "failover": {
                "application": {"decisionConditions": {}, "purgeMode": "Directly"},
                "cluster": {"purgeMode": "Directly"},
            },
        },
    ]
    policy_status = {"conditions": [_condition("Selected", "True", generation=True)]}
    samples: dict[str, list[dict[str, Any]]] = {
        groups.PROPAGATION_POLICY.kind: [
            {"apiVersion": groups.PROPAGATION_POLICY.api_version,
             "kind": groups.PROPAGATION_POLICY.kind,
             "metadata": {"name": f"policy{index}", "namespace": "shop"},
             "spec": spec, "status": policy_status}
            for index, spec in enumerate(policy_specs)
        ],
        groups.CLUSTER_PROPAGATION_POLICY.kind: [
            {"apiVersion": groups.CLUSTER_PROPAGATION_POLICY.api_version,
             "kind": groups.CLUSTER_PROPAGATION_POLICY.kind,
             "metadata": {"name": f"policy{index}"}, "spec": spec, "status": policy_status}
            for index, spec in enumerate(policy_specs)
        ],
    }
    binding_spec = {
        "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop",
                     "name": "web", "uid": "530aa301-760a-48a7-ada0-fc3a2112564b",
                     "resourceVersion": "5776"},
        "propagateDeps": True,
        "replicaRequirements": {
            "nodeClaim": {
                "hardNodeAffinity": {"nodeSelectorTerms": [{
                    "matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}],
                    "matchFields": [{"key": "metadata.name", "operator": "NotIn",
                                     "values": ["node9"]}],
                }]},
                "nodeSelector": {"kubernetes.io/os": "linux"},
                "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "web",
                                 "effect": "NoSchedule"},
                                {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                                 "effect": "NoExecute", "tolerationSeconds": 300}],
            },
            "resourceRequest": {"cpu": "500m", "memory": "128Mi", "nvidia.com/gpu": 1},
            "namespace": "shop",
            "priorityClassName": "high",
        },
        "replicas": 3,
        "clusters": [{"name": "member2", "replicas": 3}, {"name": "member3"}],
        "placement": weighted,
        "gracefulEvictionTasks": [{
            "fromCluster": "member1",
            "purgeMode": "Gracefully",
            "replicas": 1,
            "reason": "TaintUntolerated",
            "message": "cluster member1 is tainted cluster.karmada.io/not-ready:NoExecute",
            "producer": "TaintManager",
            "gracePeriodSeconds": 600,
            "suppressDeletion": False,
            "preservedLabelState": {"failover.example.com/leader": "member1"},
            "creationTimestamp": "2024-01-25T04:06:00Z",
            "clustersBeforeFailover": ["member1", "member2"],
        }],
        "requiredBy": [{"namespace": "shop", "name": "frontend-deployment",
                        "clusters": [{"name": "member2", "replicas": 2}]}],
        "schedulerName": "default-scheduler",
        "failover": policy_specs[0]["failover"],
        "conflictResolution": "Overwrite",
        "rescheduleTriggeredAt": "2024-01-25T04:07:00Z",
        "suspension": {"dispatching": True, "dispatchingOnClusters": {"clusterNames": ["m9"]},
                       "scheduling": False},
        "preserveResourcesOnDeletion": False,
    }
    binding_status = {
        "schedulerObservedGeneration": 2,
        "schedulerObservingAffinityName": "primary",
        "lastScheduledTime": "2024-01-25T04:06:30Z",
        "conditions": [_condition(groups.CONDITION_SCHEDULED, "True", generation=True),
                       _condition(groups.CONDITION_FULLY_APPLIED, "False")],
        "aggregatedStatus": [
            {"clusterName": "member2", "status": {"replicas": 3, "availableReplicas": 3,
                                                   "conditions": [{"type": "Available"}]},
             "applied": True, "health": "Healthy"},
            {"clusterName": "member3", "appliedMessage": "namespaces \"shop\" not found",
             "health": "Unknown"},
        ],
    }
    # The second policy's placement and failover, on a binding.
    duplicated_spec = {
        "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "db"},
        "placement": duplicated,
        "failover": policy_specs[1]["failover"],
    }
    samples[groups.CLUSTER_TAINT_POLICY.kind] = [{
        "apiVersion": groups.CLUSTER_TAINT_POLICY.api_version,
        "kind": groups.CLUSTER_TAINT_POLICY.kind,
        "metadata": {"name": "dns-failure"},
        "spec": {
            "targetClusters": affinity,
            "addOnConditions": [
                {"conditionType": groups.CONDITION_SERVICE_DOMAIN_NAME_RESOLUTION_READY,
                 "operator": "In", "statusValues": ["False", "Unknown"]},
                {"conditionType": groups.CONDITION_READY, "operator": "NotIn",
                 "statusValues": ["False"]},
            ],
            "removeOnConditions": [
                {"conditionType": groups.CONDITION_SERVICE_DOMAIN_NAME_RESOLUTION_READY,
                 "operator": "In", "statusValues": ["True"]},
            ],
            "taints": [
                {"key": "clusterhealth.io/dns-failure", "effect": "NoExecute", "value": "true"},
                {"key": "clusterhealth.io/dns-failure", "effect": "NoSchedule"},
            ],
        },
    }, {
        "apiVersion": groups.CLUSTER_TAINT_POLICY.api_version,
        "kind": groups.CLUSTER_TAINT_POLICY.kind,
        "metadata": {"name": "remove-only"},
        "spec": {
            "removeOnConditions": [
                {"conditionType": groups.CONDITION_READY, "operator": "In",
                 "statusValues": ["True"]},
            ],
            "taints": [{"key": "maintenance", "effect": "NoSchedule"}],
        },
    }]
    samples[groups.RESOURCE_BINDING.kind] = [
        {"apiVersion": groups.RESOURCE_BINDING.api_version, "kind": groups.RESOURCE_BINDING.kind,
         "metadata": {"name": name, "namespace": "shop"}, "spec": spec, **status}
        for name, spec, status in (("web-deployment", binding_spec, {"status": binding_status}),
                                   ("db-deployment", duplicated_spec, {}))
    ]
    samples[groups.CLUSTER_RESOURCE_BINDING.kind] = [
        {"apiVersion": groups.CLUSTER_RESOURCE_BINDING.api_version,
         "kind": groups.CLUSTER_RESOURCE_BINDING.kind,
         "metadata": {"name": name}, "spec": spec, **status}
        for name, spec, status in (("web-deployment", binding_spec, {"status": binding_status}),
                                   ("db-deployment", duplicated_spec, {}))
    ]
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "nginx", "namespace": "default", "labels": {"app": "nginx"}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "nginx"}},
                 "template": {"metadata": {"labels": {"app": "nginx"}},
                              "spec": {"containers": [{"image": "nginx", "name": "nginx"}]}}},
    }
    samples[groups.WORK.kind] = [{
        "apiVersion": groups.WORK.api_version, "kind": groups.WORK.kind,
        "metadata": {"name": "nginx-687f7fb96f", "namespace": "karmada-es-member1",
                     "labels": {"resourcebinding.karmada.io/key": "687f7fb96f"},
                     "annotations": {"resourcebinding.karmada.io/name": "nginx-deployment"},
                     "finalizers": ["karmada.io/execution-controller"]},
        "spec": {"workload": {"manifests": [deployment, {"apiVersion": "v1", "kind": "ConfigMap",
                                                          "metadata": {"name": "cfg"},
                                                          "data": {"ratio": "0.5"}}]},
                 "suspendDispatching": False, "preserveResourcesOnDeletion": True},
        "status": {
            "conditions": [_condition(groups.CONDITION_APPLIED, "True", generation=True)],
            "manifestStatuses": [{
                "identifier": {"ordinal": 0, "group": "apps", "version": "v1",
                               "kind": "Deployment", "resource": "deployments",
                               "namespace": "default", "name": "nginx"},
                "status": {"replicas": 1, "availableReplicas": 1, "observedGeneration": 1},
                "health": "Healthy",
            }, {
                "identifier": {"ordinal": 1, "version": "v1", "kind": "ConfigMap",
                               "resource": "configmaps", "name": "cfg"},
            }],
        },
    }]
    return samples


@dataclasses.dataclass(frozen=True)
class Mutation:
    """One edit of a valid sample; model and CRD must reach the same verdict."""

    kind: str
    name: str
    obj: Any
    must_reject: bool


_BAD_PATTERN_VALUE = "!!not valid!!"


def _set(root: Any, path: tuple[Any, ...], value: Any) -> Any:
    out = copy.deepcopy(root)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


def _delete(root: Any, path: tuple[Any, ...]) -> Any:
    out = copy.deepcopy(root)
    node = out
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return out


def _label(path: tuple[Any, ...]) -> str:
    text = ""
    for key in path:
        text += f"[{key}]" if isinstance(key, int) else f".{key}"
    return text.lstrip(".") or "<root>"


def _scalar_mutations(
    schema: dict[str, Any], root: Any, path: tuple[Any, ...]
) -> Iterator[tuple[str, Any]]:
    label = _label(path)
    if schema.get("x-kubernetes-int-or-string"):
        yield f"{label}=true", _set(root, path, True)
        if "pattern" in schema:
            yield f"{label}=bad-pattern", _set(root, path, _BAD_PATTERN_VALUE)
        return
    kind = schema.get("type")
    if "enum" in schema:
        yield f"{label}=not-in-enum", _set(root, path, "NotAValidValue")
    if kind == "string":
        yield f"{label}=number", _set(root, path, 42)
        if schema.get("minLength", 0) >= 1:
            yield f"{label}=empty", _set(root, path, "")
        if "maxLength" in schema:
            yield f"{label}=too-long", _set(root, path, "a" * (schema["maxLength"] + 1))
        if "pattern" in schema:
            yield f"{label}=bad-pattern", _set(root, path, _BAD_PATTERN_VALUE)
        if schema.get("format") == "date-time":
            yield f"{label}=bad-time", _set(root, path, "2024-01-25 04:05")
    elif kind == "integer":
        yield f"{label}=string", _set(root, path, "1")
        yield f"{label}=float", _set(root, path, 1.5)
        if schema.get("format") == "int32":
            yield f"{label}=overflow", _set(root, path, 2**31)
        if schema.get("format") == "int64":
            yield f"{label}=overflow", _set(root, path, 2**63)
        if "minimum" in schema:
            yield f"{label}=below-minimum", _set(root, path, schema["minimum"] - 1)
        if "maximum" in schema:
            yield f"{label}=above-maximum", _set(root, path, schema["maximum"] + 1)
    elif kind == "boolean":
        yield f"{label}=string", _set(root, path, "true")


def _mutations(
    schema: dict[str, Any], root: Any, path: tuple[Any, ...]
) -> Iterator[tuple[str, Any, bool]]:
    """Yield (name, mutated object, must_reject) for the node at ``path``."""
    node: Any = root
    for key in path:
        node = node[key]
    label = _label(path)
    if schema.get("nullable"):
        # What server-side apply stores when a writer relinquishes every child.
        yield f"{label}=null", _set(root, path, None), False
    if isinstance(node, dict):
        if path:
            yield f"{label}=string", _set(root, path, "x"), True
        properties = schema.get("properties")
        if properties is None:
            extra = schema.get("additionalProperties")
            if isinstance(extra, dict):
                for key in node:
                    yield from _mutations(extra, root, (*path, key))
            return  # metadata: opaque object
        yield f"{label}+unknownField", _set(root, (*path, "unknownField"), 1), True
        required = set(schema.get("required", []))
        for key in node:
            yield f"{label}-{key}", _delete(root, (*path, key)), key in required
            yield from _mutations(properties[key], root, (*path, key))
    elif isinstance(node, list):
        yield f"{label}=string", _set(root, path, "x"), True
        if node:  # empty is not absent (decisionMatches: [] never matches)
            yield f"{label}=[]", _set(root, path, []), schema.get("minItems", 0) >= 1
        if "maxItems" in schema and node:
            limit = schema["maxItems"]
            yield f"{label}=maxItems", _set(root, path, _distinct(schema, node, limit)), False
            yield (f"{label}=maxItems+1", _set(root, path, _distinct(schema, node, limit + 1)),
                   True)
        if schema.get("x-kubernetes-list-type") in ("set", "map") and node:
            yield f"{label}+duplicate", _set(root, path, [*node, node[0]]), True
        for index in range(len(node)):
            yield from _mutations(schema["items"], root, (*path, index))
    else:
        for name, mutated in _scalar_mutations(schema, root, path):
            yield name, mutated, True


def _distinct(schema: dict[str, Any], items: list[Any], count: int) -> list[Any]:
    """``count`` items made from ``items[0]``, distinct where the list is a set or a map."""
    keys = schema.get("x-kubernetes-list-map-keys", [])
    made: list[Any] = []
    for index in range(count):
        item = copy.deepcopy(items[index % len(items)])
        if keys and isinstance(item, dict):
            for key in keys:
                item[key] = f"{item[key]}-{index}"
        elif schema.get("x-kubernetes-list-type") == "set" and isinstance(item, str):
            item = f"{item}-{index}"
        made.append(item)
    return made


def all_mutations() -> list[Mutation]:
    schemas = {doc["spec"]["names"]["kind"]: openapi_schema(doc) for doc in crds.load_crds()}
    result: list[Mutation] = []
    for kind, objs in maximal_samples().items():
        for index, obj in enumerate(objs):
            for name, mutated, must_reject in _mutations(schemas[kind], obj, ()):
                result.append(Mutation(kind, f"{kind}{index}:{name}", mutated, must_reject))
    return result


@pytest.fixture(name="all_mutations", scope="session")
def all_mutations_fixture() -> list[Mutation]:
    return all_mutations()


@pytest.fixture
def samples() -> dict[str, list[dict[str, Any]]]:
    """Fresh copies of the maximal samples, by kind."""
    return maximal_samples()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``sample`` (kind, wire object) and ``mutation`` arguments."""
    if "sample" in metafunc.fixturenames:
        cases = [(kind, obj) for kind, objs in maximal_samples().items() for obj in objs]
        ids = [f"{kind}-{obj['metadata']['name']}" for kind, obj in cases]
        metafunc.parametrize("sample", cases, ids=ids)
    if "mutation" in metafunc.fixturenames:
        mutations = all_mutations()
        metafunc.parametrize("mutation", mutations, ids=[m.name for m in mutations])
