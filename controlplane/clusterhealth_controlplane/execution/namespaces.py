"""The namespaces the execution controller knows exist in each member, and making them.

Why: a namespaced manifest is applied only into a namespace that exists in its
member.  One found (or made) is remembered per member, so each is asked for once;
a member's memory goes with its caches (a new client, a deleted Cluster) and a
namespace found gone while applying is asked for again.  With the namespace sync
running, a namespace it propagates is created by its own Work, with the control
plane's labels (Pod Security admission among them): a workload never lands in a
bare namespace made ahead of it.  :class:`MemberNamespaces` holds that memory with
the logic that fills it, apart from the controller applying Works.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from clusterhealth_controlplane import manager, vocabulary
from clusterhealth_controlplane.execution import decision
from clusterhealth_controlplane.namespacesync import decision as namespacesync
from clusterhealth_core import builder
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, informer, resources


class MemberNamespaces:
    """Per member, the namespaces known to exist there; the bare ones made here.

    ``works``: the Works' cache (a synced namespace's own Work is looked up there);
    ``enqueue(request)``: queues that Work in the execution controller.
    """

    def __init__(self, context: manager.Context, works: informer.Informer,
                 enqueue: Callable[[builder.Request], None]) -> None:
        self.known: dict[str, set[str]] = {}
        """Per member, the namespaces known to exist there."""
        self.works = works
        self._enqueue = enqueue
        self.skipped = context.options.propagation.skipped_namespaces
        self.sync: informer.Informer | None = (
            context.term.informers.informer(resources.NAMESPACES)
            if "namespaceSync" in context.controllers else None)
        """The control plane's Namespaces, when the namespace sync runs beside (it then makes
        the member namespaces it propagates, with their labels)."""

    def forget(self, cluster: str) -> None:
        """The member's caches went (a new client, a deleted Cluster): ask again."""
        self.known.pop(cluster, None)

    def observe(self, event: builder.Event) -> None:
        """A deleted Cluster's namespaces are forgotten (an ``observe`` of the Clusters)."""
        if event.type == builder.DELETED:
            self.forget(str(event.obj["metadata"]["name"]))

    def gone(self, cluster: str, namespace: str) -> None:
        """``namespace`` was found missing in the member."""
        self.known.get(cluster, set()).discard(namespace)

    async def ready(self, cluster: str, api: kube.ApiClient, namespace: str) -> bool:
        """Whether ``namespace`` exists in the member (made bare here unless the sync owns it)."""
        known = self.known.setdefault(cluster, set())
        if namespace in known:
            return True
        try:
            await api.get(resources.NAMESPACES, namespace)
        except errors.NotFound:
            pass
        else:
            known.add(namespace)
            return True
        if self.sync is not None:
            source = self.sync.store.get(namespace)
            if source is not None and namespacesync.synced(source, self.skipped):
                work = self.works.store.get(f"{vocabulary.execution_namespace(cluster)}/"
                                            f"{namespacesync.work_name(namespace)}")
                if work is not None:
                    self._enqueue(builder.Request.of(work))
                return False
        with contextlib.suppress(errors.Conflict):
            await api.create(resources.NAMESPACES, {"metadata": {
                "name": namespace,
                "annotations": {decision.CREATED_BY: decision.CREATED_BY_EXECUTION}}})
        known.add(namespace)
        return True
