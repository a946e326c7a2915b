"""Which control-plane namespaces reach the members, and the Work that carries each: pure.

Karmada's namespace sync, as v1.18 does it:

* every namespace is propagated to every member, except the reserved ones
  (``karmada-system``, ``karmada-cluster``, ``karmada-es-*``, ``kube-*``),
  ``default``, those matching ``--skipped-propagating-namespaces``, and those
  labelled ``namespace.karmada.io/skip-auto-propagation: "true"``;
* one Work per namespace and member, in that member's execution namespace,
  named ``names.GenerateWorkName("Namespace", <name>, "")``, carrying the
  Namespace with its labels and annotations (and without what belongs to the
  control plane's copy), the execution finalizer from the start, and the
  Namespace as its owner;
* conflicts as for any Work: a member namespace that exists and was not made
  by this Work is left alone (``abort``) unless the control-plane namespace is
  annotated ``work.karmada.io/conflict-resolution: overwrite``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from clusterhealth_controlplane import vocabulary
from clusterhealth_controlplane.binding import decision as binding

SKIP_LABEL = "namespace.karmada.io/skip-auto-propagation"
"""Karmada's opt-out label on a control-plane namespace (value ``"true"``)."""
SOURCE_LABEL = "namespacesync.clusterhealth.io/namespace"
"""On each namespace Work: the namespace it carries (to find a namespace's Works)."""
KIND = "Namespace"


def synced(namespace: Mapping[str, Any], skipped: Sequence[re.Pattern[str]] = ()) -> bool:
    """Whether the namespace sync propagates this control-plane namespace."""
    meta = namespace.get("metadata") or {}
    name = str(meta.get("name") or "")
    if not name or name == "default" or vocabulary.reserved(name):
        return False
    if str((meta.get("labels") or {}).get(SKIP_LABEL, "")).lower() == "true":
        return False
    return not any(pattern.fullmatch(name) for pattern in skipped)


def work_name(namespace: str) -> str:
    """The name of a namespace's Work in every execution namespace."""
    return vocabulary.work_name(KIND, namespace, None)


def work(namespace: Mapping[str, Any], cluster: str) -> dict[str, Any]:
    """The Work that puts ``namespace`` into ``cluster``."""
    meta = namespace.get("metadata") or {}
    name = str(meta["name"])
    manifest = binding.manifest({**namespace, "apiVersion": "v1", "kind": KIND}, None)
    manifest.pop("spec", None)  # the member's own finalizers: nothing to carry
    where = vocabulary.execution_namespace(cluster)
    own = (meta.get("annotations") or {}).get(vocabulary.CONFLICT_RESOLUTION)
    resolution = own if own in (vocabulary.OVERWRITE, vocabulary.ABORT) else vocabulary.ABORT
    manifest_meta = manifest["metadata"]
    manifest_meta["labels"] = {**(manifest_meta.get("labels") or {}), vocabulary.MANAGED: "true"}
    manifest_meta["annotations"] = {
        **(manifest_meta.get("annotations") or {}), vocabulary.WORK_NAME: work_name(name),
        vocabulary.WORK_NAMESPACE: where, vocabulary.CONFLICT_RESOLUTION: resolution}
    work_meta: dict[str, Any] = {
        "name": work_name(name), "namespace": where,
        "labels": {SOURCE_LABEL: name},
        "annotations": {vocabulary.CONFLICT_RESOLUTION: resolution},
        "finalizers": [vocabulary.EXECUTION_FINALIZER]}
    if meta.get("uid"):
        work_meta["ownerReferences"] = [{"apiVersion": "v1", "kind": KIND, "name": name,
                                         "uid": str(meta["uid"]), "controller": True,
                                         "blockOwnerDeletion": True}]
    return {"apiVersion": "work.karmada.io/v1alpha1", "kind": "Work", "metadata": work_meta,
            "spec": {"workload": {"manifests": [manifest]}}}


def source_of(work_obj: Mapping[str, Any]) -> str | None:
    """The namespace a namespace Work carries (None: not one)."""
    found = ((work_obj.get("metadata") or {}).get("labels") or {}).get(SOURCE_LABEL)
    return str(found) if found else None


def up_to_date(current: Mapping[str, Any] | None, wanted: Mapping[str, Any]) -> bool:
    """Whether the cached Work already carries what :func:`work` wants (no write needed)."""
    if current is None or (current.get("metadata") or {}).get("deletionTimestamp"):
        return False
    have, want = current.get("metadata") or {}, wanted["metadata"]
    return (current.get("spec") == wanted["spec"]
            and all((have.get("labels") or {}).get(k) == v for k, v in want["labels"].items())
            and all((have.get("annotations") or {}).get(k) == v
                    for k, v in want["annotations"].items())
            and vocabulary.EXECUTION_FINALIZER in (have.get("finalizers") or [])
            and (have.get("ownerReferences") or []) == want.get("ownerReferences", []))
