"""The status controllers' pure rules: health, reflection, aggregation, template status."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest

from clusterhealth_controlplane import vocabulary
from clusterhealth_controlplane.status import decision

NOW = datetime.datetime(2025, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)


def deploy(replicas: int | None = 2, generation: int = 3, template_generation: int = 7,
           **status: int) -> dict[str, Any]:
    spec: dict[str, Any] = {} if replicas is None else {"replicas": replicas}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "n", "namespace": "d", "generation": generation,
                         "annotations": {decision.TEMPLATE_GENERATION:
                                         str(template_generation)}},
            "spec": spec, "status": status}


@pytest.mark.parametrize(("obj", "expected"), [
    (deploy(observedGeneration=3, updatedReplicas=2, availableReplicas=2), "Healthy"),
    (deploy(observedGeneration=4, updatedReplicas=2, availableReplicas=2), "Healthy"),
    (deploy(observedGeneration=2, updatedReplicas=2, availableReplicas=2), "Unhealthy"),
    (deploy(observedGeneration=3, updatedReplicas=2, availableReplicas=1), "Unhealthy"),
    (deploy(observedGeneration=3, updatedReplicas=1, availableReplicas=2), "Unhealthy"),
    (deploy(None, observedGeneration=3, updatedReplicas=1, availableReplicas=1), "Healthy"),
    (deploy(0, observedGeneration=3), "Healthy"),
    ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}, "Healthy"),
])
def test_health(obj: dict[str, Any], expected: str) -> None:
    assert decision.health(obj) == expected


def test_reflected_status_adds_the_generations() -> None:
    assert decision.reflected_status(deploy(replicas=2, availableReplicas=2)) == {
        "availableReplicas": 2, "generation": 3, "resourceTemplateGeneration": 7}
    assert decision.reflected_status({"kind": "ConfigMap", "metadata": {}}) is None
    assert decision.reflected_status({"kind": "Service", "metadata": {},
                                      "status": {"loadBalancer": {}}}) == {"loadBalancer": {}}


def test_manifest_status_identifier() -> None:
    entry = decision.manifest_status(0, "apps", "v1", "Deployment", "deployments", "d", "n",
                                     deploy(observedGeneration=3, updatedReplicas=2,
                                            availableReplicas=2))
    assert entry["identifier"] == {"ordinal": 0, "group": "apps", "version": "v1",
                                   "kind": "Deployment", "resource": "deployments",
                                   "namespace": "d", "name": "n"}
    assert entry["health"] == "Healthy" and entry["status"]["generation"] == 3


def work(applied: str | None, message: str = "", health: str | None = "Healthy",
         status: dict[str, Any] | None = None) -> dict[str, Any]:
    conditions = [] if applied is None else [
        {"type": "Applied", "status": applied, "reason": "x", "message": message}]
    statuses = [] if health is None else [
        {"identifier": {"ordinal": 0}, "health": health, "status": status or {"replicas": 1}}]
    return {"status": {"conditions": conditions, "manifestStatuses": statuses}}


def test_aggregated_status_per_cluster() -> None:
    items = decision.aggregated_status({
        "member2": work("False", "cluster member2 refused it", health=None),
        "member1": work("True", "Manifest has been successfully applied"),
        "member3": work(None, health=None)})
    assert items == [
        {"clusterName": "member1", "status": {"replicas": 1}, "applied": True,
         "health": "Healthy"},
        {"clusterName": "member2", "applied": False,
         "appliedMessage": "cluster member2 refused it", "health": "Unknown"},
        {"clusterName": "member3", "applied": False, "health": "Unknown"}]


def binding(*clusters: str) -> dict[str, Any]:
    return {"metadata": {"generation": 2},
            "spec": {"clusters": [{"name": c, "replicas": 1} for c in clusters]}}


@pytest.mark.parametrize(("targets", "applied", "expected"), [
    (("member1", "member2"), {"member1": True, "member2": True}, "True"),
    (("member1", "member2"), {"member1": True, "member2": False}, "False"),
    (("member1", "member2"), {"member1": True}, "False"),  # a Work missing
    (("member1",), {"member1": True, "member2": False}, "True"),  # an evicted one aside
    ((), {}, "False"),
])
def test_fully_applied(targets: tuple[str, ...], applied: dict[str, bool],
                       expected: str) -> None:
    items = [{"clusterName": c, "applied": a} for c, a in applied.items()]
    condition = decision.fully_applied(binding(*targets), items, NOW)
    assert condition["status"] == expected
    assert condition["reason"] == ("FullyAppliedSuccess" if expected == "True"
                                   else "FullyAppliedFailed")
    assert condition["observedGeneration"] == 2


def test_a_refused_binding_is_never_fully_applied() -> None:
    items = [{"clusterName": "member1", "applied": True}]
    condition = decision.fully_applied(binding("member1"), items, NOW,
                                       ("CrossNamespaceResource", "names team-b/x"))
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False", "CrossNamespaceResource", "names team-b/x")


def test_keep_transition_time_when_unchanged() -> None:
    wanted = decision.fully_applied(binding("member1"), [], NOW)
    live = [{**wanted, "lastTransitionTime": "2020-01-01T00:00:00Z"}]
    assert vocabulary.keep_transition(wanted, live)["lastTransitionTime"] == "2020-01-01T00:00:00Z"
    live[0]["status"] = "True"
    assert vocabulary.keep_transition(wanted, live)["lastTransitionTime"] == "2025-01-02T03:04:05Z"
    assert decision.same_condition(wanted, dict(wanted))
    assert not decision.same_condition(None, wanted)


def member(replicas: int, available: int, observed: int = 3, generation: int = 3,
           template_generation: int = 5) -> dict[str, Any]:
    return {"status": {"replicas": replicas, "readyReplicas": available,
                       "updatedReplicas": replicas, "availableReplicas": available,
                       "observedGeneration": observed, "generation": generation,
                       "resourceTemplateGeneration": template_generation}}


def template(generation: int = 5, observed: int | None = None) -> dict[str, Any]:
    status = {} if observed is None else {"observedGeneration": observed}
    return {"metadata": {"generation": generation}, "status": status}


@pytest.mark.parametrize(("items", "tmpl", "expected"), [
    ([member(1, 1), member(2, 2)], template(),
     {"replicas": 3, "readyReplicas": 3, "updatedReplicas": 3, "availableReplicas": 3,
      "unavailableReplicas": 0, "observedGeneration": 5}),
    # a member behind the template: counts summed, observedGeneration kept
    ([member(1, 1), member(2, 1, template_generation=4)], template(observed=4),
     {"replicas": 3, "readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2,
      "unavailableReplicas": 0, "observedGeneration": 4}),
    # a member whose controller has not observed its spec
    ([member(1, 1, observed=2)], template(),
     {"replicas": 1, "readyReplicas": 1, "updatedReplicas": 1, "availableReplicas": 1,
      "unavailableReplicas": 0}),
    # a Work without status yet counts as not caught up
    ([member(1, 1), {"clusterName": "member2"}], template(),
     {"replicas": 1, "readyReplicas": 1, "updatedReplicas": 1, "availableReplicas": 1,
      "unavailableReplicas": 0}),
])
def test_deployment_status(items: list[dict[str, Any]], tmpl: dict[str, Any],
                           expected: dict[str, Any]) -> None:
    assert decision.deployment_status(tmpl, items) == expected


def test_template_status_changed() -> None:
    wanted = {"replicas": 3, "availableReplicas": 3}
    assert decision.template_status_changed({"status": {"replicas": 3}}, wanted)
    assert not decision.template_status_changed(
        {"status": {"replicas": 3, "availableReplicas": 3, "x": 1}}, wanted)
    assert decision.is_deployment({"apiVersion": "apps/v1", "kind": "Deployment"})
    assert not decision.is_deployment({"apiVersion": "v1", "kind": "Deployment"})


@pytest.mark.parametrize(("failing", "limit"), [
    (0, 2048), (1, 2048), (64, 2048), (65, 2016), (100, 1310), (1000, 131), (5000, 128),
])
def test_message_limit_shares_a_budget(failing: int, limit: int) -> None:
    assert decision.message_limit(failing) == limit
    assert failing * limit <= max(decision.APPLIED_MESSAGES_BUDGET, failing * 128)


@pytest.mark.parametrize(("clusters", "length", "kept"), [
    (1, 100, 100),          # short: whole
    (1, 2048, 2048),        # at the limit: whole
    (1, 2049, 2048),        # over: cut, saying so
    (100, 32768, 1310),     # every one of 100 clusters fails long: each gets its share
    (100, 500, 500),        # short ones are whole however many fail
])
def test_applied_messages_are_cut_saying_so_and_every_entry_is_kept(
        clusters: int, length: int, kept: int) -> None:
    works = {f"member{i:03d}": work("False", f"{i:03d}:" + "x" * (length - 4), health=None)
             for i in range(clusters)}
    works["ok"] = work("True", "Manifest has been successfully applied")
    items = decision.aggregated_status(works)
    assert [i["clusterName"] for i in items] == sorted(works)  # one entry per cluster
    for item in items:
        if item["clusterName"] == "ok":
            assert "appliedMessage" not in item
            continue
        message = item["appliedMessage"]
        assert len(message) == kept
        assert message.startswith(item["clusterName"][-3:] + ":")  # the start is kept
        if kept < length:
            assert message.endswith(f"\u2026 (cut from {length} characters)")
        else:
            assert "cut from" not in message


def test_a_binding_of_100_long_errors_stays_small() -> None:
    """Every one of 100 clusters reports the longest message a Work may hold (32,768
    characters, four bytes each): the aggregated status stays under 600 KiB."""
    works = {f"member{i:03d}": work("False", "\U0001F4A5" * 32768, health=None)
             for i in range(100)}
    items = decision.aggregated_status(works)
    assert len(items) == 100
    assert len(json.dumps(items, ensure_ascii=False).encode()) < 600 * 1024
