"""The CRDs, installed in the real control-plane API server, reject bad input.

Also: the seed's example Remedies are accepted, and ``kubectl get``-style
listing (the API's Table output) shows the printer columns.
"""

from __future__ import annotations

from typing import Any

import pytest

import testkit
from clusterhealth_core import status
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources


def _remedy(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "remedy.karmada.io/v1alpha1", "kind": "Remedy",
            "metadata": {"name": name}, "spec": spec}


@pytest.mark.parametrize(
    ("match", "message"),
    [
        ({"conditionType": "ServiceDomainNameResolutionReady", "operator": "Bigger",
          "conditionStatus": "False"}, "operator"),
        ({"operator": "Equal", "conditionStatus": "False"}, "conditionType"),
        ({"conditionType": "ServiceDomainNameResolutionReady", "operator": "Equal"},
         "conditionStatus"),
        # a lower-case status never equals a condition's (and NotEqual would hold everywhere)
        ({"conditionType": "ServiceDomainNameResolutionReady", "operator": "NotEqual",
          "conditionStatus": "false"}, "conditionStatus"),
    ],
)
async def test_malformed_remedy_rejected(cp: kube.ApiClient, match: dict[str, str],
                                         message: str) -> None:
    body = _remedy(testkit.unique("bad"), {"decisionMatches": [{"clusterConditionMatch": match}],
                                    "actions": ["TrafficControl"]})
    with pytest.raises(errors.Invalid, match=message):
        await cp.create(resources.REMEDIES, body)


async def test_unknown_action_rejected(cp: kube.ApiClient) -> None:
    with pytest.raises(errors.Invalid, match="actions"):
        await cp.create(resources.REMEDIES, _remedy(testkit.unique("bad"), {"actions": ["Reboot"]}))


async def test_duplicate_cluster_names_rejected(cp: kube.ApiClient) -> None:
    body = _remedy(testkit.unique("dup"), {"clusterAffinity": {"clusterNames": ["m1", "m1"]},
                                    "actions": ["TrafficControl"]})
    with pytest.raises(errors.Invalid, match="Duplicate value"):
        await cp.create(resources.REMEDIES, body)


async def test_seed_example_remedies_accepted(cp: kube.ApiClient) -> None:
    # Seed 002, first example: act when DNS resolution fails on member1/member2.
    foo = _remedy(testkit.unique("foo"), {
        "decisionMatches": [{"clusterConditionMatch": {
            "conditionType": "ServiceDomainNameResolutionReady", "operator": "Equal",
            "conditionStatus": "False"}}],
        "clusterAffinity": {"clusterNames": ["member1", "member2"]},
        "actions": ["TrafficControl"],
    })
    # Seed 002, second example (an immediate Remedy for planned maintenance).  The seed
    # spells its apiVersion "rededition.karmada.io/v1alpha1", a typo for remedy.karmada.io.
    immediate = _remedy(testkit.unique("foo"), {
        "clusterAffinity": {"clusterNames": ["member1"]},
        "actions": ["TrafficControl"],
    })
    for body in (foo, immediate):
        created = await cp.create(resources.REMEDIES, body)
        assert created["spec"] == body["spec"]
        await cp.delete(resources.REMEDIES, body["metadata"]["name"])


async def test_cluster_requires_sync_mode_and_valid_taints(cp: kube.ApiClient) -> None:
    base = {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster"}
    with pytest.raises(errors.Invalid, match="syncMode"):
        await cp.create(resources.CLUSTERS, {**base, "metadata": {"name": testkit.unique("c")},
                                             "spec": {"apiEndpoint": "https://127.0.0.1:1"}})
    with pytest.raises(errors.Invalid, match="effect"):
        await cp.create(resources.CLUSTERS, {**base, "metadata": {"name": testkit.unique("c")},
                                             "spec": {"syncMode": "Push", "taints": [
                                                 {"key": "k", "effect": "Sometimes"}]}})


async def test_conditions_status_enum_enforced(cp: kube.ApiClient) -> None:
    with pytest.raises(errors.Invalid, match="status"):
        await status.apply_status(
            cp, resources.CLUSTERS, "member1",
            {"conditions": [{"type": "Probe", "status": "Maybe", "reason": "R", "message": "m",
                             "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
            field_manager="test-bad-writer",
        )


async def test_mci_rejects_bad_path_type(cp: kube.ApiClient) -> None:
    body = {"apiVersion": "networking.karmada.io/v1alpha1", "kind": "MultiClusterIngress",
            "metadata": {"name": testkit.unique("mci"), "namespace": "default"},
            "spec": {"rules": [{"http": {"paths": [{"path": "/", "pathType": "Glob", "backend": {
                "service": {"name": "web", "port": {"number": 80}}}}]}}]}}
    with pytest.raises(errors.Invalid, match="pathType"):
        await cp.create(resources.MULTI_CLUSTER_INGRESSES, body)
    body["spec"]["rules"][0]["http"]["paths"][0]["pathType"] = "Prefix"
    created = await cp.create(resources.MULTI_CLUSTER_INGRESSES, body)
    assert created["spec"]["rules"][0]["http"]["paths"][0]["pathType"] == "Prefix"
    await cp.delete(resources.MULTI_CLUSTER_INGRESSES, body["metadata"]["name"],
                    namespace="default")


async def test_table_listing_shows_printer_columns(cp: kube.ApiClient) -> None:
    # A Cluster of its own: the members' conditions belong to the agents under test.
    name = testkit.unique("table")
    await cp.create(resources.CLUSTERS, {
        "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "metadata": {"name": name},
        "spec": {"apiEndpoint": "https://127.0.0.1:1", "syncMode": "Push"}})
    await status.apply_status(cp, resources.CLUSTERS, name, {
        "conditions": [{"type": "ServiceDomainNameResolutionReady", "status": "False",
                        "reason": "ServiceDomainNameResolutionFailed", "message": "timeout",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        "remedyActions": ["TrafficControl"],
    }, field_manager="table-test")
    table = await cp.table(resources.CLUSTERS)
    assert table["kind"] == "Table"
    columns = [c["name"] for c in table["columnDefinitions"]]
    for wanted in ("Name", "Mode", "Ready", "DNS", "Remedy-Actions", "Age"):
        assert any(c.lower() == wanted.lower() for c in columns), columns
    rows = {row["cells"][0]: dict(zip(columns, row["cells"], strict=True))
            for row in table["rows"]}
    row = {k.lower(): v for k, v in rows[name].items()}
    assert row["mode"] == "Push"
    assert row["dns"] == "False"
    assert "TrafficControl" in str(row["remedy-actions"])
    await cp.delete(resources.CLUSTERS, name)

    remedy_table = await cp.table(resources.REMEDIES)
    assert [c["name"] for c in remedy_table["columnDefinitions"]][:2] == ["Name", "Actions"]
