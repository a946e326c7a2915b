"""What the execution controller applies and reports: pure, table-tested.

* A manifest is applied with Karmada's marks: the label
  ``karmada.io/managed=true`` (the execution and status controllers watch
  member objects by it) and the annotations naming its Work.
* ``Applied`` on the Work: True/``AppliedSuccessful`` with Karmada's
  message, or False/``AppliedFailed`` with the member's error, cut to
  :data:`APPLIED_MESSAGE_LIMIT` characters saying so (Karmada keeps it whole,
  up to the API's 32,768).  A kind the
  member does not serve fails the whole Work before anything is applied.
* A member object is deleted with its Work only when it is that Work's (its
  annotations name the Work), so a Work never deletes what another made.
* A change to a member object needs re-applying when it is deleted or its
  desired state changed (not for status or bookkeeping updates).
* Reachability: a Cluster's ``Ready`` condition True means reachable, False
  unreachable; without one the member is asked.
"""

from __future__ import annotations

import copy
import datetime
from collections.abc import Iterable, Mapping
from typing import Any

from clusterhealth_controlplane.binding import decision as binding
from clusterhealth_core import text

APPLIED = "Applied"
APPLIED_SUCCESSFUL = "AppliedSuccessful"
APPLIED_FAILED = "AppliedFailed"
APPLIED_MESSAGE = "Manifest has been successfully applied"
APPLIED_MESSAGE_LIMIT = 4096
"""Characters of a failed ``Applied`` message at most: a member's error (a webhook's, a
long validation list) is read by people and copied into the binding's status."""

BOOKKEEPING = ("resourceVersion", "managedFields", "generation", "uid", "creationTimestamp")


def prepare(manifest: Mapping[str, Any], work_namespace: str, work_name: str) -> dict[str, Any]:
    """The manifest as applied in the member: with the managed label and the Work's names."""
    obj = copy.deepcopy(dict(manifest))
    meta = obj.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), binding.MANAGED: "true"}
    meta["annotations"] = {**(meta.get("annotations") or {}),
                           binding.WORK_NAMESPACE: work_namespace, binding.WORK_NAME: work_name}
    for key in BOOKKEEPING:
        meta.pop(key, None)
    obj.pop("status", None)
    return obj


def work_of(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(namespace, name)`` of the Work a member object was applied from."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    namespace, name = annotations.get(binding.WORK_NAMESPACE), annotations.get(binding.WORK_NAME)
    return (str(namespace), str(name)) if namespace and name else None


def owned_by(obj: Mapping[str, Any], work_namespace: str, work_name: str) -> bool:
    """Whether the member object is this Work's."""
    return work_of(obj) == (work_namespace, work_name)


def _desired(obj: Mapping[str, Any] | None) -> Any:
    if obj is None:
        return None
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in BOOKKEEPING}
    return {**{k: v for k, v in obj.items() if k not in ("status", "metadata")}, "metadata": meta}


def needs_reapply(event: str, obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> bool:
    """Whether a member object's event may have undone what the Work applied."""
    return event == "DELETED" or old is None or _desired(obj) != _desired(old)


def unserved_message(cluster: str, missing: Iterable[tuple[str, str]]) -> str:
    """Why nothing of the Work was applied: kinds the member does not serve."""
    kinds = ", ".join(f"{kind} ({api_version})" for api_version, kind in missing)
    return (f"cluster {cluster} does not serve {kinds}; nothing of this Work was applied "
            "(install the API in the member, or stop propagating the kind there)")


def applied_condition(ok: bool, message: str, generation: int | None,
                      now: datetime.datetime) -> dict[str, Any]:
    """The Work's ``Applied`` condition."""
    condition: dict[str, Any] = {
        "type": APPLIED, "status": "True" if ok else "False",
        "reason": APPLIED_SUCCESSFUL if ok else APPLIED_FAILED,
        "message": APPLIED_MESSAGE if ok else text.bound_message(message, APPLIED_MESSAGE_LIMIT),
        "lastTransitionTime": now.strftime("%Y-%m-%dT%H:%M:%SZ")}
    if generation is not None:
        condition["observedGeneration"] = generation
    return condition


def ready(cluster: Mapping[str, Any]) -> bool | None:
    """The Cluster's ``Ready`` condition: True, False, or None (none, or Unknown)."""
    for entry in (cluster.get("status") or {}).get("conditions") or []:
        if entry.get("type") == "Ready":
            status = entry.get("status")
            return True if status == "True" else False if status == "False" else None
    return None


def manifests(work: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Work's manifests (objects only)."""
    found = ((work.get("spec") or {}).get("workload") or {}).get("manifests") or []
    return [dict(m) for m in found if isinstance(m, Mapping)]


def has_finalizer(work: Mapping[str, Any]) -> bool:
    """Whether the Work carries the execution controller's finalizer."""
    return binding.EXECUTION_FINALIZER in ((work.get("metadata") or {}).get("finalizers") or [])
