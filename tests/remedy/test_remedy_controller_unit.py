"""What the Remedy controller caches of a Cluster, and whom it takes fields over from."""

from __future__ import annotations

import copy
import json
from typing import Any

from clusterhealth_remedy import controller

OURS = controller.FIELD_MANAGER


def _entry(manager: str, operation: str, status_fields: dict[str, Any]) -> dict[str, Any]:
    return {"manager": manager, "operation": operation, "apiVersion": "cluster.karmada.io/v1alpha1",
            "time": "2026-03-01T08:00:00Z", "fieldsType": "FieldsV1", "subresource": "status",
            "fieldsV1": {"f:status": status_fields}}


CLUSTER: dict[str, Any] = {
    "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
    "metadata": {
        "name": "member1", "uid": "u-1", "resourceVersion": "42", "generation": 3,
        "labels": {"a": "b"}, "annotations": {"big": "x" * 1000},
        "managedFields": [
            _entry("agent", "Apply", {"f:conditions": {'k:{"type":"DNS"}': {}}}),
            _entry("karmada-remedy-controller", "Update",
                   {"f:remedyActions": {}, "f:conditions": {}}),
            _entry(OURS, "Apply", {"f:remedyActions": {}, "f:remedyActionSources": {
                'k:{"action":"TrafficControl"}': {".": {}, "f:remedies": {}}}}),
        ],
    },
    "spec": {"apiEndpoint": "https://127.0.0.1:1", "syncMode": "Push"},
    "status": {
        "conditions": [{"type": "DNS", "status": "False", "reason": "Probe",
                        "message": "m" * 500, "lastTransitionTime": "2026-03-01T08:00:00Z"}],
        "remedyActions": ["TrafficControl"],
        "remedyActionSources": [{"action": "TrafficControl", "remedies": ["r"]}],
        "kubernetesVersion": "v1.34.4",
        "resourceSummary": {"allocatable": {"cpu": "8"}},
    },
}


def test_the_cluster_cache_keeps_what_the_controller_reads_and_the_cluster_to_write() -> None:
    raw = copy.deepcopy(CLUSTER)
    kept = controller.cluster_transform(copy.deepcopy(CLUSTER))
    assert kept == {
        "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
        "metadata": {
            "name": "member1", "uid": "u-1", "resourceVersion": "42", "generation": 3,
            "managedFields": [
                {"manager": "karmada-remedy-controller", "operation": "Update",
                 "fieldsV1": {"f:status": {"f:remedyActions": {}}}},
                {"manager": OURS, "operation": "Apply",
                 "fieldsV1": {"f:status": {"f:remedyActions": {}, "f:remedyActionSources": {}}}},
            ],
        },
        "status": {
            "conditions": [{"type": "DNS", "status": "False"}],
            "remedyActions": ["TrafficControl"],
            "remedyActionSources": [{"action": "TrafficControl", "remedies": ["r"]}],
        },
        # the whole Cluster but its managedFields, compact: the write is an update of it
        controller.WHOLE_OBJECT: json.dumps(
            {**CLUSTER, "metadata": {k: v for k, v in CLUSTER["metadata"].items()
                                     if k != "managedFields"}},
            separators=(",", ":")).encode(),
    }
    whole = controller.whole_object(kept)
    # spec, labels and annotations go with the update: Karmada's Cluster API stores them
    assert whole["spec"] == CLUSTER["spec"]
    assert whole["metadata"]["labels"] == {"a": "b"}
    assert whole["metadata"]["annotations"] == CLUSTER["metadata"]["annotations"]
    assert whole["status"] == CLUSTER["status"]
    assert "managedFields" not in whole["metadata"]
    assert controller.condition_statuses(kept) == controller.condition_statuses(raw)
    assert controller.owned_status(kept) == controller.owned_status(raw)


def test_a_cluster_nobody_wrote_remedy_fields_on() -> None:
    bare = {"metadata": {"name": "c", "resourceVersion": "1",
                         "managedFields": [_entry("agent", "Apply", {"f:conditions": {}})]},
            "spec": {}}
    kept = controller.cluster_transform(bare)
    assert controller.whole_object(kept) == {"metadata": {"name": "c", "resourceVersion": "1"},
                                             "spec": {}}
    del kept[controller.WHOLE_OBJECT]
    assert kept == {"metadata": {"name": "c", "resourceVersion": "1"}}


def test_foreign_owners() -> None:
    assert controller.foreign_owners(CLUSTER) == ["karmada-remedy-controller"]
    assert controller.foreign_owners(controller.cluster_transform(copy.deepcopy(CLUSTER))) == [
        "karmada-remedy-controller"]
    ours_only = copy.deepcopy(CLUSTER)
    del ours_only["metadata"]["managedFields"][1]
    assert controller.foreign_owners(ours_only) == []
    assert controller.foreign_owners(None) == []
    assert controller.foreign_owners({"metadata": {}}) == []
