"""The Works a binding asks for, and the Works it no longer wants: pure, table-tested.

Karmada's binding controller, as v1.18.2 does it:

* one Work per target cluster (``spec.clusters``), in that cluster's
  execution namespace ``karmada-es-<cluster>``, named by
  :func:`vocabulary.work_name` (Karmada's ``names.GenerateWorkName``: the template's
  name, a dash, and an FNV-32a hash of ``<namespace>-<name>-<kind>``);
* the Work's manifest is the resource template without what belongs to the
  control plane's copy (status, server bookkeeping, the policy's claim), and
  with the cluster's share of the replicas for kinds that have replicas
  (the default interpreter's ``ReviseReplica``), whatever the template says;
* labels and annotations link the Work and the manifest back to the binding
  (Karmada's keys), and the manifest carries the Work's name and namespace so
  that the execution controller can find a member object's Work;
* a Work for a cluster no longer targeted is an orphan and is deleted,
  except while a graceful-eviction task from that cluster is pending (the
  application keeps running there until its replacement is healthy), unless
  the task's ``purgeMode`` is ``Directly`` (or the deprecated ``Immediately``).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from clusterhealth_controlplane import vocabulary

CLAIM_KEYS = ("propagationpolicy.karmada.io/name", "propagationpolicy.karmada.io/namespace",
              "propagationpolicy.karmada.io/permanent-id",
              "clusterpropagationpolicy.karmada.io/name",
              "clusterpropagationpolicy.karmada.io/permanent-id")
"""The detector's claim on the template: the control plane's business, not the members'."""

DROPPED_METADATA = ("resourceVersion", "uid", "managedFields", "ownerReferences",
                    "creationTimestamp", "generation", "selfLink", "deletionTimestamp",
                    "deletionGracePeriodSeconds", "finalizers")

REPLICA_KINDS = {("apps", "Deployment"), ("apps", "StatefulSet"), ("apps", "ReplicaSet")}
"""Kinds whose ``spec.replicas`` is revised per cluster (Karmada's default interpreter)."""

def template_state(obj: Mapping[str, Any] | None) -> Any:
    """What of a template its binding and Works carry: all but status and bookkeeping.

    Two versions with the same state differ only by a status write (or by
    ``resourceVersion``/``managedFields``), which changes no binding or Work.
    """
    if obj is None:
        return None
    meta = {k: v for k, v in (obj.get("metadata") or {}).items()
            if k not in ("resourceVersion", "managedFields", "generation")}
    return {**{k: v for k, v in obj.items() if k not in ("status", "metadata")}, "metadata": meta}


def _group(api_version: str) -> str:
    return api_version.split("/")[0] if "/" in api_version else ""


def has_replicas(obj: Mapping[str, Any]) -> bool:
    """Whether the kind's ``spec.replicas`` is divided among clusters."""
    return (_group(str(obj.get("apiVersion", ""))), obj.get("kind")) in REPLICA_KINDS


@dataclasses.dataclass(frozen=True)
class DesiredWork:
    """One Work to apply: where, named how, with which marks and manifest."""

    cluster: str
    namespace: str
    name: str
    labels: dict[str, str]
    annotations: dict[str, str]
    manifest: dict[str, Any]

    def body(self) -> dict[str, Any]:
        """The Work as the binding controller applies it.

        It carries the execution controller's finalizer from the start, as Karmada's
        binding controller creates it: the execution controller then reconciles a new
        Work once, instead of once more for the finalizer it would add.
        """
        return {"apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
                "metadata": {"name": self.name, "namespace": self.namespace,
                             "labels": self.labels, "annotations": self.annotations,
                             "finalizers": [vocabulary.EXECUTION_FINALIZER]},
                "spec": {"workload": {"manifests": [self.manifest]}}}


