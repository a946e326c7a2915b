"""The Remedy controller end to end against the real control-plane API server.

The condition-driven test also runs against Karmada's API (its Cluster API
without ``remedyActionSources``, its Remedy CRD without a status): the
controller acts all the same and says, once, what is lost there.
"""

from __future__ import annotations

import asyncio
import random
import signal
from collections.abc import Callable
from typing import Any

import pytest
import remedykit as k

import testkit
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import environment

TC = ["TrafficControl"]
Start = Callable[..., k.Controller]


async def _clusters(cp: kube.ApiClient, cleanup: dict[str, list[str]], n: int) -> list[str]:
    names = [testkit.unique(f"rc{i}") for i in range(n)]
    for name in names:
        await testkit.make_cluster(cp, name)
        await k.set_condition(cp, name, "True")
        cleanup["clusters"].append(name)
    return names


async def _has(cp: kube.ApiClient, cluster: str, wanted: list[str]) -> bool:
    return await k.actions(cp, cluster) == wanted


def _spec(obj: dict[str, Any], plane: environment.LocalEnvironment) -> dict[str, Any]:
    """The spec a status write must keep.

    On Karmada's plane its cluster controller taints a Cluster it cannot reach
    (``cluster.karmada.io/not-ready``) at a moment of its choosing, so the taints
    are its to change between two reads; everything else must come back as it was.
    """
    spec = dict(obj["spec"])
    if plane.is_karmada:
        spec.pop("taints", None)
    return spec


@pytest.mark.planes("ours", "karmada")
async def test_condition_driven_remedy(controllers: Start, plane: environment.LocalEnvironment,
                                       cp: kube.ApiClient,
                                       cleanup: dict[str, list[str]]) -> None:
    a, b = await _clusters(cp, cleanup, 2)
    # What the write must keep: on Karmada's Cluster API a status update stores the spec
    # and metadata it is sent (a CRD's status subresource ignores them).
    await cp.patch(resources.CLUSTERS, a, {"metadata": {
        "labels": {"team": "payments"}, "annotations": {"owner": "sre"}}}, patch_type="merge")
    before = await cp.get(resources.CLUSTERS, a)
    remedy = testkit.unique("dns")
    await k.make_remedy(cp, remedy, [a, b])
    cleanup["remedies"].append(remedy)
    ctrl = controllers()

    await k.set_condition(cp, a, "False")
    await k.eventually(lambda: _has(cp, a, TC))
    obj = await cp.get(resources.CLUSTERS, a)
    assert _spec(obj, plane) == _spec(before, plane) and obj["spec"].get("apiEndpoint")
    for field in ("labels", "annotations"):
        assert obj["metadata"].get(field) == before["metadata"].get(field), field
    # every finalizer read before stays; Karmada's cluster controller may add its own
    # (karmada.io/cluster-controller) to the new Cluster meanwhile, on its plane
    assert set(before["metadata"].get("finalizers") or []) <= set(
        obj["metadata"].get("finalizers") or [])
    if plane.is_karmada:  # Karmada's Cluster API has no remedyActionSources
        assert "remedyActionSources" not in obj["status"]
    else:
        assert obj["status"]["remedyActionSources"] == [{"action": "TrafficControl",
                                                          "remedies": [remedy]}]
    assert await k.actions(cp, b) == []

    async def active() -> Any:
        st = (await cp.get(resources.REMEDIES, remedy)).get("status") or {}
        return st.get("activeClusters")
    if not plane.is_karmada:  # Karmada's Remedy CRD has no status
        entries = await k.eventually(active)
        assert [e["cluster"] for e in entries] == [a]
        assert entries[0]["matchedCondition"] == {
            "conditionType": k.DNS, "operator": "Equal", "conditionStatus": "False"}

    await k.set_condition(cp, a, "True")
    await k.eventually(lambda: _has(cp, a, []))
    obj = await cp.get(resources.CLUSTERS, a)
    assert _spec(obj, plane) == _spec(before, plane)
    assert "remedyActionSources" not in obj["status"]
    (dns,) = [c for c in obj["status"]["conditions"] if c["type"] == k.DNS]
    assert (dns["status"], dns["message"]) == ("True", "set to True")  # untouched
    if not plane.is_karmada:  # there, Karmada writes its Ready beside it
        assert [c["type"] for c in obj["status"]["conditions"]] == [k.DNS]

    # Remedy deleted -> cleared.
    await k.set_condition(cp, b, "False")
    await k.eventually(lambda: _has(cp, b, TC))
    await cp.delete(resources.REMEDIES, remedy)
    await k.eventually(lambda: _has(cp, b, []))

    # Events tell what happened and why (recorded in the background, after the write).
    async def reasons_seen() -> dict[str, str] | None:
        events = await cp.list(resources.EVENTS, namespace="default",
                               field_selector=f"involvedObject.name={b}")
        found = {e["reason"]: e["message"] for e in events["items"]}
        return found if {"RemedyActionAdded", "RemedyActionRemoved"} <= set(found) else None

    reasons = await k.eventually(reasons_seen)
    assert remedy in reasons["RemedyActionAdded"]
    assert "Equal False" in reasons["RemedyActionAdded"]
    assert "RemedyActionRemoved" in reasons

    # What the server cannot hold is said once, in the log and the metrics; no write
    # failed (a write the server refuses would be an error reconcile, retried for ever).
    await asyncio.to_thread(_no_failed_reconciles, ctrl)
    unsupported = await asyncio.to_thread(ctrl.samples, "clusterhealth_schema_unsupported_field")
    lost = {(dict(labels)["resource"], dict(labels)["field"]) for labels, v in unsupported.items()
            if v == 1}
    log = ctrl.log.read_text()
    if plane.is_karmada:
        assert lost == {(resources.CLUSTERS.crd_name, "remedyActionSources"),
                        (resources.REMEDIES.crd_name, "status")}
        for field in ("status.remedyActionSources", "status.(status)"):
            assert log.count(f"does not declare {field} on this server") == 1, log
    else:
        assert lost == set()
        assert "does not declare" not in log


