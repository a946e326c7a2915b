"""What the execution controller applies and reports: pure, table-tested.

* A manifest is applied with Karmada's marks: the label
  ``karmada.io/managed=true`` (the execution and status controllers watch
  member objects by it) and the annotations naming its Work.
* ``Applied`` on the Work: True/``AppliedSuccessful`` with Karmada's
  message, or False/``AppliedFailed`` with the member's error, cut to
  :data:`APPLIED_MESSAGE_LIMIT` characters saying so (Karmada keeps it whole,
  up to the API's 32,768).  A kind the
  member does not serve fails the whole Work before anything is applied.
* A member object that exists before the Work applies it, and that the Work did
  not create, is a conflict (Karmada's rule): with ``conflictResolution`` ``abort``
  (the default) it is neither changed nor deleted, and ``Applied`` says so, naming
  it; with ``overwrite`` the Work adopts it, marks it adopted, and on deletion
  releases it (takes its marks off) instead of deleting it: a Work deletes only
  what it created.
* A member object is deleted with its Work only when it is that Work's (its
  annotations name the Work), so a Work never deletes what another made.
* A manifest whose scope differs in the member (namespaced on the control plane,
  cluster-scoped there, or the reverse) is refused, never applied elsewhere.
* A change to a member object needs re-applying when it is deleted or its
  desired state changed (not for status or bookkeeping updates).
* Reachability: a Cluster's ``Ready`` condition True means reachable, False
  unreachable; without one the member is asked.
"""

from __future__ import annotations

import copy
import datetime
import enum
from collections.abc import Iterable, Mapping
from typing import Any

from clusterhealth_controlplane import vocabulary, wiretime
from clusterhealth_core import text

APPLIED = vocabulary.APPLIED
APPLIED_SUCCESSFUL = "AppliedSuccessful"
APPLIED_FAILED = "AppliedFailed"
APPLIED_MESSAGE = "Manifest has been successfully applied"
APPLIED_MESSAGE_LIMIT = 4096
"""Characters of a failed ``Applied`` message at most: a member's error (a webhook's, a
long validation list) is read by people and copied into the binding's status."""

BOOKKEEPING = ("resourceVersion", "managedFields", "generation", "uid", "creationTimestamp")
ADOPTED = "work.clusterhealth.io/adopted"
"""On a member object a Work adopted (``overwrite``) rather than created: released, not
deleted, with the Work."""
CREATED_BY = "work.clusterhealth.io/created-by"
"""On a member namespace the execution controller made bare for a workload (no namespace
sync): the namespace's Work, when it comes, counts it as its own."""
CREATED_BY_EXECUTION = "execution-controller"
OUR_MARKS = (ADOPTED, CREATED_BY)
"""Marks only the execution controller sets: taken off a manifest before it is applied."""
RELEASED_LABELS = (vocabulary.MANAGED, vocabulary.RB_ID, vocabulary.CRB_ID)
RELEASED_ANNOTATIONS = (vocabulary.WORK_NAMESPACE, vocabulary.WORK_NAME, ADOPTED,
                        vocabulary.RB_NAMESPACE, vocabulary.RB_NAME, vocabulary.CRB_NAME,
                        vocabulary.TEMPLATE_UID, vocabulary.TEMPLATE_GENERATION,
                        vocabulary.CONFLICT_RESOLUTION)
"""What a released (adopted) object loses: every mark the Work put on it."""


class Verdict(enum.Enum):
    """What applying a manifest does to the member object of its name."""

    CREATE = "create"
    """Nothing there: create it (without force: a concurrent creation is not taken over)."""
    UPDATE = "update"
    """The Work's own object: apply, putting back what was changed by hand."""
    ADOPT = "adopt"
    """Another's object, and ``overwrite``: take it over, marked adopted."""
    CONFLICT = "conflict"
    """Another's object, and ``abort``: leave it alone and say so."""


def resolution(manifest: Mapping[str, Any]) -> str:
    """``overwrite`` or ``abort`` (the default), from the manifest's annotation."""
    annotations = (manifest.get("metadata") or {}).get("annotations") or {}
    found = annotations.get(vocabulary.CONFLICT_RESOLUTION)
    return vocabulary.OVERWRITE if found == vocabulary.OVERWRITE else vocabulary.ABORT


def verdict(manifest: Mapping[str, Any], live: Mapping[str, Any] | None, work_namespace: str,
            work_name: str) -> Verdict:
    """What to do with the member object ``live`` (None: absent) for this Work's manifest."""
    if live is None:
        return Verdict.CREATE
    annotations = (live.get("metadata") or {}).get("annotations") or {}
    if owned_by(live, work_namespace, work_name) \
            or annotations.get(CREATED_BY) == CREATED_BY_EXECUTION:
        return Verdict.UPDATE
    if resolution(manifest) == vocabulary.OVERWRITE:
        return Verdict.ADOPT
    return Verdict.CONFLICT


