"""The kopf handlers of the prototype: indexes, two event handlers, and the writes.

Keyed by Cluster like ``clusterhealth_remedy.controller``, level-triggered:

* ``remedies_index`` and ``clusters_index`` (``@kopf.index``) hold every
  parsed Remedy and, per Cluster, its condition statuses and the status
  fields this controller owns.  kopf fills both before any handler runs.
* ``@kopf.on.event`` on Clusters: every event of a Cluster (its conditions,
  someone else disturbing ``remedyActions``, the initial listing) recomputes
  its decision from the Remedies index; a difference is written through the
  handler's ``patch`` (kopf merge-patches the status subresource).
* ``@kopf.on.event`` on Remedies: a created, changed or deleted Remedy
  re-evaluates the Clusters its old or new affinity covers
  (:func:`clusterhealth_remedy.decision.affected_clusters`) from the Clusters
  index, and merge-patches those that differ, ``Shared.workers`` at a time.

Why events and not kopf's change handlers (``on.create/update/delete``,
``on.field``): those keep a diff base in an annotation on every object (a
metadata write per change, 1,000 at the first start), ``on.delete`` needs a
finalizer (a Remedy could not be deleted while the controller is down), and
``on.field("status.conditions")`` would put the status into that annotation.
The old side of a Remedy update therefore comes from ``Shared.remedies``, the
operator's memo.

Writes of Clusters other than the handled object go through kopf's own
patching function (``kopf._cogs.clients.patching.patch_obj``, the one kopf
uses for ``patch``): kopf has no public client, and a second HTTP stack would
charge kopf for memory it does not need.  It is a private API: the bench extra
pins kopf's minor version.

Events mirror ours (``RemedyActionAdded`` Warning / ``RemedyActionRemoved``
Normal, one per changed action) through ``kopf.warn``/``kopf.info``.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, cast

import kopf
from kopf._cogs.clients import patching

from clusterhealth_core.api import meta, remedy
from clusterhealth_core.kube import resources
from clusterhealth_remedy import controller, decision

CLUSTERS = kopf.Resource(
    resources.CLUSTERS.group, resources.CLUSTERS.version, resources.CLUSTERS.plural,
    kind=resources.CLUSTERS.kind, namespaced=False, subresources=frozenset({"status"}),
)
"""The Cluster resource as kopf's patching needs it (status is a subresource)."""
OWNED = ("remedyActions", "remedyActionSources")
"""The Cluster status fields this controller owns."""

RemediesIndex = Mapping[str, Collection[remedy.Remedy]]
"""``remedies_index`` as handlers read it: a ``kopf.Index`` (or any such mapping)."""


@dataclasses.dataclass(frozen=True)
class ClusterView:
    """What the Clusters index keeps of one Cluster."""

    uid: str
    conditions: Mapping[str, str]
    """``type -> status``, the input of :func:`clusterhealth_remedy.decision.decide`."""
    owned: Mapping[str, Any]
    """The owned status fields as they were on the server (:func:`owned_status`)."""


ClustersIndex = Mapping[str, Collection[ClusterView]]
"""``clusters_index`` as handlers read it."""


@dataclasses.dataclass
class Shared:
    """The operator's memo (kopf copies it shallowly per object: the dicts are shared)."""

    settings: kopf.OperatorSettings
    workers: int = 4
    """Concurrent Cluster writes after a Remedy changed (ours: ``--workers``)."""
    events: bool = True
    """Whether action changes are posted as Events (as ours does)."""
    remedies: dict[str, remedy.Remedy] = dataclasses.field(default_factory=dict)
    """The last spec seen of each Remedy: the old side of its next update."""
    written: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    """The owned status last written (or found right) per Cluster: skips repeated writes."""


# --- reading ---------------------------------------------------------------------

def condition_statuses(body: Mapping[str, Any]) -> dict[str, str]:
    """A Cluster's conditions as ``type -> status``."""
    conditions = (body.get("status") or {}).get("conditions") or []
    return {str(c.get("type")): str(c.get("status")) for c in conditions}


owned_status = controller.owned_status
"""The owned status fields, in the wire shape of ``decision.status_patch`` (ours, shared)."""