def _holds(current: Any, wanted: Any) -> bool:
    """Whether ``current`` already has everything of ``wanted``.

    Every key of a mapping (more keys are someone else's and stay); anything else equal
    (lists whole, as an apply replaces them).
    """
    if isinstance(wanted, Mapping):
        return isinstance(current, Mapping) and all(
            key in current and _holds(current[key], value) for key, value in wanted.items())
    return bool(current == wanted)


def carried(body: Mapping[str, Any], current: Mapping[str, Any] | None) -> bool:
    """Whether the cached Work ``current`` already carries all that applying ``body`` sets.

    ``body``: the Work as applied (:meth:`DesiredWork.body`, built once by the caller).

    Karmada's binding controller updates a Work only when it differs; applying one that
    does not differ costs the API server a write and wakes the execution controller for
    nothing.  A Work being deleted is never carried (it is made again once gone), and a
    hand edit of anything we apply (a label dropped, the manifest changed) makes it differ,
    so the next apply puts it back.  The finalizers are a set: ours must be among them.
    """
    if current is None:
        return False
    meta = current.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return False
    wanted = body["metadata"]
    return (_holds(meta.get("labels") or {}, wanted["labels"])
            and _holds(meta.get("annotations") or {}, wanted["annotations"])
            and set(wanted["finalizers"]) <= set(meta.get("finalizers") or ())
            and _holds(current.get("spec"), body["spec"]))


def binding_id(binding: Mapping[str, Any]) -> str:
    """The binding's permanent id: its label if it has one, else its uid."""
    meta = binding.get("metadata") or {}
    labels = meta.get("labels") or {}
    return str(labels.get(vocabulary.RB_ID) or labels.get(vocabulary.CRB_ID)
               or meta.get("uid") or "")


def manifest(template: Mapping[str, Any], replicas: int | None) -> dict[str, Any]:
    """The template as members get it: no status, no bookkeeping, no claim; revised replicas."""
    obj = copy.deepcopy(dict(template))
    obj.pop("status", None)
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in DROPPED_METADATA}
    for key in ("labels", "annotations"):
        kept = {k: v for k, v in (meta.get(key) or {}).items() if k not in CLAIM_KEYS}
        if kept:
            meta[key] = kept
        else:
            meta.pop(key, None)
    obj["metadata"] = meta
    prune = MEMBER_SPECIFIC.get((_group(str(obj.get("apiVersion") or "")),
                                 str(obj.get("kind") or "")))
    if prune is not None:
        prune(obj)
    if replicas is not None and has_replicas(obj):
        obj.setdefault("spec", {})["replicas"] = replicas
    return obj


def _drop(mapping: Any, *keys: str) -> None:
    if isinstance(mapping, dict):
        for key in keys:
            mapping.pop(key, None)


def _prune_service(obj: dict[str, Any]) -> None:
    # the control plane's cluster IP means nothing in a member, which allocates its own;
    # "None" asks for a headless Service and stays
    spec = obj.get("spec")
    if isinstance(spec, dict) and "clusterIP" in spec and spec["clusterIP"] != "None":
        _drop(spec, "clusterIP", "clusterIPs")


def _prune_deployment(obj: dict[str, Any]) -> None:
    _drop(obj["metadata"].get("annotations"), "deployment.kubernetes.io/revision",
          "deployment.kubernetes.io/revision-history")
    if not obj["metadata"].get("annotations"):
        obj["metadata"].pop("annotations", None)


def _prune_job(obj: dict[str, Any]) -> None:
    # the selector the control plane's API server generated names the template's uid; the
    # member generates its own (unless the user chose the selector: manualSelector)
    spec = obj.get("spec")
    if not isinstance(spec, dict) or spec.get("manualSelector") is True:
        return
    _drop((spec.get("selector") or {}).get("matchLabels"), "controller-uid",
          "batch.kubernetes.io/controller-uid")
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels")
    _drop(labels, "controller-uid", "batch.kubernetes.io/controller-uid", "job-name",
          "batch.kubernetes.io/job-name")


