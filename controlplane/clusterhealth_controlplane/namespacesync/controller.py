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

from clusterhealth_controlplane import manager, vocabulary, workwriter
from clusterhealth_controlplane.namespacesync import decision
from clusterhealth_core import builder, reconcile
from clusterhealth_core.kube import informer, resources

log = logging.getLogger(__name__)

CONTROLLER = "namespaceSync"
FIELD_MANAGER = "clusterhealth-namespace-sync"


class NamespaceSyncController(manager.Controller):
    """Namespaces -> Works, one per member."""

    def __init__(self, context: manager.Context) -> None:
        super().__init__(context)
        self.skipped = context.options.propagation.skipped_namespaces
        self.namespaces = self.term.informers.informer(resources.NAMESPACES)
        self.writer = workwriter.WorkWriter(self.term.api, self.works, FIELD_MANAGER)
        self.index = builder.Index(informer.key_of,
                                   lambda work: filter(None, [decision.source_of(work)]))
        """Namespace name -> the keys of its Works."""
        self.controller = (
            builder.Builder(CONTROLLER, self.term, workers=context.workers)
            .for_(self.namespaces, builder.changed(_carried))  # not a status write
            .watches(self.clusters, builder.every(self.namespaces), builder.not_modified)
            .owns(self.works, _source, builder.SPEC, observe=self.index.observe)
            .complete(self.reconcile_namespace))

    # --- reconcile ----------------------------------------------------------

    def _works_of(self, name: str) -> list[dict[str, Any]]:
        return [w for w in (self.works.store.get(k) for k in sorted(self.index.on(name)))
                if w is not None]

    async def reconcile_namespace(self, request: builder.Request) -> reconcile.Result | None:
        """Put the namespace in every member (or take its Works away once it is gone)."""
        name = request.name
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
                if vocabulary.cluster_of(str(w["metadata"]["namespace"])) not in clusters]
        for work in gone:  # a Cluster unjoined: its namespace Works go with it
            await self.writer.delete(work)
        return None


def _source(work: dict[str, Any]) -> builder.Request | None:
    source = decision.source_of(work)
    return None if source is None else builder.Request("", source)


def _carried(namespace: dict[str, Any]) -> Any:
    meta = namespace.get("metadata") or {}
    return (meta.get("labels"), meta.get("annotations"), meta.get("deletionTimestamp"))