def adopted(live: Mapping[str, Any] | None) -> bool:
    """Whether the member object was adopted by a Work (not created by it)."""
    annotations = ((live or {}).get("metadata") or {}).get("annotations") or {}
    return annotations.get(ADOPTED) == "true"


def describe(manifest: Mapping[str, Any]) -> str:
    """``Kind namespace/name`` (or ``Kind name``) of a manifest, for messages."""
    meta = manifest.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{manifest.get('kind')} {namespace + '/' if namespace else ''}{meta.get('name')}"


def conflict_message(cluster: str, manifest: Mapping[str, Any],
                     live: Mapping[str, Any]) -> str:
    """Why a manifest was not applied: the member object is another's, and ``abort``."""
    other = vocabulary.work_of(live)
    whose = (f"it belongs to Work {other[0]}/{other[1]}" if other is not None
             else "it was not created by this control plane")
    return (f"{describe(manifest)} already exists in cluster {cluster} and {whose}; with "
            "conflictResolution Abort (the default) it is left as it is, neither changed nor "
            "deleted (conflictResolution: Overwrite in the policy adopts it)")


def scope_refusal(cluster: str, manifest: Mapping[str, Any], namespaced: bool) -> str | None:
    """Why a manifest must not be applied where the member's kind has another scope."""
    has_namespace = bool((manifest.get("metadata") or {}).get("namespace"))
    if has_namespace == namespaced:
        return None
    if has_namespace:
        return (f"{describe(manifest)} is namespaced on the control plane but its kind is "
                f"cluster-scoped in cluster {cluster}: refused (it would be created "
                "cluster-wide there); nothing of this Work was applied")
    return (f"{describe(manifest)} is cluster-scoped on the control plane but its kind is "
            f"namespaced in cluster {cluster}: refused; nothing of this Work was applied")


def prepare(manifest: Mapping[str, Any], work_namespace: str, work_name: str,
            adopt: bool = False) -> dict[str, Any]:
    """The manifest as applied in the member: with the managed label and the Work's names.

    ``adopt``: the object is another's that the Work takes over; marked so.
    """
    obj = copy.deepcopy(dict(manifest))
    meta = obj.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), vocabulary.MANAGED: "true"}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k not in OUR_MARKS}
    meta["annotations"] = {**annotations, vocabulary.WORK_NAMESPACE: work_namespace,
                           vocabulary.WORK_NAME: work_name}
    if adopt:
        meta["annotations"][ADOPTED] = "true"
    for key in BOOKKEEPING:
        meta.pop(key, None)
    obj.pop("status", None)
    return obj


def release_patch() -> dict[str, Any]:
    """A merge patch taking the Work's marks off an adopted object (left otherwise as is)."""
    return {"metadata": {"labels": dict.fromkeys(RELEASED_LABELS),
                         "annotations": dict.fromkeys(RELEASED_ANNOTATIONS)}}


def owned_by(obj: Mapping[str, Any], work_namespace: str, work_name: str) -> bool:
    """Whether the member object is this Work's."""
    return vocabulary.work_of(obj) == (work_namespace, work_name)


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
        "lastTransitionTime": wiretime.format_time(now)}
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
    return vocabulary.EXECUTION_FINALIZER in ((work.get("metadata") or {}).get("finalizers") or [])


CONFLICT_REASON = "ApplyConflict"
"""The Warning Events' reason when a member object is another's and the Work aborts."""


def sources(work: Mapping[str, Any],
            manifest: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """What a user looks at for a Work's trouble: its binding and its resource template.

    Both as minimal object references (apiVersion, kind, metadata), from the annotations
    the binding controller put on the Work and its manifest; ``manifest`` defaults to
    the Work's first.
    """
    annotations = (work.get("metadata") or {}).get("annotations") or {}
    found: list[dict[str, Any]] = []
    if annotations.get(vocabulary.RB_NAME) and annotations.get(vocabulary.RB_NAMESPACE):
        found.append({"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
                      "metadata": {"name": annotations[vocabulary.RB_NAME],
                                   "namespace": annotations[vocabulary.RB_NAMESPACE]}})
    elif annotations.get(vocabulary.CRB_NAME):
        found.append({"apiVersion": "work.karmada.io/v1alpha2",
                      "kind": "ClusterResourceBinding",
                      "metadata": {"name": annotations[vocabulary.CRB_NAME]}})
    source = manifest if manifest is not None else next(iter(manifests(work)), None)
    if source is not None and source.get("kind") and (source.get("metadata") or {}).get("name"):
        meta = source.get("metadata") or {}
        template_meta = {k: meta[k] for k in ("name", "namespace") if meta.get(k)}
        uid = (meta.get("annotations") or {}).get(vocabulary.TEMPLATE_UID)
        if uid:
            template_meta["uid"] = uid
        found.append({"apiVersion": source.get("apiVersion"), "kind": source.get("kind"),
                      "metadata": template_meta})
    return found