def _prune_service_account(obj: dict[str, Any]) -> None:
    secrets = obj.get("secrets")
    if isinstance(secrets, list):
        prefix = f"{obj['metadata'].get('name', '')}-token-"
        obj["secrets"] = [s for s in secrets
                          if not str((s or {}).get("name", "")).startswith(prefix)]


def _prune_secret(obj: dict[str, Any]) -> None:
    # a service-account token is the member's to fill in, for its own ServiceAccount
    if obj.get("type") == "kubernetes.io/service-account-token":
        _drop(obj["metadata"].get("annotations"), "kubernetes.io/service-account.uid")
        obj.pop("data", None)


def _prune_pvc(obj: dict[str, Any]) -> None:
    _drop(obj["metadata"].get("annotations"), "volume.kubernetes.io/selected-node")


MEMBER_SPECIFIC: dict[tuple[str, str], Callable[[dict[str, Any]], None]] = {
    ("", "Service"): _prune_service,
    ("apps", "Deployment"): _prune_deployment,
    ("batch", "Job"): _prune_job,
    ("", "ServiceAccount"): _prune_service_account,
    ("", "Secret"): _prune_secret,
    ("", "PersistentVolumeClaim"): _prune_pvc,
}
"""Fields the control plane's API server or controllers filled in that a member must fill
in for itself, removed per kind before a template goes to the members (the kinds and
fields Karmada's default interpreter prunes)."""


def conflict_resolution(spec: Mapping[str, Any], template_meta: Mapping[str, Any]) -> str:
    """``overwrite`` or ``abort``, as Karmada decides it for a Work.

    The template's own ``work.karmada.io/conflict-resolution`` annotation wins when it says
    ``overwrite`` or ``abort``; otherwise the binding's ``conflictResolution`` (``Overwrite``
    or, by default, ``Abort``).
    """
    own = ((template_meta.get("annotations") or {}).get(vocabulary.CONFLICT_RESOLUTION))
    if own in (vocabulary.OVERWRITE, vocabulary.ABORT):
        return str(own)
    return vocabulary.OVERWRITE if spec.get("conflictResolution") == "Overwrite" \
        else vocabulary.ABORT


def desired_works(binding: Mapping[str, Any], template: Mapping[str, Any]) -> list[DesiredWork]:
    """The Works ``binding`` asks for, one per target cluster, in ``spec.clusters`` order."""
    meta = binding.get("metadata") or {}
    spec = binding.get("spec") or {}
    cluster_scoped = not meta.get("namespace")
    template_meta = template.get("metadata") or {}
    if cluster_scoped:
        labels = {vocabulary.CRB_ID: binding_id(binding)}
        annotations = {vocabulary.CRB_NAME: str(meta["name"])}
    else:
        labels = {vocabulary.RB_ID: binding_id(binding)}
        annotations = {vocabulary.RB_NAMESPACE: str(meta["namespace"]),
                       vocabulary.RB_NAME: str(meta["name"])}
    annotations[vocabulary.CONFLICT_RESOLUTION] = conflict_resolution(spec, template_meta)
    name = vocabulary.work_name(str(template["kind"]), str(template_meta["name"]),
                     template_meta.get("namespace"))
    found: list[DesiredWork] = []
    seen: set[str] = set()
    for target in spec.get("clusters") or []:
        cluster = str(target.get("name") or "")
        if not cluster or cluster in seen:
            continue
        seen.add(cluster)
        namespace = vocabulary.execution_namespace(cluster)
        body = manifest(template, int(target.get("replicas") or 0))
        body_meta = body["metadata"]
        body_meta["labels"] = {**(body_meta.get("labels") or {}), **labels,
                               vocabulary.MANAGED: "true"}
        extra = {**annotations, vocabulary.WORK_NAME: name, vocabulary.WORK_NAMESPACE: namespace,
                 vocabulary.CONFLICT_RESOLUTION: annotations[vocabulary.CONFLICT_RESOLUTION]}
        if template_meta.get("uid"):
            extra[vocabulary.TEMPLATE_UID] = str(template_meta["uid"])
        if template_meta.get("generation"):
            extra[vocabulary.TEMPLATE_GENERATION] = str(template_meta["generation"])
        body_meta["annotations"] = {**(body_meta.get("annotations") or {}), **extra}
        found.append(DesiredWork(cluster, namespace, name, dict(labels), dict(annotations),
                                 body))
    return found


