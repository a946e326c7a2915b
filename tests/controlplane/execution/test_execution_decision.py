"""The execution controller's pure rules: what is applied, owned, re-applied and reported."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from clusterhealth_controlplane.binding import decision as binding
from clusterhealth_controlplane.execution import decision

NOW = datetime.datetime(2025, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)


def member_object(**meta: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "nginx", "namespace": "default", "resourceVersion": "1",
                         "generation": 1, **meta},
            "spec": {"replicas": 1}, "status": {"replicas": 1}}


def test_prepare_marks_the_object_with_its_work() -> None:
    body = decision.prepare(member_object(labels={"app": "x"}), "karmada-es-member1", "w")
    assert body["metadata"]["labels"] == {"app": "x", binding.MANAGED: "true"}
    assert body["metadata"]["annotations"] == {binding.WORK_NAMESPACE: "karmada-es-member1",
                                               binding.WORK_NAME: "w"}
    assert "status" not in body and "resourceVersion" not in body["metadata"]
    assert decision.owned_by(body, "karmada-es-member1", "w")
    assert not decision.owned_by(body, "karmada-es-member2", "w")
    assert not decision.owned_by(member_object(), "karmada-es-member1", "w")


@pytest.mark.parametrize(("event", "change", "expected"), [
    ("DELETED", {}, True),
    ("MODIFIED", {"spec": {"replicas": 5}}, True),
    ("MODIFIED", {"status": {"replicas": 2}}, False),
    ("MODIFIED", {"metadata": {"name": "nginx", "namespace": "default",
                               "resourceVersion": "2", "generation": 1}}, False),
    ("MODIFIED", {"metadata": {"name": "nginx", "namespace": "default", "labels": {"a": "b"}}},
     True),
])
def test_needs_reapply(event: str, change: dict[str, Any], expected: bool) -> None:
    old = member_object()
    assert decision.needs_reapply(event, {**old, **change}, old) is expected


@pytest.mark.parametrize(("conditions", "expected"), [
    ([{"type": "Ready", "status": "True"}], True),
    ([{"type": "Ready", "status": "False"}], False),
    ([{"type": "Ready", "status": "Unknown"}], None),
    ([], None),
])
def test_ready(conditions: list[dict[str, str]], expected: bool | None) -> None:
    assert decision.ready({"status": {"conditions": conditions}}) is expected


def test_applied_condition() -> None:
    ok = decision.applied_condition(True, "", 3, NOW)
    assert ok == {"type": "Applied", "status": "True", "reason": "AppliedSuccessful",
                  "message": "Manifest has been successfully applied",
                  "lastTransitionTime": "2025-01-02T03:04:05Z", "observedGeneration": 3}
    failed = decision.applied_condition(False, "boom", None, NOW)
    assert (failed["status"], failed["reason"], failed["message"]) == ("False", "AppliedFailed",
                                                                        "boom")
    assert "observedGeneration" not in failed
    # a long member error is cut, saying so (Karmada would keep all 32,768 characters)
    long = decision.applied_condition(False, "admission webhook denied: " + "x" * 40000,
                                      None, NOW)["message"]
    assert len(long) == decision.APPLIED_MESSAGE_LIMIT == 4096
    assert long.startswith("admission webhook denied: xxx")
    assert long.endswith("\u2026 (cut from 40026 characters)")


def test_unserved_message_names_the_cluster_and_the_kinds() -> None:
    message = decision.unserved_message("member1", [("example.io/v1", "Widget")])
    assert message.startswith("cluster member1 does not serve Widget (example.io/v1); "
                              "nothing of this Work was applied")


def test_manifests_and_finalizer() -> None:
    work = {"metadata": {"finalizers": [binding.EXECUTION_FINALIZER]},
            "spec": {"workload": {"manifests": [member_object(), "junk"]}}}
    assert [m["kind"] for m in decision.manifests(work)] == ["Deployment"]
    assert decision.has_finalizer(work)
    assert not decision.has_finalizer({"metadata": {}})
