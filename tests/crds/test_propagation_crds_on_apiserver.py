"""Policies, bindings and Works on real API servers: ours and Karmada's CRDs agree.

Karmada's example manifests (``tests/data/karmada_examples``, unchanged) are
created with strict field validation (``kubectl``'s default) in our control
plane and in the Karmada-mode one (Karmada v1.18.2's own CRDs): both accept
them and store the same spec, Karmada's defaults included.  Bad input is
refused by our API server naming the field; printer columns, short names and
the status subresource work as a user of Karmada expects.
"""

from __future__ import annotations

import contextlib
import pathlib
from typing import Any

import pytest
import yaml

import testkit
from clusterhealth_core import status
from clusterhealth_core.api import groups
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import environment, waiting

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "data" / "karmada_examples"

BY_KIND = {resource.kind: resource for resource in (
    resources.PROPAGATION_POLICIES, resources.CLUSTER_PROPAGATION_POLICIES,
    resources.CLUSTER_TAINT_POLICIES, resources.RESOURCE_BINDINGS,
    resources.CLUSTER_RESOURCE_BINDINGS, resources.WORKS)}


def _examples() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        found += [(path.name, doc) for doc in yaml.safe_load_all(path.read_text()) if doc]
    return found


def _where(body: dict[str, Any]) -> tuple[resources.Resource, str, str | None]:
    resource = BY_KIND[body["kind"]]
    namespace = body["metadata"].get("namespace", "default") if resource.namespaced else None
    return resource, body["metadata"]["name"], namespace


async def _create_strict(api: kube.ApiClient, body: dict[str, Any]) -> dict[str, Any]:
    """POST as ``kubectl create`` does: unknown or duplicate fields are errors."""
    resource, _, namespace = _where(body)
    created: dict[str, Any] = await api.request(
        "POST", resource.path(namespace=namespace), params={"fieldValidation": "Strict"},
        body=body)
    return created


async def _ensure_namespace(api: kube.ApiClient, name: str) -> None:
    with contextlib.suppress(errors.Conflict):
        await api.create(resources.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                                "metadata": {"name": name}})


async def _delete_and_wait(api: kube.ApiClient, body: dict[str, Any]) -> None:
    resource, name, namespace = _where(body)
    with contextlib.suppress(errors.NotFound):
        # The seed's Work carries the execution controller's finalizer: none runs here.
        await api.patch(resource, name, {"metadata": {"finalizers": None}}, namespace=namespace)
    await api.delete(resource, name, namespace=namespace, missing_ok=True)

    async def gone() -> bool:
        try:
            await api.get(resource, name, namespace=namespace)
        except errors.NotFound:
            return True
        return False
    await waiting.eventually(gone, timeout=30)


def _keeps(stored: Any, sent: Any) -> bool:
    """Whether ``stored`` has everything ``sent`` has (objects may have more keys)."""
    if isinstance(sent, dict):
        return isinstance(stored, dict) and all(
            key in stored and _keeps(stored[key], value) for key, value in sent.items())
    if isinstance(sent, list):
        return (isinstance(stored, list) and len(stored) == len(sent)
                and all(_keeps(a, b) for a, b in zip(stored, sent, strict=True)))
    return bool(stored == sent)


def _stored(obj: dict[str, Any]) -> dict[str, Any]:
    """What the schema decides about a created object: its spec (with defaults)."""
    return {"kind": obj["kind"], "name": obj["metadata"]["name"], "spec": obj["spec"]}


async def test_karmada_examples_are_stored_alike_by_ours_and_karmada_s(
        env: environment.LocalEnvironment,
        karmada_env: environment.LocalEnvironment) -> None:
    checked = 0
    async with env.client() as ours, karmada_env.client() as theirs:
        for name, body in _examples():
            namespace = _where(body)[2]
            stored = []
            for api in (ours, theirs):
                if namespace is not None:
                    await _ensure_namespace(api, namespace)
                await _delete_and_wait(api, body)  # left over by an interrupted run
                try:
                    stored.append(_stored(await _create_strict(api, body)))
                finally:
                    await _delete_and_wait(api, body)
            assert stored[0] == stored[1], name
            assert _keeps(stored[0]["spec"], body["spec"]), name  # defaults only add to it
            checked += 1
    assert checked == len(_examples()) >= 15


async def test_the_seed_policy_gets_karmada_s_defaults(cp: kube.ApiClient) -> None:
    (body,) = [doc for name, doc in _examples()
               if name == "seed000_propagationpolicy_divided_weighted.yaml"]
    body = {**body, "metadata": {"name": testkit.unique("nginx-propagation"),
                                 "namespace": "default"}}
    created = await _create_strict(cp, body)
    try:
        spec = created["spec"]
        assert (spec["conflictResolution"], spec["preemption"], spec["priority"],
                spec["schedulerName"]) == ("Abort", "Never", 0, "default-scheduler")
        weights = spec["placement"]["replicaScheduling"]["weightPreference"]["staticWeightList"]
        assert [(w["targetCluster"]["clusterNames"], w["weight"]) for w in weights] == [
            (["member1"], 1), (["member2"], 2)]
        table = await cp.table(resources.PROPAGATION_POLICIES, namespace="default")
        columns = [c["name"] for c in table["columnDefinitions"]]
        assert columns[:4] == ["Name", "Conflict-Resolution", "Priority", "Age"]
        rows = {row["cells"][0]: row["cells"] for row in table["rows"]}
        assert rows[body["metadata"]["name"]][1:3] == ["Abort", 0]
    finally:
        await cp.delete(resources.PROPAGATION_POLICIES, body["metadata"]["name"],
                        namespace="default")


