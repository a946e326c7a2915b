"""The namespace sync's API side: control-plane Namespaces in, one Work per member out.

* Namespaces, Clusters and Works are cached by the term's shared informers.
* A key is one namespace name.  Its reconcile applies the namespace's Work in
  every Cluster's execution namespace (server-side apply, field manager
  ``clusterhealth-namespace-sync``) while the namespace is propagated; when it is
  gone or being deleted, its Works are deleted (the execution controller then
  deletes the member namespaces it made).  A namespace that opts out
  (``namespace.karmada.io/skip-auto-propagation``) keeps the Works it has, as in
  Karmada: opting out stops the sync, it does not delete the members' namespaces.
* Re-queued when the namespace changes (labels and annotations included), when a
  Cluster comes or goes (every namespace), and when one of its Works is deleted
  or changed by someone else.
"""

from __future__ import annotations

import logging
from typing import Any

from clusterhealth_controlplane import manager, workwriter
from clusterhealth_controlplane.binding import decision as binding
from clusterhealth_controlplane.namespacesync import decision
from clusterhealth_core import reconcile
from clusterhealth_core.kube import informer, resources

log = logging.getLogger(__name__)

CONTROLLER = "namespaceSync"
FIELD_MANAGER = "clusterhealth-namespace-sync"


class NamespaceSyncController:
    """Namespaces -> Works, one per member."""

    def __init__(self, context: manager.Context) -> None:
        term = context.term
        self.term = term
        self.skipped = context.options.propagation.skipped_namespaces
        self.namespaces = term.informers.informer(resources.NAMESPACES)
        self.clusters = term.informers.informer(resources.CLUSTERS)
        self.works = term.informers.informer(resources.WORKS)
        self.writer = workwriter.WorkWriter(term.api, self.works, FIELD_MANAGER)
        self.index: dict[str, set[str]] = {}
        """Namespace name -> the keys of its Works."""
        self.controller = reconcile.Controller(
            CONTROLLER, self.reconcile_namespace, metrics=term.metrics.controllers,
            clock=term.clock, settings=reconcile.ControllerSettings(workers=context.workers))
        self.namespaces.add_handler(self._on_namespace)
        self.clusters.add_handler(self._on_cluster)
        self.works.add_handler(self._on_work)

    @property
    def synced(self) -> bool:
        """Whether the Namespace, Cluster and Work caches have loaded."""
        return self.namespaces.synced and self.clusters.synced and self.works.synced

    async def run(self) -> None:
        """Reconcile until cancelled."""
        for cache in (self.namespaces, self.clusters, self.works):
            await cache.wait_synced()
        await self.controller.run()

    # --- events -------------------------------------------------------------

    def _on_namespace(self, event: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event == "MODIFIED" and old is not None and _carried(obj) == _carried(old):
            return  # a status write (phase, conditions): nothing a Work carries
        self.controller.enqueue(str(obj["metadata"]["name"]))

    def _on_cluster(self, event: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event == "MODIFIED":
            return
        for name in list(self.namespaces.store):
            self.controller.enqueue(name)

    def _on_work(self, event: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        source = decision.source_of(obj)
        if source is None:
            return
        key = informer.key_of(obj)
        if event == "DELETED":
            self.index.get(source, set()).discard(key)
        else:
            self.index.setdefault(source, set()).add(key)
        if event == "MODIFIED" and old is not None and obj.get("spec") == old.get("spec"):
            return
        self.controller.enqueue(source)

    # --- reconcile ----------------------------------------------------------

    def _works_of(self, name: str) -> list[dict[str, Any]]:
        return [w for w in (self.works.store.get(k) for k in sorted(self.index.get(name, ())))
                if w is not None]

    async def reconcile_namespace(self, name: str) -> reconcile.Result | None:
        """Put the namespace in every member (or take its Works away once it is gone)."""
        namespace = self.namespaces.store.get(name)
        if namespace is None or (namespace.get("metadata") or {}).get("deletionTimestamp"):
            for work in self._works_of(name):
                await self.writer.delete(work)
            return None
        if not decision.synced(namespace, self.skipped):
            return None
        clusters = sorted(self.clusters.store)
        for cluster in clusters:
            wanted = decision.work(namespace, cluster)
            meta = wanted["metadata"]
            if not decision.up_to_date(self.works.store.get(f"{meta['namespace']}/"
                                                            f"{meta['name']}"), wanted):
                await self.writer.apply(wanted)
        gone = [w for w in self._works_of(name)
                if binding.cluster_of(str(w["metadata"]["namespace"])) not in clusters]
        for work in gone:  # a Cluster unjoined: its namespace Works go with it
            await self.writer.delete(work)
        return None


def _carried(namespace: dict[str, Any]) -> Any:
    meta = namespace.get("metadata") or {}
    return (meta.get("labels"), meta.get("annotations"), meta.get("deletionTimestamp"))
