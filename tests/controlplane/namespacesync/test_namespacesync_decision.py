"""The namespace sync's pure rules: which namespaces reach the members, and their Works."""

from __future__ import annotations

import re
from typing import Any

import pytest

from clusterhealth_controlplane import vocabulary
from clusterhealth_controlplane.namespacesync import decision


def namespace(name: str, labels: dict[str, str] | None = None,
              annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "uid": f"{name}-uid", "resourceVersion": "7",
                         "labels": labels or {}, "annotations": annotations or {},
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}


@pytest.mark.parametrize(("name", "labels", "expected"), [
    ("team-a", {}, True),
    ("default", {}, False),
    ("kube-system", {}, False),
    ("kube-node-lease", {}, False),
    ("karmada-system", {}, False),
    ("karmada-cluster", {}, False),
    ("karmada-es-member1", {}, False),
    ("team-b", {decision.SKIP_LABEL: "true"}, False),
    ("team-b", {decision.SKIP_LABEL: "True"}, False),
    ("team-b", {decision.SKIP_LABEL: "false"}, True),
    ("monitoring", {}, False),                       # --skipped-propagating-namespaces
    ("monitoring-x", {}, True),                      # matched against the whole name
])
def test_which_namespaces_are_synced(name: str, labels: dict[str, str], expected: bool) -> None:
    assert decision.synced(namespace(name, labels), (re.compile("monitoring"),)) is expected


def test_the_work_carries_labels_and_annotations_and_is_finalized() -> None:
    psa = {"pod-security.kubernetes.io/enforce": "restricted", "team": "a"}
    work = decision.work(namespace("team-a", psa, {"owner": "a@example.com"}), "member1")
    meta = work["metadata"]
    assert meta["name"] == vocabulary.work_name("Namespace", "team-a", None)
    assert meta["namespace"] == "karmada-es-member1"
    assert meta["finalizers"] == [vocabulary.EXECUTION_FINALIZER]
    assert meta["ownerReferences"][0]["uid"] == "team-a-uid"
    assert decision.source_of(work) == "team-a"
    [manifest] = work["spec"]["workload"]["manifests"]
    assert manifest["kind"] == "Namespace" and "status" not in manifest
    assert "spec" not in manifest
    assert manifest["metadata"]["labels"] == {**psa, vocabulary.MANAGED: "true"}
    annotations = manifest["metadata"]["annotations"]
    assert annotations["owner"] == "a@example.com"
    assert annotations[vocabulary.CONFLICT_RESOLUTION] == "abort"
    assert annotations[vocabulary.WORK_NAME] == meta["name"]
    assert "uid" not in manifest["metadata"] and "resourceVersion" not in manifest["metadata"]


def test_a_namespace_may_opt_into_overwrite() -> None:
    found = decision.work(namespace("team-a", annotations={
        vocabulary.CONFLICT_RESOLUTION: "overwrite"}), "member1")
    assert found["metadata"]["annotations"][vocabulary.CONFLICT_RESOLUTION] == "overwrite"


def test_up_to_date_compares_what_the_work_carries() -> None:
    wanted = decision.work(namespace("team-a", {"a": "1"}), "member1")
    live = {**wanted, "metadata": {**wanted["metadata"], "resourceVersion": "3",
                                   "labels": {**wanted["metadata"]["labels"], "x": "y"}}}
    assert decision.up_to_date(live, wanted)
    assert not decision.up_to_date(None, wanted)
    changed = decision.work(namespace("team-a", {"a": "2"}), "member1")
    assert not decision.up_to_date(live, changed)
    deleting = {**live, "metadata": {**live["metadata"], "deletionTimestamp": "now"}}
    assert not decision.up_to_date(deleting, wanted)