def _no_failed_reconciles(ctrl: k.Controller) -> None:
    results = ctrl.samples("clusterhealth_controller_reconcile_total")
    by_result: dict[str, float] = {}
    for labels, value in results.items():
        result = dict(labels)["result"]
        by_result[result] = by_result.get(result, 0.0) + value
    assert by_result.get("success", 0) > 0, results
    assert by_result.get("error", 0) == by_result.get("terminal", 0) == 0, results


async def test_immediate_remedy_and_affinity_moves(controllers: Start, cp: kube.ApiClient,
                                                   cleanup: dict[str, list[str]]) -> None:
    a, b = await _clusters(cp, cleanup, 2)
    controllers()
    upgrade = testkit.unique("maintenance")
    await k.make_remedy(cp, upgrade, [a], match=None)
    cleanup["remedies"].append(upgrade)
    await k.eventually(lambda: _has(cp, a, TC))
    assert await k.actions(cp, b) == []

    # affinity [a] -> [b]: moves from a to b (union of old and new re-evaluated)
    await cp.patch(resources.REMEDIES, upgrade, {"spec": {"clusterAffinity": {
        "clusterNames": [b]}}})
    await k.eventually(lambda: _has(cp, b, TC))
    await k.eventually(lambda: _has(cp, a, []))

    # affinity emptied -> applies to no cluster (Karmada's meaning), and says so
    await cp.patch(resources.REMEDIES, upgrade, {"spec": {"clusterAffinity": {
        "clusterNames": []}}})
    await k.eventually(lambda: _has(cp, b, []))
    effective = await k.eventually(lambda: _condition(cp, upgrade, "Effective", "False"))
    assert effective["reason"] == "NoClusterSelected"
    assert "names no cluster" in effective["message"]
    for cluster in (a, "member1", "member2"):
        assert await k.actions(cp, cluster) == []

    # affinity removed -> applies to every cluster
    await cp.patch(resources.REMEDIES, upgrade, {"spec": {"clusterAffinity": None}})
    for cluster in (a, b, "member1", "member2"):
        await k.eventually(lambda c=cluster: _has(cp, c, TC))  # type: ignore[misc]
    effective = await k.eventually(lambda: _condition(cp, upgrade, "Effective", "True"))
    assert effective["reason"] == "CanAct"

    await cp.delete(resources.REMEDIES, upgrade)
    for cluster in (a, b, "member1", "member2"):
        await k.eventually(lambda c=cluster: _has(cp, c, []))  # type: ignore[misc]