def _policy(placement: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": groups.PROPAGATION_POLICY.api_version,
            "kind": groups.PROPAGATION_POLICY.kind,
            "metadata": {"name": testkit.unique("bad"), "namespace": "default"},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                            "name": "nginx"}],
                     "placement": placement, **spec}}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (_policy({"replicaScheduling": {"replicaSchedulingType": "Spread"}}),
         "spec.placement.replicaScheduling.replicaSchedulingType"),
        (_policy({"replicaScheduling": {"weightPreference": {"staticWeightList": [
            {"targetCluster": {"clusterNames": ["member1"]}, "weight": -1}]}}}),
         "spec.placement.replicaScheduling.weightPreference.staticWeightList[0].weight"),
        (_policy({"spreadConstraints": [{"spreadByField": "cluster", "minGroups": -1}]}),
         "spec.placement.spreadConstraints[0].minGroups"),
        (_policy({"clusterAffinity": {"fieldSelector": {"matchExpressions": [
            {"key": "name", "operator": "In", "values": ["member1"]}]}}}),
         "spec.placement.clusterAffinity.fieldSelector.matchExpressions[0].key"),
        (_policy({}, conflictResolution="Merge"), "spec.conflictResolution"),
        (_policy({}, dependentOverrides=["web"]), 'unknown field "spec.dependentOverrides"'),
        ({**_policy({}), "spec": {"resourceSelectors": []}}, "spec.resourceSelectors"),
    ],
    ids=["type", "negative-weight", "negative-min-groups", "field-key", "conflict",
         "unimplemented-field", "no-selectors"],
)
async def test_bad_policy_refused_naming_the_field(cp: kube.ApiClient, body: dict[str, Any],
                                                   field: str) -> None:
    with pytest.raises(errors.ApiError) as raised:  # 422 Invalid, or 400 for a strict decode
        await _create_strict(cp, body)
    assert field in str(raised.value)


async def test_short_names_as_in_karmada(cp: kube.ApiClient) -> None:
    expected = {
        "/apis/policy.karmada.io/v1alpha1": {"propagationpolicies": ["pp"],
                                             "clusterpropagationpolicies": ["cpp"],
                                             "clustertaintpolicies": None},  # none in Karmada
        "/apis/work.karmada.io/v1alpha2": {"resourcebindings": ["rb"],
                                           "clusterresourcebindings": ["crb"]},
        "/apis/work.karmada.io/v1alpha1": {"works": ["wk"]},
    }
    for path, names in expected.items():
        discovery = await cp.request("GET", path)
        served = {r["name"]: r.get("shortNames") for r in discovery["resources"]
                  if "/" not in r["name"]}
        assert served == names, path


async def test_binding_status_has_one_entry_per_writer(cp: kube.ApiClient) -> None:
    """Conditions and aggregatedStatus are list-maps: writers keep each other's entries."""
    name = testkit.unique("nginx-deployment")
    (seed,) = [doc for file, doc in _examples() if file == "seed000_resourcebinding.yaml"]
    await _create_strict(cp, {**seed, "metadata": {"name": name, "namespace": "default"}})
    try:
        for cluster in ("member1", "member2"):
            await status.apply_status(cp, resources.RESOURCE_BINDINGS, name, {
                "aggregatedStatus": [{"clusterName": cluster, "applied": True,
                                      "health": "Healthy",
                                      "status": {"availableReplicas": 1, "x": {"y": [1]}}}],
            }, field_manager=f"status-{cluster}", namespace="default")
        await status.apply_status(cp, resources.RESOURCE_BINDINGS, name, {
            "schedulerObservedGeneration": 1,
            "conditions": [{"type": groups.CONDITION_SCHEDULED, "status": "True",
                            "reason": "Success", "message": "scheduled",
                            "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        }, field_manager="scheduler", namespace="default")
        binding = await cp.get(resources.RESOURCE_BINDINGS, name, namespace="default")
        entries = binding["status"]["aggregatedStatus"]
        assert [(e["clusterName"], e["status"]) for e in entries] == [
            ("member1", {"availableReplicas": 1, "x": {"y": [1]}}),
            ("member2", {"availableReplicas": 1, "x": {"y": [1]}})]
        assert binding["spec"]["clusters"] == seed["spec"]["clusters"]  # status only
        table = await cp.table(resources.RESOURCE_BINDINGS, namespace="default")
        rows = {row["cells"][0]: row["cells"] for row in table["rows"]}
        assert [c["name"] for c in table["columnDefinitions"]][:3] == [
            "Name", "Scheduled", "FullyApplied"]
        assert rows[name][1] == "True"
        with pytest.raises(errors.Invalid, match="health"):
            await status.apply_status(cp, resources.RESOURCE_BINDINGS, name, {
                "aggregatedStatus": [{"clusterName": "member3", "health": "Fine"}],
            }, field_manager="status-member3", namespace="default")
    finally:
        await cp.delete(resources.RESOURCE_BINDINGS, name, namespace="default")


async def test_work_keeps_its_manifests_whole(cp: kube.ApiClient) -> None:
    (seed,) = [doc for file, doc in _examples() if file == "seed000_work.yaml"]
    namespace = groups.EXECUTION_NAMESPACE_PREFIX + "member1"
    await _ensure_namespace(cp, namespace)
    body = {**seed, "metadata": {**seed["metadata"], "name": testkit.unique("nginx"),
                                 "finalizers": []}}
    created = await _create_strict(cp, body)
    try:
        assert created["spec"]["workload"]["manifests"] == seed["spec"]["workload"]["manifests"]
        table = await cp.table(resources.WORKS, namespace=namespace)
        rows = {row["cells"][0]: row["cells"] for row in table["rows"]}
        assert rows[body["metadata"]["name"]][1] == "Deployment"
    finally:
        await cp.delete(resources.WORKS, body["metadata"]["name"], namespace=namespace)