def sources(owned: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """``action -> remedies`` from owned status fields (an action without source: ``()``)."""
    result: dict[str, tuple[str, ...]] = {a: () for a in owned.get("remedyActions", [])}
    for source in owned.get("remedyActionSources", []):
        result[str(source["action"])] = tuple(source["remedies"])
    return result


def all_remedies(index: RemediesIndex) -> list[remedy.Remedy]:
    """Every Remedy in the index."""
    return [r for store in index.values() for r in store]


def view_of(index: ClustersIndex, name: str) -> ClusterView | None:
    """One Cluster from the index, or None."""
    store = index.get(name)
    return next(iter(store), None) if store else None


def merge_patch(desired: Mapping[str, Any]) -> dict[str, Any]:
    """A merge patch of the status that makes the owned fields ``desired`` (null = remove).

    A merge patch removes a field whoever wrote it: another controller's
    ``remedyActions`` (Karmada's, before a switch) is cleared too.
    """
    return {field: desired.get(field) for field in OWNED}


def plan(names: Iterable[str], clusters: ClustersIndex, remedies: Sequence[remedy.Remedy],
         written: Mapping[str, Mapping[str, Any]]
         ) -> list[tuple[str, ClusterView, decision.Decision]]:
    """The Clusters among ``names`` whose owned status must change, with their decision.

    A Cluster is skipped when the index already shows the desired status, or
    when this process already wrote it (its watch event may not be back yet).
    """
    todo = []
    for name in sorted(names):
        view = view_of(clusters, name)
        if view is None:
            continue  # named by a Remedy, does not exist
        result = decision.decide(name, view.conditions, remedies)
        desired = decision.status_patch(result)
        if view.owned != desired and written.get(name) != desired:
            todo.append((name, view, result))
    return todo


# --- indexes -----------------------------------------------------------------------

def index_remedies(name: str, body: kopf.Body, logger: kopf.Logger, **_: Any
                   ) -> dict[str, remedy.Remedy] | None:
    """``remedies_index``: the parsed Remedy by name (a malformed one is left out)."""
    parsed = parse_remedy(body, logger)
    return None if parsed is None else {name: parsed}


def index_clusters(name: str, uid: str, body: kopf.Body, **_: Any) -> dict[str, ClusterView]:
    """``clusters_index``: what decisions need of a Cluster, by name."""
    return {name: ClusterView(uid, condition_statuses(body), owned_status(body))}


def parse_remedy(body: Mapping[str, Any], logger: kopf.Logger) -> remedy.Remedy | None:
    """The typed Remedy, or None (logged) when the CRD schema let a bad one through."""
    try:
        return remedy.Remedy.from_dict(body)
    except meta.ValidationError as exc:
        logger.error("ignoring malformed Remedy %s: %s",
                     (body.get("metadata") or {}).get("name"), exc)
        return None


# --- event handlers ------------------------------------------------------------------

async def on_cluster(type: str | None, name: str, body: kopf.Body, patch: kopf.Patch,
                     remedies_index: RemediesIndex, memo: Shared, **_: Any) -> None:
    """Recompute one Cluster on any of its events; patch its status if it differs."""
    if type == "DELETED":
        memo.written.pop(name, None)
        return
    result = decision.decide(name, condition_statuses(body), all_remedies(remedies_index))
    desired = decision.status_patch(result)
    current = owned_status(body)
    memo.written[name] = desired
    if current == desired:
        return
    patch.status.update(merge_patch(desired))
    if memo.events:
        post_changes(body, sources(current), result)


async def on_remedy(type: str | None, name: str, body: kopf.Body, logger: kopf.Logger,
                    remedies_index: RemediesIndex, clusters_index: ClustersIndex,
                    memo: Shared, **_: Any) -> None:
    """Re-evaluate the Clusters a created, changed or deleted Remedy covers (or covered)."""
    before = memo.remedies.get(name)
    after = None if type == "DELETED" else parse_remedy(body, logger)
    if after is None:
        memo.remedies.pop(name, None)
    else:
        memo.remedies[name] = after
    if type is None and before is None:
        # the first listing: kopf completes every index before any handler, and
        # each Cluster's own listing event evaluates it against all Remedies
        return
    if before is not None and after is not None and before.spec == after.spec:
        return  # metadata or status only
    affected = decision.affected_clusters(before, after, clusters_index.keys())
    todo = plan(affected, clusters_index, all_remedies(remedies_index), memo.written)
    gate = asyncio.Semaphore(memo.workers)

    async def write(cluster: str, view: ClusterView, result: decision.Decision) -> None:
        desired = decision.status_patch(result)
        async with gate:
            memo.written[cluster] = desired
            try:
                await patching.patch_obj(
                    settings=memo.settings, resource=CLUSTERS, namespace=None, name=cluster,
                    patch=kopf.Patch({"status": merge_patch(desired)}), logger=logger)
            except Exception as exc:  # kopf retried already; the next Cluster event repairs it
                memo.written.pop(cluster, None)
                logger.warning("cluster %s: status write failed: %s", cluster, exc)
                return
        if memo.events:
            post_changes(reference(cluster, view.uid), sources(view.owned), result)

    await asyncio.gather(*(write(*item) for item in todo))


# --- events -------------------------------------------------------------------------

def reference(name: str, uid: str) -> kopf.Body:
    """A Cluster body with just enough for kopf's Event reference."""
    return kopf.Body({"apiVersion": resources.CLUSTERS.api_version, "kind": "Cluster",
                      "metadata": {"name": name, "uid": uid}})


def post_changes(target: kopf.Body, before: Mapping[str, tuple[str, ...]],
                 result: decision.Decision) -> None:
    """Queue one Event per added or removed action (kopf posts them in the background)."""
    added, removed = decision.action_changes(before, result.sources)
    by_remedy = {m.remedy: m for m in result.matches}
    for action, names in added:
        why = ", ".join(f"Remedy {r} ({decision.describe(by_remedy[r].requirement)})"
                        for r in names if r in by_remedy)
        kopf.warn(target, reason="RemedyActionAdded", message=f"{action} added by {why}")
    for action, names in removed:
        was = f" (was: {', '.join(names)})" if names else ""
        kopf.info(target, reason="RemedyActionRemoved",
                  message=f"{action} removed: no Remedy requires it any more{was}")


# --- registration ---------------------------------------------------------------------

def make_registry() -> kopf.OperatorRegistry:
    """A registry with the prototype's handlers (nothing registers at import time)."""
    registry = kopf.OperatorRegistry()
    cl, rm = resources.CLUSTERS, resources.REMEDIES
    kopf.on.login(registry=registry)(kopf.login_with_kubeconfig)
    kopf.index(rm.group, rm.version, rm.plural, id="remedies_index",
               registry=registry)(index_remedies)
    kopf.index(cl.group, cl.version, cl.plural, id="clusters_index",
               registry=registry)(index_clusters)
    # kopf passes indexes as keyword arguments named by their id, which its
    # handler protocol cannot express: hence the casts
    kopf.on.event(rm.group, rm.version, rm.plural, id="remedy_event",
                  registry=registry)(cast(Any, on_remedy))
    kopf.on.event(cl.group, cl.version, cl.plural, id="cluster_event",
                  registry=registry)(cast(Any, on_cluster))
    return registry