async def test_empty_decision_matches_never_act_and_say_so(
        controllers: Start, cp: kube.ApiClient, cleanup: dict[str, list[str]]) -> None:
    (a,) = await _clusters(cp, cleanup, 1)
    await k.set_condition(cp, a, "False")
    never = testkit.unique("never")
    await cp.create(resources.REMEDIES, {  # accepted by the API server, as in Karmada
        "apiVersion": resources.REMEDIES.api_version, "kind": "Remedy",
        "metadata": {"name": never},
        "spec": {"clusterAffinity": {"clusterNames": [a]}, "decisionMatches": [],
                 "actions": TC}})
    cleanup["remedies"].append(never)
    controllers()
    effective = await k.eventually(lambda: _condition(cp, never, "Effective", "False"))
    assert effective["reason"] == "NeverMatches"
    assert effective["observedGeneration"] == 1
    assert await k.actions(cp, a) == []
    table = await cp.table(resources.REMEDIES)  # what kubectl get remedies shows
    columns = [c["name"] for c in table["columnDefinitions"]]
    (row,) = [r["cells"] for r in table["rows"] if r["cells"][0] == never]
    assert dict(zip(columns, row, strict=True))["Effective"] == "False"
    # the same Remedy without decisionMatches acts immediately
    await cp.patch(resources.REMEDIES, never, {"spec": {"decisionMatches": None}})
    await k.eventually(lambda: _has(cp, a, TC))
    await k.eventually(lambda: _condition(cp, never, "Effective", "True"))


async def _condition(cp: kube.ApiClient, remedy: str, ctype: str,
                     value: str) -> dict[str, Any] | None:
    st = (await cp.get(resources.REMEDIES, remedy)).get("status") or {}
    found = next((c for c in st.get("conditions") or [] if c["type"] == ctype), None)
    return found if found is not None and found["status"] == value else None


async def test_unknown_cluster_reported_on_remedy(controllers: Start, cp: kube.ApiClient,
                                                  cleanup: dict[str, list[str]]) -> None:
    (a,) = await _clusters(cp, cleanup, 1)
    remedy = testkit.unique("typo")
    await k.make_remedy(cp, remedy, [a, "no-such-cluster"])
    cleanup["remedies"].append(remedy)
    controllers()

    async def resolved() -> Any:
        st = (await cp.get(resources.REMEDIES, remedy)).get("status") or {}
        return next((c for c in st.get("conditions") or [] if c["type"] == "ClustersResolved"),
                    None)
    cond = await k.eventually(resolved)
    assert cond["status"] == "False"
    assert "no-such-cluster" in cond["message"]


async def test_concurrent_writer_loses_nothing(controllers: Start, cp: kube.ApiClient,
                                               cleanup: dict[str, list[str]]) -> None:
    (a,) = await _clusters(cp, cleanup, 1)
    remedy = testkit.unique("busy")
    await k.make_remedy(cp, remedy, [a])
    cleanup["remedies"].append(remedy)
    controllers()
    rng = random.Random(7)
    dns_value = "True"
    for n in range(300):
        # the agent flips DNS now and then; another writer flips Ready all the time
        if n % 30 == 0:
            dns_value = rng.choice(["True", "False"])
            await k.set_condition(cp, a, dns_value, manager="agent-like")
        await k.set_condition(cp, a, "True" if n % 2 else "False", ctype="Ready",
                              manager="status-like")
    expected = TC if dns_value == "False" else []
    await k.eventually(lambda: _has(cp, a, expected))
    obj = await cp.get(resources.CLUSTERS, a)
    types = sorted(c["type"] for c in obj["status"]["conditions"])
    assert types == ["Ready", k.DNS]
    await asyncio.sleep(1)  # and it stays right
    assert await k.actions(cp, a) == expected


async def test_leader_killed_mid_stream_other_converges(
        controllers: Start, cp: kube.ApiClient, cleanup: dict[str, list[str]]) -> None:
    clusters = await _clusters(cp, cleanup, 3)
    remedy = testkit.unique("failover")
    await k.make_remedy(cp, remedy, clusters)
    cleanup["remedies"].append(remedy)
    first, second = controllers(), controllers()
    leader = await k.eventually(lambda: _leader([first, second]))
    for cluster in clusters:
        await k.set_condition(cp, cluster, "False")
    leader.stop(signal.SIGKILL)  # mid-stream: the flips are still being processed
    for cluster in clusters[:2]:
        await k.set_condition(cp, cluster, "True")
    survivor = second if leader is first else first
    await k.eventually(lambda: _leader([survivor]), timeout=20)
    for cluster, wanted in zip(clusters, ([], [], TC), strict=True):
        await k.eventually(lambda c=cluster, w=wanted: _has(cp, c, w), timeout=20)  # type: ignore[misc]


async def _leader(candidates: list[k.Controller]) -> k.Controller | None:
    for ctrl in candidates:
        if await asyncio.to_thread(ctrl.is_leader):
            return ctrl
    return None
