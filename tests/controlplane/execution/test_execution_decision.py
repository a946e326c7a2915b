"""The execution controller's pure rules: what is applied, owned, re-applied and reported."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from clusterhealth_controlplane import vocabulary
from clusterhealth_controlplane.execution import decision

NOW = datetime.datetime(2025, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)


def member_object(**meta: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "nginx", "namespace": "default", "resourceVersion": "1",
                         "generation": 1, **meta},
            "spec": {"replicas": 1}, "status": {"replicas": 1}}


def test_prepare_marks_the_object_with_its_work() -> None:
    body = decision.prepare(member_object(labels={"app": "x"}), "karmada-es-member1", "w")
    assert body["metadata"]["labels"] == {"app": "x", vocabulary.MANAGED: "true"}
    assert body["metadata"]["annotations"] == {vocabulary.WORK_NAMESPACE: "karmada-es-member1",
                                               vocabulary.WORK_NAME: "w"}
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
    work = {"metadata": {"finalizers": [vocabulary.EXECUTION_FINALIZER]},
            "spec": {"workload": {"manifests": [member_object(), "junk"]}}}
    assert [m["kind"] for m in decision.manifests(work)] == ["Deployment"]
    assert decision.has_finalizer(work)
    assert not decision.has_finalizer({"metadata": {}})


def _manifest(resolution: str | None = None, namespace: str | None = "team-a"
              ) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "settings"}
    if namespace:
        meta["namespace"] = namespace
    if resolution:
        meta["annotations"] = {vocabulary.CONFLICT_RESOLUTION: resolution}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}


def _live(**annotations: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": "team-a", "uid": "u",
                         "annotations": annotations}, "data": {"k": "platform"}}


OURS = {vocabulary.WORK_NAMESPACE: "karmada-es-member1", vocabulary.WORK_NAME: "w"}
OTHER_WORK = {vocabulary.WORK_NAMESPACE: "karmada-es-member1", vocabulary.WORK_NAME: "other"}


@pytest.mark.parametrize(("resolution", "live", "expected"), [
    (None, None, decision.Verdict.CREATE),
    ("overwrite", None, decision.Verdict.CREATE),
    (None, _live(**OURS), decision.Verdict.UPDATE),
    ("abort", _live(**OURS), decision.Verdict.UPDATE),          # its own: always applied
    (None, _live(), decision.Verdict.CONFLICT),                  # the platform's: left alone
    ("abort", _live(), decision.Verdict.CONFLICT),
    ("Overwrite", _live(), decision.Verdict.CONFLICT),          # only Karmada's lower case
    ("overwrite", _live(), decision.Verdict.ADOPT),
    (None, _live(**OTHER_WORK), decision.Verdict.CONFLICT),      # another Work's
    ("overwrite", _live(**OTHER_WORK), decision.Verdict.ADOPT),
    (None, _live(**{decision.CREATED_BY: decision.CREATED_BY_EXECUTION}),
     decision.Verdict.UPDATE),                                   # made bare by execution
])
def test_verdict_is_karmadas_conflict_rule(resolution: str | None,
                                           live: dict[str, Any] | None,
                                           expected: decision.Verdict) -> None:
    assert decision.verdict(_manifest(resolution), live, "karmada-es-member1", "w") == expected


def test_a_conflict_names_the_object_and_whose_it_is() -> None:
    message = decision.conflict_message("member1", _manifest(), _live())
    assert message.startswith("ConfigMap team-a/settings already exists in cluster member1 "
                              "and it was not created by this control plane")
    assert "neither changed nor deleted" in message and "Overwrite" in message
    other = decision.conflict_message("member1", _manifest(), _live(**OTHER_WORK))
    assert "it belongs to Work karmada-es-member1/other" in other


def test_an_adopted_object_is_marked_and_released_not_deleted() -> None:
    body = decision.prepare(_manifest("overwrite"), "karmada-es-member1", "w", adopt=True)
    assert body["metadata"]["annotations"][decision.ADOPTED] == "true"
    assert decision.adopted(body) and not decision.adopted(_live(**OURS))
    patch = decision.release_patch()
    assert patch["metadata"]["labels"][vocabulary.MANAGED] is None
    assert set(body["metadata"]["annotations"]) <= set(patch["metadata"]["annotations"])
    assert all(v is None for v in patch["metadata"]["annotations"].values())


def test_a_template_cannot_forge_our_marks() -> None:
    forged = _manifest()
    forged["metadata"]["annotations"] = {decision.ADOPTED: "true",
                                         decision.CREATED_BY: decision.CREATED_BY_EXECUTION,
                                         vocabulary.WORK_NAME: "someone-else"}
    body = decision.prepare(forged, "karmada-es-member1", "w")
    annotations = body["metadata"]["annotations"]
    assert decision.ADOPTED not in annotations and decision.CREATED_BY not in annotations
    assert annotations[vocabulary.WORK_NAME] == "w"


@pytest.mark.parametrize(("namespace", "namespaced", "says"), [
    ("team-a", True, None),
    (None, False, None),
    ("team-a", False, "is namespaced on the control plane but its kind is cluster-scoped"),
    (None, True, "is cluster-scoped on the control plane but its kind is namespaced"),
])
def test_a_kind_of_another_scope_in_the_member_is_refused(namespace: str | None,
                                                          namespaced: bool,
                                                          says: str | None) -> None:
    found = decision.scope_refusal("member1", _manifest(namespace=namespace), namespaced)
    if says is None:
        assert found is None
    else:
        assert found is not None and says in found and "in cluster member1" in found


def test_sources_are_the_binding_and_the_template() -> None:
    manifest = _manifest()
    manifest["metadata"]["annotations"] = {vocabulary.TEMPLATE_UID: "t-uid"}
    work = {"metadata": {"name": "w", "namespace": "karmada-es-member1",
                         "annotations": {vocabulary.RB_NAMESPACE: "team-a",
                                         vocabulary.RB_NAME: "settings-configmap"}},
            "spec": {"workload": {"manifests": [manifest]}}}
    assert decision.sources(work) == [
        {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
         "metadata": {"name": "settings-configmap", "namespace": "team-a"}},
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "settings", "namespace": "team-a", "uid": "t-uid"}}]
    cluster_work = {"metadata": {"annotations": {vocabulary.CRB_NAME: "ns-namespace"}},
                    "spec": {}}
    assert decision.sources(cluster_work) == [
        {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ClusterResourceBinding",
         "metadata": {"name": "ns-namespace"}}]
