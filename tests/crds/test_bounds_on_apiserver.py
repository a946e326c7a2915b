"""The policy kinds' lists are bounded: a real API server refuses an over-long one clearly.

Karmada's CRDs set no ``maxItems`` on these lists; ours do (the bounds live in the
models, ``clusterhealth_core.api``, and the API tests keep the CRDs equal to them).
Each case is one list one item over its bound, sent as ``kubectl`` sends it; the
API server's answer names the field, the count and the limit.  The same list at
its bound is stored.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from clusterhealth_core.api import cluster, groups, mci, policy
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def _names(count: int) -> list[str]:
    return [f"member{i}" for i in range(count)]


def _propagation(count: int) -> tuple[resources.Resource, dict[str, Any]]:
    return resources.PROPAGATION_POLICIES, {
        "apiVersion": groups.PROPAGATION_POLICY.api_version,
        "kind": groups.PROPAGATION_POLICY.kind,
        "metadata": {"name": _name("bounds"), "namespace": "default"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
                 "placement": {"clusterAffinity": {"clusterNames": _names(count)}}}}


def _cluster_propagation(count: int) -> tuple[resources.Resource, dict[str, Any]]:
    return resources.CLUSTER_PROPAGATION_POLICIES, {
        "apiVersion": groups.CLUSTER_PROPAGATION_POLICY.api_version,
        "kind": groups.CLUSTER_PROPAGATION_POLICY.kind,
        "metadata": {"name": _name("bounds")},
        "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap",
                                        "name": f"cm{i}"} for i in range(count)]}}


def _taint_policy(count: int) -> tuple[resources.Resource, dict[str, Any]]:
    return resources.CLUSTER_TAINT_POLICIES, {
        "apiVersion": groups.CLUSTER_TAINT_POLICY.api_version,
        "kind": groups.CLUSTER_TAINT_POLICY.kind,
        "metadata": {"name": _name("bounds")},
        "spec": {"addOnConditions": [{"conditionType": "Ready", "operator": "In",
                                      "statusValues": ["False"]}],
                 "taints": [{"key": f"t{i}", "effect": "NoSchedule"} for i in range(count)]}}


def _remedy(count: int) -> tuple[resources.Resource, dict[str, Any]]:
    return resources.REMEDIES, {
        "apiVersion": resources.REMEDIES.api_version, "kind": "Remedy",
        "metadata": {"name": _name("bounds")},
        "spec": {"clusterAffinity": {"clusterNames": _names(count)},
                 "actions": ["TrafficControl"]}}


def _mci(count: int) -> tuple[resources.Resource, dict[str, Any]]:
    backend = {"service": {"name": "web", "port": {"number": 80}}}
    return resources.MULTI_CLUSTER_INGRESSES, {
        "apiVersion": resources.MULTI_CLUSTER_INGRESSES.api_version,
        "kind": "MultiClusterIngress",
        "metadata": {"name": _name("bounds"), "namespace": "default"},
        "spec": {"rules": [{"host": f"h{i}.example", "http": {"paths": [
            {"path": "/", "pathType": "Prefix", "backend": backend}]}}
            for i in range(count)]}}


CASES: list[tuple[str, Callable[[int], tuple[resources.Resource, dict[str, Any]]], int,
                  str]] = [
    ("propagation-policy-cluster-names", _propagation, cluster.MAX_CLUSTER_NAMES,
     "spec.placement.clusterAffinity.clusterNames"),
    ("cluster-propagation-policy-selectors", _cluster_propagation,
     policy.MAX_RESOURCE_SELECTORS, "spec.resourceSelectors"),
    ("cluster-taint-policy-taints", _taint_policy, policy.MAX_POLICY_TAINTS, "spec.taints"),
    ("remedy-cluster-names", _remedy, cluster.MAX_CLUSTER_NAMES,
     "spec.clusterAffinity.clusterNames"),
    ("mci-rules", _mci, mci.MAX_RULES, "spec.rules"),
]


@pytest.mark.parametrize(("make", "bound", "field"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
async def test_one_over_the_bound_is_refused_naming_field_and_limit(
        cp: kube.ApiClient, make: Callable[[int], tuple[resources.Resource, dict[str, Any]]],
        bound: int, field: str) -> None:
    resource, body = make(bound + 1)
    namespace = body["metadata"].get("namespace")
    with pytest.raises(errors.ApiError) as raised:
        await cp.request("POST", resource.path(namespace=namespace),
                         params={"fieldValidation": "Strict"}, body=body)
    assert raised.value.status == 422
    assert (f"{field}: Too many: {bound + 1}: must have at most {bound} items"
            in str(raised.value))
    resource, body = make(bound)  # at the bound: stored
    await cp.request("POST", resource.path(namespace=namespace),
                     params={"fieldValidation": "Strict"}, body=body)
    await cp.delete(resource, body["metadata"]["name"], namespace=namespace)


async def test_an_over_long_cluster_name_is_refused(cp: kube.ApiClient) -> None:
    _, body = _propagation(1)
    body["spec"]["placement"]["clusterAffinity"]["clusterNames"] = ["m" * 254]
    with pytest.raises(errors.ApiError) as raised:
        await cp.create(resources.PROPAGATION_POLICIES, body, namespace="default")
    assert "spec.placement.clusterAffinity.clusterNames[0]: Too long: may not be more than " \
           "253" in str(raised.value)