REFUSED_CROSS_NAMESPACE = "CrossNamespaceResource"
REFUSED_PROTECTED_NAMESPACE = "ProtectedNamespace"


@dataclasses.dataclass(frozen=True)
class Refusal:
    """Why a binding is never acted on: a CamelCase reason and what to change."""

    reason: str
    message: str


def refusal(binding: Mapping[str, Any], credentials_namespace: str) -> Refusal | None:
    """Why ``binding`` must not be propagated (None: it may be).

    A namespace user may write ResourceBindings in their namespace (Karmada's ``edit`` role
    grants it), and ``spec.resource`` is theirs to set, so the binding is the request of
    whoever may write in its namespace:

    * a ResourceBinding propagates only a template of its own namespace (not another
      namespace's, not a cluster-scoped one);
    * no binding propagates from the cluster credentials namespace (the members' admin
      tokens) or an execution namespace (``karmada-es-*``: the Works themselves).
    """
    meta = binding.get("metadata") or {}
    reference = (binding.get("spec") or {}).get("resource") or {}
    own = str(meta.get("namespace") or "")
    target = str(reference.get("namespace") or "")
    what = f"{reference.get('kind')} {target + '/' if target else ''}{reference.get('name')}"
    if own and target != own:
        where = f"namespace {target}" if target else "no namespace (cluster-scoped)"
        return Refusal(REFUSED_CROSS_NAMESPACE, (
            f"ResourceBinding {own}/{meta.get('name')} names {what}, in {where}: a "
            f"ResourceBinding propagates only a resource of its own namespace ({own}); "
            "nothing of it is propagated"))
    if target and (target == credentials_namespace or vocabulary.cluster_of(target) is not None):
        return Refusal(REFUSED_PROTECTED_NAMESPACE, (
            f"{what} is in {target}, which holds the control plane's own objects (member "
            "credentials or Works) and is never a source of templates; nothing of it is "
            "propagated"))
    return None


PURGE_DIRECTLY = ("Directly", "Immediately")
"""Task purge modes that keep nothing: the Work goes at once (``Immediately`` is the
deprecated name of ``Directly``), as Karmada's binding controller treats them."""


def evicting_clusters(binding: Mapping[str, Any]) -> set[str]:
    """Clusters a graceful-eviction task still keeps the Work in (not those purged directly)."""
    tasks = (binding.get("spec") or {}).get("gracefulEvictionTasks") or []
    return {str(t.get("fromCluster")) for t in tasks
            if t.get("fromCluster") and t.get("purgeMode") not in PURGE_DIRECTLY}


def orphans(binding: Mapping[str, Any] | None, existing: Iterable[Mapping[str, Any]],
            desired: Iterable[DesiredWork]) -> list[Mapping[str, Any]]:
    """The existing Works of a binding to delete.

    ``binding`` None (gone or being deleted): all of them.  Otherwise those
    not among ``desired`` (by namespace and name), unless a graceful-eviction
    task from their cluster is pending.
    """
    works = list(existing)
    if binding is None:
        return works
    wanted = {(d.namespace, d.name) for d in desired}
    kept = evicting_clusters(binding)
    found = []
    for work in works:
        meta = work.get("metadata") or {}
        namespace = str(meta.get("namespace", ""))
        if (namespace, meta.get("name")) in wanted or vocabulary.cluster_of(namespace) in kept:
            continue
        found.append(work)
    return found
